"""Does measuring as deployed change the answer? Bench setting vs deployed setting, in one run.

Two studies of the same server on the same app, **bench** (the server alone, 64 fast loopback
clients) and **deployed** (`--front nginx` and slow clients); each winner is then re-measured
in both settings in interleaved rounds, and the table shows what each recommendation is worth
where it was not chosen. Run nothing else on the machine meanwhile. More:
docs/pages/benchmarks.md.

    python benchmarks/deployed.py --app apps/iowait.py --server gunicorn
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.servers import get_adapter  # noqa: E402

FRONT_SETTINGS = ("front_transport", "front_protocol", "proxy_buffering")


def run_json(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tuner", *argv, "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"tuner {' '.join(argv[:4])} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout)


def winner(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    label = result["verdict"]["winner"]
    entry = next(c for c in result["confirmation"] if c["label"] == label)
    return label, entry["settings"]


def sets(settings: dict[str, Any], fronted: bool) -> list[str]:
    """`--set` pairs for a config: front settings only where a front runs."""
    pairs = [
        f"{k}={str(v).lower() if isinstance(v, bool) else v}"
        for k, v in settings.items()
        if fronted or k not in FRONT_SETTINGS
    ]
    return [arg for pair in pairs for arg in ("--set", pair)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default="apps/iowait.py")
    parser.add_argument("--server", default="gunicorn")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", default="2")
    parser.add_argument("--warmup", default="0.5")
    parser.add_argument("--connections", default="64")
    parser.add_argument("--slow-clients", default="0.25")
    parser.add_argument("--slow-client-kbps", default="64")
    args = parser.parse_args()

    window = ["--duration", args.duration, "--warmup", args.warmup]
    window += ["--connections", args.connections]
    deployed_load = ["--slow-clients", args.slow_clients]
    deployed_load += ["--slow-client-kbps", args.slow_client_kbps]
    settings_of = {"bench": window, "deployed": [*window, "--front", "nginx", *deployed_load]}

    filename = get_adapter(args.server).artifact_filename
    with tempfile.TemporaryDirectory(prefix="tuner-deployed-") as tmp:
        picks = {}
        for name, extra in settings_of.items():
            result = run_json([
                "tune", args.app, "--server", args.server, "--trials", str(args.trials),
                "--storage", f"sqlite:///{tmp}/s.db", "--study-name", name,
                "--out", f"{tmp}/written-{name}/{filename}", "--no-clean-venv-check",
                "--seed", "1", *extra,
            ])  # fmt: skip
            picks[name] = winner(result)
            print(f"{name} study picked {picks[name][0]}: {picks[name][1]}", file=sys.stderr)

        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for round_index in range(args.rounds):
            for setting, extra in settings_of.items():
                for pick, (_, config) in picks.items():
                    fronted = "--front" in extra
                    measured = run_json(
                        ["bench", args.app, "--server", args.server, *sets(config, fronted),
                         *extra]
                    )  # fmt: skip
                    runs.setdefault((pick, setting), []).append(measured)
                    print(
                        f"round {round_index + 1}: {pick} winner in {setting}: "
                        f"{measured['rps']:,.0f} req/s p99 {measured['latency_ms']['p99']:.1f} ms",
                        file=sys.stderr,
                    )

    def spread(values: list[float], pattern: str) -> str:
        med = statistics.median(values)
        return (
            f"{pattern.format(med)} ({pattern.format(min(values))}-{pattern.format(max(values))})"
        )

    print(
        f"{args.server} on {args.app}; bench = fast clients, deployed = nginx in front + "
        f"{args.slow_clients} of {args.connections} connections slow at "
        f"{args.slow_client_kbps} kbit/s; {args.trials} trials per study, {args.rounds} "
        "interleaved rounds; medians (range)"
    )
    print(f"{'winner of':<10} {'measured in':<11} {'req/s':>24} {'p99 ms':>26} {'slow p99 ms':>12}")
    medians: dict[tuple[str, str], float] = {}
    for (pick, setting), runs_of_pair in sorted(runs.items()):
        rps = [m["rps"] for m in runs_of_pair]
        p99 = [m["latency_ms"]["p99"] for m in runs_of_pair]
        slow = [
            m["slow_clients"]["latency_ms"]["p99"] for m in runs_of_pair if m.get("slow_clients")
        ]
        medians[(pick, setting)] = statistics.median(rps)
        slow_text = f"{statistics.median(slow):.1f}" if slow else "-"
        print(
            f"{pick:<10} {setting:<11} {spread(rps, '{:,.0f}'):>24} "
            f"{spread(p99, '{:.1f}'):>26} {slow_text:>12}"
        )
    for setting in settings_of:
        ratio = medians[("deployed", setting)] / medians[("bench", setting)]
        print(f"in {setting}: the deployed winner makes x{ratio:.2f} the req/s of the bench winner")
    for name, (label, config) in picks.items():
        print(f"{name} winner ({label}): {config}")


if __name__ == "__main__":
    main()
