"""The lanes (streams, a health probe) without our request load: beside another client (wrk).

Our load generator runs the lanes in a process of its own beside its workers
(tuner/loadgen/beside.py). To check that its request figures stay right with streams beside,
wrk must see the same streams: this starts that same process, pinned to the load CPU, for one
run of the other client, and judges what it saw as a run of ours is judged
(tuner/loadgen/lane_judge.py).

    with lanes_alone(config) as seen:
        subprocess.run(["wrk", ...])
    figures = seen[0]
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Iterator

from tuner.loadgen.beside import LaneConfig, LaneReport, beside_main
from tuner.loadgen.lane_judge import LaneFigures, judge
from tuner.loadgen.messages import Go, Ready

# The lane process imports the tuner before it is ready: it gets this long.
_START_S = 30.0
# Its clock starts a little after Go is sent, so the other client and the lanes start together.
_LEAD_S = 0.05


@contextlib.contextmanager
def lanes_alone(config: LaneConfig) -> Iterator[list[LaneFigures]]:
    """Run `config`'s lanes from now for its warm-up plus duration; the yielded list gets
    their figures when the block ends (the process is stopped however it ends)."""
    ctx = multiprocessing.get_context("spawn")
    pipe, child_end = ctx.Pipe()
    proc = ctx.Process(target=beside_main, args=(child_end,), name="lanes-alone", daemon=True)
    proc.start()
    child_end.close()
    seen: list[LaneFigures] = []
    try:
        pipe.send(config)
        if not pipe.poll(_START_S) or not isinstance(pipe.recv(), Ready):
            raise RuntimeError("the lanes process did not start")
        pipe.send(Go(time.monotonic_ns() + int(_LEAD_S * 1e9)))
        yield seen
        left = config.warmup_s + config.duration_s + _START_S
        if not pipe.poll(left):
            raise RuntimeError("the lanes process did not report")
        report = pipe.recv()
        if not isinstance(report, LaneReport):
            raise RuntimeError(f"the lanes process sent {type(report).__name__}")
        seen.append(judge(config.lanes, report, config.warmup_s, stopped_early=False))
    finally:
        pipe.close()
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()
