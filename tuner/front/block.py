"""Write the nginx block a study measured, next to the server's file, known to work.

The block is what a user includes in nginx's `http {}` context: the `upstream` (the server's
socket as the written server file binds it) and a `server` with the `location` that passes
requests on, with the settings the study measured (protocol, buffering). Before it is
written, a copy pointing at a temporary socket is checked with `nginx -t` and booted in front
of the server booted from its own written file, and one real request goes through both.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import TrialError, TunerError
from tuner.files import atomic_write
from tuner.front import nginx
from tuner.front.config import FrontConfig
from tuner.front.fronted import DEPLOY_PORT, FrontedAdapter
from tuner.front.trial import start_nginx, tidy
from tuner.procs.process import LOOPBACK, ServerProcess, free_port
from tuner.servers.base import Bind, comment_block
from tuner.settings import Value

DEPLOY_LISTEN = "80"


def block_path(server_file: Path, adapter: FrontedAdapter) -> Path:
    """nginx-SERVER.conf beside the server's file (one per server, so `compare` writes all)."""
    return server_file.with_name(f"{adapter.front_name}-{adapter.name}.conf")


def block_text(
    adapter: FrontedAdapter, bind: Bind, config: FrontConfig, listen: str, header: Sequence[str]
) -> str:
    notes = [
        *header,
        "",
        f"nginx in front of {adapter.name} ({config.describe()}), as measured.",
        "Include this file in nginx's http {} context. The study ran nginx on the server's",
        "CPUs with worker_processes = their count.",
        f"EDIT listen (and server_name){' and the socket path' if bind.path else ''} for your "
        "deployment.",
    ]
    lines = [*comment_block("\n".join(notes), "#"), ""]
    return "\n".join([*lines, *nginx.site_block(bind, config, listen)]) + "\n"


def write_front_block(
    adapter: FrontedAdapter,
    app: AppRef,
    settings: Mapping[str, Value],
    server_file: Path,
    header: Sequence[str],
    *,
    server_cpus: tuple[int, ...],
    ready_path: str = "/",
) -> Path:
    """Check and write the block for the server file at `server_file`; returns its path."""
    out = block_path(server_file, adapter)
    config = FrontConfig.from_values(settings)
    deployed = block_text(
        adapter, adapter.bind_for(settings, LOOPBACK, DEPLOY_PORT), config, DEPLOY_LISTEN, header
    )
    with tempfile.TemporaryDirectory(prefix=".tuner-front-check-", dir=out.parent) as folder:
        _boot_through(adapter, app, settings, Path(folder), config, server_cpus, ready_path)
    atomic_write(out, deployed.encode("utf-8"))
    return out


def _boot_through(
    adapter: FrontedAdapter,
    app: AppRef,
    settings: Mapping[str, Value],
    folder: Path,
    config: FrontConfig,
    server_cpus: tuple[int, ...],
    ready_path: str,
) -> None:
    """The server from its own file on a temporary socket, nginx from the block in front,
    one request through both; raises TunerError saying which part failed."""
    port = free_port(LOOPBACK)
    bind = adapter.bind_for(settings, LOOPBACK, port)
    server_file = folder / adapter.artifact_filename
    artifact = adapter.render_artifact(app, Bind.tcp(LOOPBACK, port), settings)
    atomic_write(server_file, artifact.text.encode("utf-8"), artifact.mode)
    prefix = folder / "nginx"
    nginx.prepare_prefix(prefix)
    name = f"{adapter.front_name}-{adapter.name}.conf"
    block_file = prefix / name
    try:
        spec = adapter.artifact_launch(server_file, app, Bind.tcp(LOOPBACK, port), settings)
        with ServerProcess.start(
            spec,
            cpus=server_cpus,
            log_path=folder / "server.log",
            host=LOOPBACK,
            port=port,
            ready_path=ready_path,
        ):

            def site(listen: str) -> list[str]:
                block_file.write_text(block_text(adapter, bind, config, listen, []))
                return [f"include {block_file};"]

            _nginx_check(prefix, site(f"{LOOPBACK}:{free_port(LOOPBACK)}"), name)
            with start_nginx(prefix, site, server_cpus, ready_path, 30.0):
                pass  # ready = one request through nginx to the app answered 2xx
    except TrialError as exc:
        first = (str(exc).splitlines() or ["no reason given"])[0]
        raise TunerError(f"the {name} block did not work, so it was not written: {first}") from exc
    finally:
        tidy(prefix)


def _nginx_check(prefix: Path, site: list[str], name: str) -> None:
    """`nginx -t` on a main config that includes the block."""
    (prefix / "nginx.conf").write_text(nginx.main_conf(prefix, site, workers=1))
    done = subprocess.run(  # noqa: S603 - argv list, no shell
        nginx.check_argv(prefix), capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TunerError(f"nginx -t rejected the {name} block: {tail[0]}")
