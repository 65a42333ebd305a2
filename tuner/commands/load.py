"""`tuner load URL`: drive any HTTP server on this machine, like wrk."""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit

from tuner.commands.options import LoadOptions, add_load_options, load_spec_from, workload_from
from tuner.errors import ConfigError
from tuner.machine.cpus import default_split, parse_cpu_list


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("load", help="put load on a running HTTP server (loopback only)")
    parser.add_argument("url", help="e.g. http://127.0.0.1:8000/9000")
    add_load_options(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from tuner.loadgen import LoadSpec, run_load
    from tuner.report import bench_view as display

    target = LoadSpec.from_url(args.url)
    path = urlsplit(args.url).path or "/"
    if urlsplit(args.url).query:
        path += "?" + urlsplit(args.url).query
    load_cpus = (
        parse_cpu_list(args.load_cpus, "--load-cpus") if args.load_cpus else default_split()[1]
    )
    options = LoadOptions.from_args(args)
    spec = load_spec_from(
        options, workload_from(options, path), load_cpus, target.host, target.port
    )
    if args.connections < len(load_cpus):
        raise ConfigError(f"--connections {args.connections}: need at least one per load CPU")
    console = display.console(args.json)
    with display.load_progress(console, spec.warmup_s, spec.duration_s) as on_window:
        result = run_load(spec, on_window)
    display.emit_result(
        console, result, result.to_json(), title=f"load {args.url}", as_json=args.json
    )
    return 0
