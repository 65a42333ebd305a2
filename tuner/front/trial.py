"""nginx in front of one trial's server: started after the server answers, stopped before it.

nginx runs from a prefix folder beside the trial's server log (`NAME.nginx/`: its nginx.conf,
kept as the record of what was measured, and its log), pinned to the server's CPUs, since in
production they share the machine and nginx's CPU time is part of the cost of a config; under
`--cpu-limit` it runs inside the server's cgroup, so the quota is shared as on a box whose
CPUs both use (and its memory is counted with the server's, `tuner.metrics.memory`). It
runs as a `ServerProcess`, so the server's watchdog machinery stops it too, also when the
tuner is killed. Ready means one request through nginx to the app answered 2xx.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from tuner.errors import PortInUseError
from tuner.front import nginx
from tuner.front.config import FrontConfig
from tuner.machine.limits import Cgroup
from tuner.procs.process import LOOPBACK, ServerProcess, free_port
from tuner.servers.base import Bind
from tuner.settings import Value

PORT_ATTEMPTS = 3


def prefix_for(log_path: Path) -> Path:
    """The front's folder for a server log at `log_path` (one per measurement)."""
    return log_path.parent / f"{log_path.stem}.nginx"


@contextlib.contextmanager
def running_front(
    server: ServerProcess,
    settings: Mapping[str, Value],
    *,
    cpus: tuple[int, ...],
    log_path: Path,
    ready_path: str,
    ready_timeout_s: float,
) -> Iterator[ServerProcess]:
    """nginx proxying to `server` (as `settings` say), on a free loopback port; stopped, and
    its pid file and temp folders removed, on exit."""
    bind = server.spec.bind or Bind.tcp(server.host, server.port)
    config = FrontConfig.from_values(settings)
    prefix = prefix_for(log_path).resolve()
    nginx.prepare_prefix(prefix)
    try:
        site = functools.partial(nginx.site_block, bind, config)
        with start_nginx(
            prefix, site, cpus, ready_path, ready_timeout_s, join=server.cgroup
        ) as front:
            yield front
    finally:
        tidy(prefix)


def start_nginx(
    prefix: Path,
    site: Callable[[str], list[str]],
    cpus: tuple[int, ...],
    ready_path: str,
    ready_timeout_s: float,
    join: Cgroup | None = None,
) -> ServerProcess:
    """nginx from `prefix` serving `site(listen address)` on a free loopback port, pinned to
    `cpus` with one worker each, once a request through it answered 2xx; inside the cgroup
    `join` (the server's, under container limits) if given."""
    for attempt in range(PORT_ATTEMPTS):
        port = free_port(LOOPBACK)
        conf = nginx.main_conf(prefix, site(f"{LOOPBACK}:{port}"), workers=max(1, len(cpus)))
        spec = nginx.launch_spec(prefix, conf)
        try:
            return ServerProcess.start(
                spec,
                cpus=cpus,
                log_path=prefix / "nginx.log",
                host=LOOPBACK,
                port=port,
                ready_path=ready_path,
                ready_timeout_s=ready_timeout_s,
                join=join,
            )
        except PortInUseError:
            if attempt == PORT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def tidy(prefix: Path) -> None:
    """Remove what nginx leaves (pid file, temp folders); nginx.conf and nginx.log stay as
    the trial's record. The server's socket file is removed by its `ServerProcess` once the
    server has stopped (which happens after nginx's): removed before, gunicorn logs a
    traceback when it unlinks it at stop."""
    with contextlib.suppress(FileNotFoundError):
        (prefix / "nginx.pid").unlink()
    for name in (*nginx.TEMP_FOLDERS, "logs"):
        shutil.rmtree(prefix / name, ignore_errors=True)
