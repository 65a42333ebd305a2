"""Does tuning with production's traffic beside the load pay? The config the tuner writes with
streams and a health probe beside the request load, against the one it writes without them,
measured side by side on the same mixed traffic, in one run.

For each server, on the LLM-style token stream app (apps/stream_tokens.py): a `tuner tune`
study on the request load alone (`/`), and one with `--streams` and `--probe` beside it; then
both picks (and the default) in fresh interleaved rounds of the mixed traffic. Per config: req/s
and p99 of the requests (median and range over the rounds), streams cut, probes failed and
restarts the probes would have caused (summed over the rounds). Run nothing else meanwhile.

    python benchmarks/lanes_vs_plain.py --servers gunicorn,uvicorn,granian,hypercorn
    python benchmarks/lanes_vs_plain.py --servers uvicorn --trials 8 --rounds 3   # a quick look

Method and recorded results: docs/pages/benchmarks.md, "Tuned with streams and a probe".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner import interrupts  # noqa: E402
from tuner.apps import check_app_imports, parse_app  # noqa: E402
from tuner.errors import TrialError  # noqa: E402
from tuner.loadgen.lanes import Lanes, Probe, Streams  # noqa: E402
from tuner.loadgen.spec import LoadSpec, Workload  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.procs.process import LOOPBACK  # noqa: E402
from tuner.servers import adapter_serving  # noqa: E402
from tuner.workflow.confirm import Candidate, Confirmed, confirm  # noqa: E402
from tuner.workflow.repeats import Repeat  # noqa: E402

APP = "apps/stream_tokens.py"
STREAM_PATH, PROBE_PATH = "/stream", "/healthz"


def tune(server: str, args: argparse.Namespace, lanes: bool, workdir: Path) -> dict[str, Any]:
    """One `tuner tune` study; its pick's settings and what the study saw."""
    name = f"{server}-{'lanes' if lanes else 'plain'}"
    # The file under the server's own name: some servers read only theirs (hypercorn: *.py).
    app = check_app_imports(parse_app(APP, ROOT))
    out = workdir / name / adapter_serving(server, app.interface).artifact_filename
    extra = ["--streams", str(args.streams), "--stream-path", STREAM_PATH, "--probe", PROBE_PATH]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner",
            "tune",
            APP,
            "--server",
            server,
            "--json",
            "--trials",
            str(args.trials),
            "--seed",
            str(args.seed),
            "--duration",
            str(args.duration),
            "--warmup",
            str(args.warmup),
            "--connections",
            str(args.connections),
            "--no-clean-venv-check",
            "--storage",
            f"sqlite:///{workdir}/{name}.db",
            "--out",
            str(out),
            *(extra if lanes else []),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **_stream_env(args)},
    )
    if done.returncode != 0:
        raise SystemExit(f"{name}: tune failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    winner = result["verdict"]["winner"]
    pick = next(c for c in result["confirmation"] if c["label"] == winner)
    return {"settings": pick["settings"], "label": winner, "cannot_win": result["cannot_win"]}


def _stream_env(args: argparse.Namespace) -> dict[str, str]:
    return {"STREAM_SECONDS": args.stream_seconds, "TOKEN_MS": args.token_ms}


def head_to_head(
    server: str, picks: dict[str, dict[str, Any]], args: argparse.Namespace, workdir: Path
) -> list[Confirmed]:
    """The picks and the default in fresh interleaved rounds of the mixed traffic."""
    app = check_app_imports(parse_app(APP, ROOT))
    adapter = adapter_serving(server, app.interface)
    server_cpus, load_cpus = default_split()
    load = LoadSpec(
        host=LOOPBACK,
        port=1,
        workload=Workload.single("/"),
        connections=args.connections,
        duration_s=args.duration,
        warmup_s=args.warmup,
        load_cpus=load_cpus,
        lanes=Lanes(Streams(args.streams, STREAM_PATH), Probe(PROBE_PATH)),
    )
    candidates = [Candidate("default", None, {})] + [
        Candidate(label, None, pick["settings"]) for label, pick in picks.items()
    ]

    def measure(candidate: Candidate, index: int) -> Measurement:
        plan = BenchPlan(
            adapter=adapter,
            app=app,
            settings=adapter.resolve(candidate.settings),
            load=replace(load),
            server_cpus=server_cpus,
            ready_path="/",
            log_path=workdir / f"{server}-h2h" / f"{candidate.label}-{index}.log",
        )
        return run_bench(plan).measurement

    def shown(
        candidate: Candidate, index: int, run: Measurement | None, repeat: Repeat | None
    ) -> None:
        said = f"{run.median_rps:,.0f} req/s" if run else "failed"
        said += f" ({repeat.text()})" if repeat else ""
        print(f"  round {index + 1}: {candidate.label}: {said}", file=sys.stderr)

    os.environ.update(_stream_env(args))  # the servers started here inherit the app's knobs
    try:
        return confirm(candidates, args.rounds, measure, shown)
    except TrialError as exc:
        interrupts.raise_if_requested()
        raise SystemExit(f"{server}: head to head failed: {exc}") from None


def row(entry: Confirmed) -> dict[str, Any]:
    runs = entry.runs
    streams = [r.streams for r in runs if r.streams]
    probes = [r.probe for r in runs if r.probe]
    return {
        "config": entry.candidate.label,
        "settings": entry.candidate.settings,
        "rps": [
            min(r.median_rps for r in runs),
            statistics.median(r.median_rps for r in runs),
            max(r.median_rps for r in runs),
        ]
        if runs
        else None,  # fmt: skip
        "p99_ms": statistics.median(r.latency.p99_ms for r in runs) if runs else None,
        "streams_completed": sum(s.completed for s in streams),
        "streams_cut": sum(s.cut for s in streams),
        "probes_failed": sum(p.failed for p in probes),
        "probes_sent": sum(p.sent for p in probes),
        "restarts": sum(p.restart for p in probes),
        "failed_runs": len(entry.failures),
    }


def print_table(server: str, rows: list[dict[str, Any]]) -> None:
    base = next((r for r in rows if r["config"] == "plain pick" and r["rps"]), None)
    print(f"\n{server}: the picks side by side on the mixed traffic")
    print(
        f"  {'config':12} {'req/s min/median/max':>24} {'x plain':>8} {'p99 ms':>8} "
        f"{'streams ok/cut':>15} {'probes failed':>14} {'restarts':>9}"
    )
    for r in rows:
        rps = r["rps"]
        spread = f"{rps[0]:,.0f}/{rps[1]:,.0f}/{rps[2]:,.0f}" if rps else "failed"
        ratio = f"x{rps[1] / base['rps'][1]:.2f}" if rps and base and base["rps"][1] else "-"
        p99 = f"{r['p99_ms']:.1f}" if r["p99_ms"] is not None else "-"
        print(
            f"  {r['config']:12} {spread:>24} {ratio:>8} {p99:>8} "
            f"{r['streams_completed']:>7}/{r['streams_cut']:<7} "
            f"{r['probes_failed']:>6}/{r['probes_sent']:<7} {r['restarts']:>9}"
        )
    for r in rows:
        print(f"  {r['config']}: {r['settings'] or '(server defaults)'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="gunicorn,uvicorn,granian,hypercorn")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--stream-seconds", default="1-3", help="the app's STREAM_SECONDS")
    parser.add_argument("--token-ms", default="20-50", help="the app's TOKEN_MS")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write every row as JSON here")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tuner-lanes-") as folder:
        workdir = Path(folder)
        for server in args.servers.split(","):
            print(f"{server}: tuning without and with the lanes", file=sys.stderr)
            picks = {
                "plain pick": tune(server, args, lanes=False, workdir=workdir),
                "lanes pick": tune(server, args, lanes=True, workdir=workdir),
            }
            rows = [row(entry) for entry in head_to_head(server, picks, args, workdir)]
            print_table(server, rows)
            results[server] = {"picks": picks, "rows": rows}
    print(f"\n{time.monotonic() - started:.0f} s in all; each config {args.rounds} rounds of "
          f"{args.warmup:g} + {args.duration:g} s, {args.connections} connections on /, "
          f"{args.streams} streams of {args.stream_seconds} s on {STREAM_PATH}, a probe on "
          f"{PROBE_PATH}")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
