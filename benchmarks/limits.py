"""Does tuning under a container's limits pick another config? Side by side, in one run.

1. CPU quota, on apps/fib.py: a study under `--cpu-limit 0.5` and one on the whole core; then
   each winner (and the 2*cpus+1 rule of each setting) is re-measured in BOTH settings, in
   interleaved rounds, so each column compares configs under the same limit.
2. Memory limit, on apps/json_api.py: the `2*cpus+1` rule's memory is measured without a limit,
   then a study runs with `--memory-limit` at 60% of that; the rule and the tuned config are
   re-measured under the limit (the rule is expected to fail as oom_killed).

    python benchmarks/limits.py [--trials 12] [--rounds 3]

It prints medians with min-max ranges and ratios. Run nothing else on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WINDOW = ("--duration", "2", "--warmup", "0.5")


def tuner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args], cwd=ROOT, capture_output=True, text=True
    )


def tune(app: str, path: str, storage: str, name: str, trials: int, *limits: str) -> dict:
    done = tuner(
        "tune", app, "--server", "gunicorn", "--path", path, "--trials", str(trials),
        "--duration", "1", "--warmup", "0.3", "--storage", storage, "--study-name", name,
        "--out", str(Path(tempfile.mkdtemp()) / "gunicorn.conf.py"), "--json", *limits,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"tune {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    outcome = json.loads(done.stdout)
    label = outcome["verdict"]["winner"] if outcome["verdict"] else "default"
    return next(c for c in outcome["confirmation"] if c["label"] == label)["settings"]


def bench(app: str, path: str, settings: dict[str, Any], *limits: str) -> dict[str, Any]:
    sets = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
    done = tuner("bench", app, "--server", "gunicorn", "--path", path, "--json", *WINDOW,
                 *sets, *limits)  # fmt: skip
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1][:80]}
    return json.loads(done.stdout)


def interleave(
    app: str, path: str, configs: dict[str, dict], settings: dict[str, tuple[str, ...]], rounds: int
) -> dict[tuple[str, str], list[dict]]:
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(rounds):
        for setting, limits in settings.items():
            for label, values in configs.items():
                runs.setdefault((label, setting), []).append(bench(app, path, values, *limits))
    return runs


def cell(results: list[dict]) -> str:
    rps = [r["rps"] for r in results if "rps" in r]
    if not rps:
        failed = next((r["failed"] for r in results if "failed" in r), "?")
        return f"failed ({failed})"
    p99 = statistics.median(r["latency_ms"]["p99"] for r in results if "rps" in r)
    return f"{statistics.median(rps):7,.0f} ({min(rps):,.0f}-{max(rps):,.0f}) p99 {p99:.1f}"


def non_default(settings: dict[str, Any]) -> str:
    keep = ("workers", "worker_class", "threads", "worker_connections")
    return " ".join(f"{k}={settings[k]}" for k in keep if k in settings)


def cpu_part(args: argparse.Namespace, storage: str) -> None:
    app, path = "apps/fib.py", "/9000"
    quota = ("--cpu-limit", "0.5")
    limited = tune(app, path, storage, "fib-quota", args.trials, *quota)
    whole = tune(app, path, storage, "fib-whole", args.trials)
    configs = {
        "winner under 0.5 CPU": limited,
        "winner on 1 core": whole,
        "rule 2*0.5+1 (2 workers)": {"workers": 2},
        "rule 2*1+1 (3 workers)": {"workers": 3},
    }
    settings = {"under --cpu-limit 0.5": quota, "on 1 whole core": ()}
    runs = interleave(app, path, configs, settings, args.rounds)
    print("\n1. CPU quota, apps/fib.py /9000, gunicorn: median req/s (min-max), median p99 ms")
    print(f"{'config':28} {'settings':40} " + " ".join(f"{s:36}" for s in settings))
    for label, values in configs.items():
        row = " ".join(f"{cell(runs[(label, s)]):36}" for s in settings)
        print(f"{label:28} {non_default(values):40} {row}")


def memory_part(args: argparse.Namespace, storage: str) -> None:
    app, path = "apps/json_api.py", "/"
    rule = {"workers": 3}
    free = [bench(app, path, rule) for _ in range(args.rounds)]
    peak_mb = statistics.median(r["memory_mb"]["pss_peak"] for r in free if "rps" in r)
    limit = f"{int(peak_mb * 0.6)}M"
    tuned = tune(app, path, storage, "json-memory", args.trials, "--memory-limit", limit)
    configs = {"rule 2*1+1 (3 workers)": rule, "default (1 worker)": {}, "tuned": tuned}
    runs = interleave(app, path, configs, {"limit": ("--memory-limit", limit)}, args.rounds)
    print(f"\n2. Memory limit {limit} (60% of the rule's {peak_mb:.0f} MB PSS peak without a "
          "limit), apps/json_api.py, gunicorn")  # fmt: skip
    for label, values in configs.items():
        print(f"{label:26} {non_default(values):40} {cell(runs[(label, 'limit')])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        storage = f"sqlite:///{folder}/limits.db"
        cpu_part(args, storage)
        memory_part(args, storage)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
