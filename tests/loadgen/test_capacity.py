"""The load CPUs a client_bound run would have needed: pure arithmetic, no servers."""

from __future__ import annotations

import math

import pytest

from tuner.loadgen.capacity import LoadNeed, load_need, need_text
from tuner.loadgen.checks import CLIENT_BOUND_CPU_PCT
from tuner.machine.cpus import spare_cpus


def test_the_server_at_all_its_cpus_against_what_one_load_core_sends() -> None:
    # One load core fully busy sent 20,000 req/s; the server was 80% busy: it would take
    # 25,000, which 20,000 per core under the 90% line sends with 25000 / 18000 -> 2 cores.
    need = load_need(rps=20_000, load_busy_cpus=1.0, server_busy_share=0.8)
    assert need is not None
    assert need.per_core_rps == pytest.approx(20_000)
    assert need.server_rps == pytest.approx(25_000)
    assert need.load_cpus == math.ceil(25_000 / (20_000 * CLIENT_BOUND_CPU_PCT / 100))


def test_several_load_processes_count_their_summed_cpu() -> None:
    # Four load processes, 3.8 cores between them, a server at half of its CPUs.
    need = load_need(rps=38_000, load_busy_cpus=3.8, server_busy_share=0.5)
    assert need is not None and need.per_core_rps == pytest.approx(10_000)
    assert need.load_cpus == 9  # 76,000 / 9,000 per core = 8.4


def test_a_server_busier_than_its_cpus_counts_as_fully_busy() -> None:
    need = load_need(rps=9_000, load_busy_cpus=1.0, server_busy_share=1.3)
    assert need is not None and need.server_rps == pytest.approx(9_000)
    assert need.load_cpus == 2  # one core at the 90% line sends 8,100


@pytest.mark.parametrize(
    ("rps", "load", "share"), [(0, 1, 0.5), (100, 0, 0.5), (100, 1, 0), (math.nan, 1, 0.5)]
)
def test_no_estimate_without_a_figure_to_scale(rps: float, load: float, share: float) -> None:
    assert load_need(rps, load, share) is None


def test_the_sentence_says_how_many_and_whether_this_machine_has_them() -> None:
    need = LoadNeed(per_core_rps=20_000, server_rps=25_000, load_cpus=2)
    enough = need_text(need, load_cpus=1, spare=2)
    assert enough.startswith("about 2 load CPUs would have been needed")
    assert "20,000 req/s per busy core" in enough and "about 25,000 req/s" in enough
    assert enough.endswith("this machine has 2 to spare: give the load 2 CPUs with --load-cpus")
    assert need_text(need, load_cpus=1, spare=0).endswith(
        "this machine has none to spare: run on a bigger box or give the server fewer CPUs"
    )
    short = need_text(LoadNeed(1.0, 5.0, 6), load_cpus=1, spare=3)
    assert "has only 3 to spare: run on a bigger box" in short
    assert "no more than the 2 it had" in need_text(need, load_cpus=2, spare=0)
    assert need_text(None, load_cpus=1, spare=4) == ""


def test_spare_cpus_are_those_in_neither_set() -> None:
    assert spare_cpus((0,), (1,), available=(0, 1)) == 0
    assert spare_cpus((0, 1), (2,), available=range(8)) == 5


def test_the_estimate_reads_back_from_its_json() -> None:
    need = LoadNeed(per_core_rps=20_000.0, server_rps=25_000.0, load_cpus=2)
    assert LoadNeed.from_json(need.to_json()) == need
    assert LoadNeed.from_json(None) is None and LoadNeed.from_json({"load_cpus": 2}) is None
