"""`tuner bench APP --server S`: start the server with given settings, measure it, stop it."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tuner.apps import check_app_imports, parse_app
from tuner.commands.options import (
    LoadOptions,
    add_front_option,
    add_load_options,
    add_server_cpu_option,
    cpu_split,
    limits_from,
    load_spec_from,
    workload_from,
)
from tuner.commands.tune_options import add_app_settings_option
from tuner.loadgen.capacity import need_of, need_text
from tuner.machine.cpus import spare_cpus
from tuner.servers import SERVERS
from tuner.servers.appenv import adapter_for_app
from tuner.settings import parse_assignments


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("bench", help="measure one server config on an app")
    parser.add_argument(
        "app", help="WSGI app: module:callable (apps.fib:app) or path (apps/fib.py)"
    )
    parser.add_argument(
        "--server", required=True, metavar="NAME", help="one of: " + ", ".join(SERVERS)
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server setting by its own name, e.g. workers=3, or an app setting "
        "(--app-settings), e.g. DB_POOL_SIZE=8 (repeatable); with --front, also "
        "front_transport=tcp|unix, front_protocol=http|uwsgi|fastcgi, proxy_buffering=on|off, "
        "fastcgi_keep_conn=on|off, front_keepalive=N",
    )
    add_app_settings_option(parser)
    parser.add_argument("--path", default="/", help="URL path to load (default /)")
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="where the server log goes (default: a temporary folder)",
    )
    add_server_cpu_option(parser)
    add_front_option(parser)
    add_load_options(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from tuner.front import behind
    from tuner.measure.runner import BenchPlan, run_bench
    from tuner.report import bench_view as display

    app = check_app_imports(parse_app(args.app))
    adapter = behind(adapter_for_app(args.server, app, args.app_settings), args.front)
    settings = adapter.resolve(parse_assignments(args.settings))
    load_options = LoadOptions.from_args(args)
    server_cpus, load_cpus = cpu_split(load_options)
    limits = limits_from(load_options, server_cpus)
    load = load_spec_from(load_options, workload_from(load_options, args.path), load_cpus)
    adapter.check_installed()
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="tuner-bench-"))
    plan = BenchPlan(
        adapter=adapter,
        app=app,
        settings=settings,
        load=load,
        server_cpus=server_cpus,
        log_path=log_dir / f"{adapter.name}.log",
        ready_path=load.workload.probe_path,
        limits=limits,
    )
    console = display.console(args.json)
    with display.load_progress(console, load.warmup_s, load.duration_s) as on_window:
        result = run_bench(plan, on_window=on_window)
    # A client_bound rate is a floor: about how many load CPUs it would have taken.
    need = need_of(result.measurement)
    said = need_text(need, len(load_cpus), spare_cpus(server_cpus, load_cpus))
    json_form = {**result.to_json(), **({"load_need": need.to_json()} if need else {})}
    display.emit_result(
        console,
        result.measurement,
        json_form,
        title=f"{adapter.name} {args.app}" + (f" behind {args.front}" if args.front else ""),
        settings=result.settings,
        as_json=args.json,
        more_notes=[said] if said else [],
    )
    return 0
