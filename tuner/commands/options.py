"""Options shared by the commands that put load on a server, and turning them into a LoadSpec."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import ConfigError
from tuner.loadgen.lanes import KUBE_FAILURES, KUBE_PERIOD_S, KUBE_TIMEOUT_S, Lanes, Probe, Streams
from tuner.loadgen.spec import DEFAULT_SLOW_KBPS
from tuner.machine.cpus import check_disjoint, default_split, parse_cpu_list
from tuner.machine.limits import Limits, check_cgroups, parse_cpu_limit, parse_memory_limit

if TYPE_CHECKING:
    from tuner.loadgen import ClientModel, LoadSpec, Workload


@dataclass(frozen=True)
class LoadOptions:
    """The load, client-model and CPU options as parsed, read from the command line once
    (`from_args`); the defaults are the parser's. Checked and turned into a LoadSpec, CPU sets
    and limits by the functions below."""

    connections: int = 64
    duration_s: float = 10.0
    warmup_s: float = 2.0
    rate_rps: float | None = None
    keepalive: bool = True
    request_timeout_s: float = 5.0
    workload: Path | None = None
    json: bool = False
    slow_clients: float = 0.0
    slow_client_kbps: float | None = None
    think_ms: float | None = None
    idle_connections: int = 0
    streams: int = 0
    stream_path: str | None = None
    probe: str | None = None
    probe_interval_s: float | None = None  # these three: None = Kubernetes' default
    probe_timeout_s: float | None = None
    probe_failures: int | None = None
    load_cpus: str | None = None
    server_cpus: str | None = None  # these three: the commands that start a server
    cpu_limit: str | None = None
    memory_limit: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LoadOptions:
        return cls(
            connections=args.connections,
            duration_s=args.duration,
            warmup_s=args.warmup,
            rate_rps=args.rate,
            keepalive=not args.no_keepalive,
            request_timeout_s=args.request_timeout,
            workload=args.workload,
            json=args.json,
            slow_clients=args.slow_clients,
            slow_client_kbps=args.slow_client_kbps,
            think_ms=args.think_ms,
            idle_connections=args.idle_connections,
            streams=args.streams,
            stream_path=args.stream_path,
            probe=args.probe,
            probe_interval_s=args.probe_interval,
            probe_timeout_s=args.probe_timeout,
            probe_failures=args.probe_failures,
            load_cpus=args.load_cpus,
            # `tuner load` measures a running server: it has no server CPUs or limits.
            server_cpus=getattr(args, "server_cpus", None),
            cpu_limit=getattr(args, "cpu_limit", None),
            memory_limit=getattr(args, "memory_limit", None),
        )


def add_load_options(
    parser: argparse.ArgumentParser, *, duration_s: float = 10.0, warmup_s: float = 2.0
) -> None:
    group = parser.add_argument_group("load")
    group.add_argument(
        "--connections",
        "-c",
        type=int,
        default=64,
        metavar="N",
        help="concurrent connections (default 64)",
    )
    group.add_argument(
        "--duration",
        "-d",
        type=float,
        default=duration_s,
        metavar="S",
        help=f"measurement window in seconds (default {duration_s:g})",
    )
    group.add_argument(
        "--warmup",
        type=float,
        default=warmup_s,
        metavar="S",
        help=f"warm-up seconds, excluded from the figures (default {warmup_s:g})",
    )
    group.add_argument(
        "--rate",
        type=float,
        default=None,
        metavar="R",
        help="open loop at R requests/s (like wrk2); default: closed loop like wrk",
    )
    group.add_argument(
        "--no-keepalive",
        action="store_true",
        help="send Connection: close and reconnect per request (like ab without -k)",
    )
    group.add_argument(
        "--request-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="per-request timeout in seconds (default 5)",
    )
    group.add_argument(
        "--load-cpus",
        metavar="LIST",
        help="CPUs for the load generator, one process each (default: second half)",
    )
    group.add_argument(
        "--workload",
        type=Path,
        metavar="FILE",
        help="TOML file of weighted requests (method, path, headers, body)",
    )
    group.add_argument("--json", action="store_true", help="print one JSON object")
    _add_client_model_options(parser)
    _add_lane_options(parser)


def _add_lane_options(parser: argparse.ArgumentParser) -> None:
    lanes = parser.add_argument_group("beside the load (production's traffic)")
    lanes.add_argument(
        "--streams",
        type=int,
        default=0,
        metavar="N",
        help="N streams held open beside the load (SSE, token streams), each read to its end "
        "and reopened: completed, cut (a trial with a cut stream cannot win), first byte, gaps",
    )
    lanes.add_argument(
        "--stream-path", metavar="PATH", help="the path that answers a stream (with --streams)"
    )
    lanes.add_argument(
        "--probe",
        metavar="PATH",
        help="a health probe beside the load, sent as kubelet sends it (e.g. /healthz): a "
        "trial in which the orchestrator would restart the server cannot win",
    )
    lanes.add_argument(
        "--probe-interval",
        type=float,
        metavar="S",
        help=f"kubelet's periodSeconds (default {KUBE_PERIOD_S:g}); the probe is sampled at "
        "least every 0.5 s so that a short run holds several",
    )
    lanes.add_argument(
        "--probe-timeout",
        type=float,
        metavar="S",
        help=f"a probe slower than this failed (timeoutSeconds, default {KUBE_TIMEOUT_S:g})",
    )
    lanes.add_argument(
        "--probe-failures",
        type=int,
        metavar="N",
        help=f"failed probes in a row that restart the server (failureThreshold, default "
        f"{KUBE_FAILURES})",
    )


def _add_client_model_options(parser: argparse.ArgumentParser) -> None:
    clients = parser.add_argument_group("client model (slow and idle clients)")
    clients.add_argument(
        "--slow-clients",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="this fraction of the connections are slow clients (e.g. 0.1): paced at "
        "--slow-client-kbps each way, --think-ms between requests; reported apart",
    )
    clients.add_argument(
        "--slow-client-kbps",
        type=float,
        default=None,
        metavar="KBPS",
        help=f"a slow client's bandwidth, kbit/s each way (default {DEFAULT_SLOW_KBPS:g}: "
        "a 3G phone)",
    )
    clients.add_argument(
        "--think-ms",
        type=float,
        default=None,
        metavar="MS",
        help="a slow client's pause between reading an answer and its next request (default 0)",
    )
    clients.add_argument(
        "--idle-connections",
        type=int,
        default=0,
        metavar="N",
        help="N more keep-alive connections that send one request, then stay open and silent",
    )


def add_server_cpu_option(parser: argparse.ArgumentParser) -> None:
    """Where the server runs: its pinned CPUs, and container limits within them."""
    parser.add_argument(
        "--server-cpus",
        metavar="LIST",
        help="CPUs the server is pinned to (default: first half, i.e. 0 on 2 cores)",
    )
    parser.add_argument(
        "--cpu-limit",
        metavar="CPUS",
        help="a container's CPU quota for the server's processes, e.g. 1.5 (a cgroup)",
    )
    parser.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="a container's memory limit for the server's processes, e.g. 512M (a cgroup)",
    )


def add_front_option(parser: argparse.ArgumentParser) -> None:
    """A reverse proxy started in front of the server (tuner.front)."""
    parser.add_argument(
        "--front",
        metavar="NAME",
        default=None,
        help="measure the server behind a reverse proxy started per trial on the server's "
        "CPUs: nginx (the load goes to nginx; the search adds how nginx reaches the server)",
    )


def limits_from(options: LoadOptions, server_cpus: tuple[int, ...]) -> Limits:
    """The --cpu-limit / --memory-limit options, checked now: a quota above the pinned CPUs
    means nothing, and a machine without writable cgroups says so before any measuring."""
    cpus = parse_cpu_limit(options.cpu_limit) if options.cpu_limit is not None else None
    memory = parse_memory_limit(options.memory_limit) if options.memory_limit is not None else None
    if cpus is not None and cpus > len(server_cpus):
        raise ConfigError(
            f"--cpu-limit {options.cpu_limit}: above the {len(server_cpus)} CPU(s) the server is "
            "pinned to; give more --server-cpus or a lower limit"
        )
    limits = Limits(cpus, memory)
    if limits:
        check_cgroups(limits)
    return limits


def add_for_cpus_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--for-cpus",
        metavar="LIST",
        help="size the written file for boxes of several CPU limits, e.g. 0.5,1,2: the best "
        "counts are measured at each (a cgroup CPU quota, as --cpu-limit), and the file "
        "computes its process and thread counts at boot from the box's own limits",
    )


def parse_for_cpus(text: str, server_cpus: tuple[int, ...]) -> tuple[float, ...]:
    """`"0.5,1,2"` -> (0.5, 1.0, 2.0): two sizes or more, each a CPU quota the server's pinned
    CPUs can give (from 0.01 to their count), none twice."""
    sizes = []
    for part in text.split(","):
        try:
            cpus = float(part)
        except ValueError:
            cpus = math.nan
        if not cpus > 0 or math.isinf(cpus):
            raise ConfigError(
                f"--for-cpus {text!r}: {part.strip()!r} is not a CPU limit; expected CPU "
                "limits above 0 like 0.5,1,2"
            )
        if cpus < 0.01:
            raise ConfigError(f"--for-cpus {text!r}: {part.strip()} is below 0.01 CPU")
        if cpus > len(server_cpus):
            raise ConfigError(
                f"--for-cpus {text!r}: {cpus:g} is above the {len(server_cpus)} CPU(s) the "
                "server is pinned to; give more --server-cpus or smaller sizes"
            )
        if cpus in sizes:
            raise ConfigError(f"--for-cpus {text!r}: {cpus:g} is given twice")
        sizes.append(cpus)
    if len(sizes) < 2:
        raise ConfigError(
            f"--for-cpus {text!r}: one size; a rule needs two at least (for one CPU limit, "
            f"use --cpu-limit {text.strip()})"
        )
    return tuple(sorted(sizes))


def cpu_split(options: LoadOptions) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Server and load CPU sets from the options, defaulting to an even split of the machine."""
    default_server, default_load = default_split()
    server = (
        parse_cpu_list(options.server_cpus, "--server-cpus")
        if options.server_cpus
        else default_server
    )
    load = parse_cpu_list(options.load_cpus, "--load-cpus") if options.load_cpus else default_load
    check_disjoint(server, load)
    return server, load


def workload_from(options: LoadOptions, path: str) -> Workload:
    from tuner.loadgen import Workload, load_workload_file  # the load generator: when run

    if options.workload is not None:
        return load_workload_file(options.workload)
    if not path.startswith("/"):
        raise ConfigError(f"--path {path!r}: expected a URL path starting with /")
    return Workload.single(path)


def load_spec_from(
    options: LoadOptions,
    workload: Workload,
    load_cpus: tuple[int, ...],
    host: str = "127.0.0.1",
    port: int = 0,
) -> LoadSpec:
    from tuner.loadgen import LoadSpec

    spec = LoadSpec(
        clients=client_model_from(options),
        host=host,
        port=port,
        workload=workload,
        connections=options.connections,
        duration_s=options.duration_s,
        warmup_s=options.warmup_s,
        rate_rps=options.rate_rps,
        keepalive=options.keepalive,
        load_cpus=load_cpus,
        timeout_s=options.request_timeout_s,
        lanes=lanes_from(options, workload.lanes),
    )
    # A server's port is only known once it starts: check everything else now.
    replace(spec, port=spec.port or 1).validate()
    return spec


def client_model_from(options: LoadOptions) -> ClientModel:
    """The --slow-clients, --slow-client-kbps, --think-ms and --idle-connections options."""
    from tuner.loadgen import ClientModel

    given = (("--slow-client-kbps", options.slow_client_kbps), ("--think-ms", options.think_ms))
    slow_only = [option for option, value in given if value is not None]
    if slow_only and not options.slow_clients:
        raise ConfigError(
            f"{slow_only[0]}: describes the slow clients; give --slow-clients FRACTION too"
        )
    return ClientModel(
        slow_fraction=options.slow_clients,
        slow_kbps=DEFAULT_SLOW_KBPS
        if options.slow_client_kbps is None
        else options.slow_client_kbps,
        think_ms=0.0 if options.think_ms is None else options.think_ms,
        idle_connections=options.idle_connections,
    )


def lanes_from(options: LoadOptions, declared: Lanes | None = None) -> Lanes:
    """The --streams, --stream-path and --probe options (with the probe's policy), beside the
    lanes the workload file `declared`: a lane comes from one of the two."""
    declared = declared or Lanes()
    if options.stream_path is not None and not options.streams:
        raise ConfigError("--stream-path: names the streams' path; give --streams N too")
    if options.streams and options.stream_path is None:
        raise ConfigError(f"--streams {options.streams}: give --stream-path PATH too")
    policy = (
        ("--probe-interval", options.probe_interval_s),
        ("--probe-timeout", options.probe_timeout_s),
        ("--probe-failures", options.probe_failures),
    )
    given = [option for option, value in policy if value is not None]
    if given and options.probe is None:
        raise ConfigError(f"{given[0]}: describes the probe; give --probe PATH too")
    streams, probe = declared.streams, declared.probe
    if options.stream_path is not None:
        if streams is not None:
            raise ConfigError("--streams: the workload file declares [streams] already; give one")
        streams = Streams(options.streams, options.stream_path)
    if options.probe is not None:
        if probe is not None:
            raise ConfigError("--probe: the workload file declares [probe] already; give one")
        probe = Probe(
            options.probe,
            interval_s=_or(options.probe_interval_s, KUBE_PERIOD_S),
            timeout_s=_or(options.probe_timeout_s, KUBE_TIMEOUT_S),
            failures=int(_or(options.probe_failures, KUBE_FAILURES)),
        )
    if streams is not None:
        # A gap between chunks longer than the per-request timeout is a stalled stream.
        streams = replace(streams, stall_s=options.request_timeout_s)
    return Lanes(streams, probe)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
