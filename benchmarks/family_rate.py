"""How often does `tune` write a config that is no better than the default, when it confirms
several candidates at once? The verdict's stated 5% is per comparison; this measures the rate
for the family a confirmation holds.

Pure logic, no server: every round of the default and of `k` candidates is drawn (a drift each
round shares, a noise each run has of its own) and handed to `settle`, exactly as `tune`
decides, second look included. A/A: every candidate equals the default, so anything written
but the default is a false call. Beside it, the chance of writing the one candidate that is
really faster when the others equal the default.

    python benchmarks/family_rate.py --repeats 2000
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.measurements import measurement  # noqa: E402
from tuner.search.objectives import THROUGHPUT, Slo  # noqa: E402
from tuner.workflow.confirm import EXTRA_ROUNDS, Candidate, Confirmed, settle  # noqa: E402

ROUNDS = 5
# (each run's own sd, the round's shared sd) of log req/s: this VM's per-run noise, and a
# machine whose noise is mostly drift.
NOISE = {"own": (0.20, 0.05), "drift": (0.05, 0.15)}


def written(rng: random.Random, gains: Sequence[float], run_sd: float, round_sd: float) -> int:
    """The index of the config `settle` writes (0 is the default), for one drawn confirmation."""
    entries = [Confirmed(Candidate("default", None, {}))] + [
        Confirmed(Candidate(f"trial {i}", i, {})) for i in range(1, len(gains))
    ]
    later: dict[int, list[tuple[int, float]]] = {id(e): [] for e in entries}
    for index in range(ROUNDS + EXTRA_ROUNDS):
        shift = math.exp(rng.gauss(0.0, round_sd))
        for entry, gain in zip(entries, gains, strict=True):
            value = 1000.0 * gain * shift * math.exp(rng.gauss(0.0, run_sd))
            if index < ROUNDS:
                entry.runs.append(measurement(value))
                entry.rounds.append(index)
            else:
                later[id(entry)].append((index, value))

    def more(pair: Sequence[Confirmed]) -> bool:
        for entry in pair:
            for index, value in later[id(entry)]:
                entry.runs.append(measurement(value))
                entry.rounds.append(index)
        return True

    verdict = settle(entries, THROUGHPUT, Slo(), None, more)
    return entries.index(verdict.winner) if verdict is not None else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--counts", default="1,2,3,5,7", help="candidates beside the default")
    parser.add_argument("--gain", type=float, default=1.15, help="the one faster candidate's")
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.counts.split(",")]
    print(f"{args.repeats} seeded repeats each; 5 rounds, {EXTRA_ROUNDS} more for a close call")
    header = "| candidates | noise | A/A: a non-default written | one faster: it written"
    print(f"{header} (x{args.gain:g}) | an equal one written |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for count in counts:
        for name, (run_sd, round_sd) in NOISE.items():
            rng = random.Random(count * 1000 + len(name))
            equal = [1.0] * (count + 1)
            false = sum(written(rng, equal, run_sd, round_sd) != 0 for _ in range(args.repeats))
            faster = [1.0, args.gain] + [1.0] * (count - 1)
            picks = [written(rng, faster, run_sd, round_sd) for _ in range(args.repeats)]
            found = sum(pick == 1 for pick in picks)
            wrong = sum(pick > 1 for pick in picks)
            print(
                f"| {count} | {name} | {false / args.repeats:.1%} | "
                f"{found / args.repeats:.1%} | {wrong / args.repeats:.1%} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
