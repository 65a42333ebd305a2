"""`compare --for-cpus`, the parts that need no server: which servers take part (a named one
that writes no file sized at boot is refused, `all` leaves it out in one line), what the page
says of the sizes, and how many trials each finalist draws at the other sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.cli import main
from tuner.commands.compare_sizes import LEFT_OUT, SizedFor, sizable
from tuner.errors import ConfigError
from tuner.servers import SERVERS, get_adapter
from tuner.workflow.race_runner import RaceOptions
from tuner.workflow.sizes import size_confirm_runs, size_trials

SIZED = [name for name in SERVERS if get_adapter(name).sizing_env]
UNSIZED = [name for name in SERVERS if get_adapter(name).sizing_env is None]
HELLO = str(Path(__file__).resolve().parents[2] / "apps" / "hello.py")


def test_without_sizes_every_server_takes_part() -> None:
    sized = sizable(UNSIZED[:2], ",".join(UNSIZED[:2]), ())
    assert sized == SizedFor() and sized.kept(UNSIZED[:2]) == UNSIZED[:2]
    assert sized.summary() == [] and sized.left_out_line() == ""
    assert sized.to_json() == {"for_cpus": None, "left_out": []}


def test_a_named_server_without_a_file_sized_at_boot_is_refused_naming_those_with_one() -> None:
    named = [SIZED[0], *UNSIZED[:2]]
    with pytest.raises(ConfigError) as refused:
        sizable(named, ",".join(named), (0.5, 1.0))
    line = str(refused.value)
    assert line.startswith(f"--for-cpus: {UNSIZED[0]}, {UNSIZED[1]} write no file sized at boot")
    assert f"servers that do: {', '.join(SIZED)} (or compare one size with --cpu-limit)" in line


def test_all_leaves_out_the_servers_without_a_file_sized_at_boot_and_says_which() -> None:
    everyone = [*SIZED, *UNSIZED]
    sized = sizable(everyone, "all", (0.5, 1.0, 2.0))
    assert sized.kept(everyone) == SIZED and sized.left_out == tuple(UNSIZED)
    assert sized.left_out_line() == f"--for-cpus: {LEFT_OUT}{', '.join(UNSIZED)}"
    summary = sized.summary()
    assert summary[0].startswith("Sized at boot (--for-cpus 0.5,1,2): the servers are ranked at 2")
    assert summary[1] == f"Servers {LEFT_OUT}{', '.join(UNSIZED)}."
    assert sized.to_json() == {"for_cpus": [0.5, 1.0, 2.0], "left_out": UNSIZED}
    # Fewer than two left: nothing to compare.
    with pytest.raises(ConfigError, match="fewer than two of the servers installed here"):
        sizable([SIZED[0], *UNSIZED], "all", (0.5, 1.0))


def test_each_finalist_draws_as_many_trials_at_each_other_size_as_tune_does() -> None:
    """And measures its best counts there again in the final rounds' count: both in the
    budget."""

    def options(sizes: tuple[float, ...], trials: int = 30, rounds: int = 1) -> RaceOptions:
        return RaceOptions(60.0, trials, 1, rounds, {}, False, sizes)

    assert options(()).sized_trials == 0
    assert options((0.5, 1.0)).sized_trials == size_trials(30) + size_confirm_runs(1)
    both = options((0.5, 1.0, 2.0), trials=3, rounds=5).sized_trials
    assert both == 2 * (size_trials(3) + 2 * 5)  # the scaled counts and its best, 5 rounds


def test_all_says_in_one_line_which_servers_it_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any measurement: the servers line names only those that write a sized file, and
    the next line those `all` left out (a bad --compare-rounds then stops the run, exit 2)."""
    argv = ["compare", HELLO, "--servers", "all", "--for-cpus", "0.5,1"]
    code = main([*argv, "--compare-rounds", "0", "--storage", f"sqlite:///{tmp_path}/s.db"])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: --compare-rounds 0"), err
    servers = out.splitlines()[0].split("servers: ")[1].split(", ")
    assert servers and all(get_adapter(name).sizing_env for name in servers)
    left = [line for line in out.splitlines() if line.startswith("--for-cpus: left out")]
    if left:  # every installed WSGI server without a sized file is named
        named = left[0].removeprefix(f"--for-cpus: {LEFT_OUT}").split(", ")
        assert all(get_adapter(name).sizing_env is None for name in named)
    assert not list(tmp_path.iterdir())
