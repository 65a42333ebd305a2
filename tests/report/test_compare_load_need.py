"""`compare`'s client_bound lines say about how many load CPUs the figure would have needed:
pure logic on constructed summaries, no servers."""

from __future__ import annotations

from tuner.loadgen.capacity import LoadNeed
from tuner.metrics.stats import Spread
from tuner.report.compare_page import Split, client_bound_lines, compare_table
from tuner.workflow.confirm import ConfirmedSummary
from tuner.workflow.side_by_side import ServerRow

NEED = LoadNeed(per_core_rps=20_000, server_rps=25_000, load_cpus=2)


def summary(label: str, rps: float, bound: bool) -> ConfirmedSummary:
    spread = Spread.of([rps * 0.98, rps, rps * 1.02])
    return ConfirmedSummary(
        label, None, {}, spread, Spread.of([1.0, 1.1, 1.2]), Spread.of([30.0, 30.0, 31.0]),
        client_bound=bound, load_need=NEED if bound else None,
    )  # fmt: skip


ROW = ServerRow(
    "bjoern",
    "s-bjoern",
    summary("default", 20_000, bound=True),
    summary("trial 3", 21_000, bound=True),
    tuned_is_default=False,
    config_file=None,
    verdict="v",
)


def test_each_client_bound_line_says_the_load_cpus_it_would_have_needed() -> None:
    lines = client_bound_lines([ROW], Split(load_cpus=1, spare=0))
    assert [line.split(":")[0] for line in lines] == ["bjoern default", "bjoern tuned"]
    for line in lines:
        assert "a floor for the server, not its result" in line
        assert "about 2 load CPUs would have been needed" in line
        assert line.endswith(
            "this machine has none to spare: run on a bigger box or give the server fewer CPUs"
        )
    spare = client_bound_lines([ROW], Split(load_cpus=1, spare=6))[0]
    assert spare.endswith("this machine has 6 to spare: give the load 2 CPUs with --load-cpus")


def test_without_the_split_or_an_estimate_the_line_is_the_floor_alone() -> None:
    (alone, _) = client_bound_lines([ROW])
    assert alone.endswith("more load CPUs (--load-cpus) would settle it")
    table = compare_table([ROW], Split(load_cpus=1, spare=0))
    assert sum("about 2 load CPUs" in note for note in table.notes) == 2
