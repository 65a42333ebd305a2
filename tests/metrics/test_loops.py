"""The blocked event loop check: the classifier on constructed samples, where a server's loops
run, what a measurement and a study say of it, and the sampler on real (non-server) processes
whose main thread sleeps in `time.sleep` or waits in asyncio's epoll."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support.measurements import measurement
from tuner.metrics.loops import (
    BLOCKED_SHARE,
    MIN_SAMPLES,
    LoopSampler,
    LoopSamples,
    blocked_loop,
    syscall_name,
)
from tuner.metrics.measurement import BlockedLoop, Measurement
from tuner.report.study_view import record_line
from tuner.search.records import TrialRecord
from tuner.servers.base import EventLoops
from tuner.servers.daphne import DaphneAdapter
from tuner.servers.gunicorn_asgi import GunicornAsgiAdapter
from tuner.servers.hypercorn import HypercornAdapter
from tuner.servers.uvicorn import UvicornAdapter
from tuner.workflow.tune_steps import TuneOutcome


def test_syscall_numbers_are_named_per_machine() -> None:
    assert syscall_name("230", "x86_64") == "clock_nanosleep"
    assert syscall_name("232", "x86_64") == "epoll_wait"
    assert syscall_name("115", "aarch64") == "clock_nanosleep"
    assert syscall_name("22", "aarch64") == "epoll_pwait"
    assert syscall_name("9999", "x86_64") == "syscall 9999"
    assert syscall_name("running", "x86_64") == "running"
    assert syscall_name("-1", "x86_64") == "-1"


def loop(pid: int, **states: int) -> LoopSamples:
    return LoopSamples(pid, states)


def test_share_counts_sleeps_outside_the_loops_wait_only() -> None:
    # The loop's own epoll wait, running, the GIL's futex and a page fault are no blocking call.
    healthy = loop(1, running=400, epoll_wait=500, futex=80, **{"-1": 20})
    assert healthy.blocked() == (0.0, "")
    sleeping = loop(2, running=50, clock_nanosleep=900, recvfrom=40, epoll_pwait=10)
    share, call = sleeping.blocked()
    assert share == pytest.approx(0.94)
    assert call == "clock_nanosleep"


def test_blocked_loop_names_the_worst_of_the_loops_over_the_line() -> None:
    over = int(BLOCKED_SHARE * 1000) + 100
    loops = [
        loop(10, running=1000 - over, clock_nanosleep=over),
        loop(11, running=50, clock_nanosleep=950),
        loop(12, running=500, epoll_wait=500),
    ]
    found = blocked_loop(loops)
    assert found == BlockedLoop(
        pid=11, share=0.95, call="clock_nanosleep", blocked_loops=2, loops=3
    )


def test_a_loop_under_the_line_or_too_rarely_seen_is_not_blocked() -> None:
    under = int(BLOCKED_SHARE * 1000) - 50
    assert blocked_loop([loop(1, running=1000 - under, poll=under)]) is None
    # Asleep in every sample, but too few samples to judge; it does not count among the loops.
    few = loop(2, clock_nanosleep=MIN_SAMPLES - 1)
    assert blocked_loop([few]) is None
    found = blocked_loop([few, loop(3, connect=MIN_SAMPLES)])
    assert found is not None and (found.pid, found.loops) == (3, 1)
    assert blocked_loop([]) is None


def test_the_reason_says_what_was_seen_and_that_no_setting_fixes_it() -> None:
    one = BlockedLoop(pid=4242, share=0.93, call="clock_nanosleep", blocked_loops=1, loops=1)
    text = one.describe()
    assert "worker pid 4242 spent 93% of the run asleep in clock_nanosleep (time.sleep)" in text
    assert "blocking call inside async def" in text and "no server setting fixes it" in text
    assert "loops blocked" not in text  # one loop: nothing to count
    two = BlockedLoop(pid=7, share=0.5, call="syscall 999", blocked_loops=2, loops=4)
    assert "asleep in syscall 999 (2 of 4 loops blocked)" in two.describe()


def test_the_blocked_loop_survives_the_json_form() -> None:
    blocked = BlockedLoop(pid=9, share=0.9, call="recvfrom", blocked_loops=1, loops=2)
    m = measurement(100.0, blocked_loop=blocked)
    assert Measurement.from_json(m.to_json()).blocked_loop == blocked
    plain = measurement(100.0)
    assert "blocked_loop" not in plain.to_json()
    assert Measurement.from_json(plain.to_json()).blocked_loop is None


def test_event_loops_pick_the_root_or_the_marked_workers() -> None:
    tree = [100, 101, 102, 103]
    lines = {
        101: "python -c from multiprocessing.resource_tracker import main;main(5)",
        102: "python -c from multiprocessing.spawn import spawn_main; spawn_main(...)",
        103: "python -c from multiprocessing.spawn import spawn_main; spawn_main(...)",
    }
    assert EventLoops(root=True).pick(tree, lines.__getitem__) == [100]
    marked = EventLoops(root=False, worker_marker="multiprocessing.spawn")
    assert marked.pick(tree, lambda pid: lines.get(pid, "")) == [102, 103]
    assert EventLoops(root=True).pick([], lines.__getitem__) == []


def test_uvicorn_watches_its_own_process_alone_and_its_spawned_workers_otherwise() -> None:
    adapter = UvicornAdapter()
    assert adapter.event_loops({"workers": 1}) == EventLoops(root=True)
    workers = adapter.event_loops({"workers": 3})
    assert workers is not None and not workers.root
    assert workers.worker_marker == "multiprocessing.spawn"


def _record(
    number: int, blocked: BlockedLoop | None, duplicate_of: int | None = None
) -> TrialRecord:
    return TrialRecord(
        number=number,
        state="COMPLETE",
        settings={"workers": number + 1},
        measurement=measurement(100.0 + number, blocked_loop=blocked),
        duplicate_of=duplicate_of,
    )


def test_a_study_says_it_once_with_its_worst_trial() -> None:
    mild = BlockedLoop(pid=1, share=0.4, call="clock_nanosleep", blocked_loops=1, loops=1)
    worst = BlockedLoop(pid=2, share=0.97, call="clock_nanosleep", blocked_loops=2, loops=2)
    records = [_record(0, mild), _record(1, worst), _record(2, None), _record(3, worst, 1)]
    outcome = TuneOutcome(records, [], None, None, "")
    line = outcome.blocked_loop_line()
    # The repeat of trial 1 is its result again, not another sighting.
    assert line.startswith("the app blocked its event loop in 2 of 3 measured trials (worst, ")
    assert "trial 1: event loop blocked: worker pid 2 spent 97%" in line
    assert "best config for the app as written" in line
    data = outcome.to_json()["blocked_loop"]
    assert (data["trials"], data["measured"], data["worst_trial"], data["pid"]) == (2, 3, 1, 2)
    assert "event loop blocked" in record_line(records[1], {})
    assert "event loop blocked" not in record_line(records[2], {})
    clean = TuneOutcome([_record(0, None)], [], None, None, "")
    assert clean.blocked_loop_line() == "" and clean.to_json()["blocked_loop"] is None


# Each says "ready" once its loop runs: the samples are of the loop, not of the start-up.
ASYNC_SLEEP = (
    "import asyncio\n"
    "async def main():\n"
    "    print('ready', flush=True)\n"
    "    while True:\n"
    "        await asyncio.sleep(0.05)\n"
    "asyncio.run(main())\n"
)
SYNC_SLEEP = (
    "import asyncio, time\n"
    "async def main():\n"
    "    print('ready', flush=True)\n"
    "    while True:\n"
    "        time.sleep(0.05)\n"
    "        await asyncio.sleep(0)\n"
    "asyncio.run(main())\n"
)


@pytest.fixture
def child() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _sampled(process: subprocess.Popen[bytes]) -> tuple[LoopSampler, BlockedLoop | None]:
    """Sample the process until MIN_SAMPLES are in (however slow the machine), then judge."""
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    with LoopSampler(lambda: [process.pid]) as sampler:
        deadline = time.monotonic() + 60
        while not any(s.samples >= 2 * MIN_SAMPLES for s in sampler.loops()):
            assert time.monotonic() < deadline, "the sampler took no samples"
            time.sleep(0.05)
    return sampler, sampler.result()


@pytest.mark.skipif(sys.platform != "linux", reason="reads Linux's /proc")
def test_the_sampler_sees_time_sleep_on_a_loop_and_not_asyncio_sleep(
    child: list[subprocess.Popen[bytes]],
) -> None:
    blocking = subprocess.Popen([sys.executable, "-c", SYNC_SLEEP], stdout=subprocess.PIPE)
    awaiting = subprocess.Popen([sys.executable, "-c", ASYNC_SLEEP], stdout=subprocess.PIPE)
    child += [blocking, awaiting]
    _, found = _sampled(blocking)
    assert found is not None
    assert (found.pid, found.call) == (blocking.pid, "clock_nanosleep")
    assert found.share > BLOCKED_SHARE
    sampler, found = _sampled(awaiting)
    assert found is None
    (seen,) = sampler.loops()
    assert {"epoll_wait", "epoll_pwait"} & set(seen.states)


def test_hypercorn_gunicorn_and_daphne_say_where_their_loops_run() -> None:
    hypercorn = HypercornAdapter()
    assert hypercorn.event_loops({"workers": 0}) == EventLoops(root=True)
    assert hypercorn.event_loops({"workers": 2}) == EventLoops(
        root=False, worker_marker="multiprocessing.spawn"
    )
    # gunicorn forks only its workers, each with the master's command line: every child.
    forked = GunicornAsgiAdapter().event_loops({"workers": 2})
    assert forked.pick([10, 11, 12], lambda pid: "gunicorn app") == [11, 12]
    assert DaphneAdapter().event_loops({}) == EventLoops(root=True)
