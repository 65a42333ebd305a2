"""Write a server config file that is known to boot: render, boot it once, then move it in place.

The file is rendered from the adapter's settings table, written to a temporary file beside the
target, booted with the real server (gunicorn also `--check-config`) and smoke-tested with a
real request. Only then is it renamed over the target, so a file that does not boot is never
written and a half-written file never exists.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ConfigError, TrialError, TunerError
from tuner.measure.process import ServerProcess, free_port
from tuner.servers.base import ServerAdapter
from tuner.settings import Value

LOOPBACK = "127.0.0.1"
DEPLOY_PORT = 8000


def write_config(
    adapter: ServerAdapter,
    app: AppRef,
    settings: Mapping[str, Value],
    header: Sequence[str],
    out_path: Path,
    *,
    server_cpus: tuple[int, ...],
    ready_path: str = "/",
) -> Path:
    """Render, validate by booting, and atomically write the config file; returns its path.

    The booted copy differs from the written file only in its port (a free one, so validation
    never collides with a server already on the deploy port).
    """
    out_path = out_path.resolve()
    if out_path.is_dir():
        raise ConfigError(
            f"--out {str(out_path)!r} is a folder; give a file name such as "
            f"{out_path / adapter.config_filename}"
        )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    text = adapter.render_config(app, LOOPBACK, DEPLOY_PORT, settings, header="\n".join(header))
    port = free_port(LOOPBACK)
    boot_text = adapter.render_config(app, LOOPBACK, port, settings, header="\n".join(header))
    with tempfile.TemporaryDirectory(prefix=".tuner-check-", dir=out_path.parent) as check_dir:
        boot_path = Path(check_dir) / out_path.name
        boot_path.write_text(boot_text, encoding="utf-8")
        validate_config(
            adapter, app, settings, boot_path, port, server_cpus=server_cpus, ready_path=ready_path
        )
        fd, temp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", dir=out_path.parent)
        temp = Path(temp_name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temp, 0o644)
            os.replace(temp, out_path)
        finally:
            temp.unlink(missing_ok=True)
    return out_path


def validate_config(
    adapter: ServerAdapter,
    app: AppRef,
    settings: Mapping[str, Value],
    path: Path,
    port: int,
    *,
    server_cpus: tuple[int, ...],
    ready_path: str = "/",
) -> None:
    """Boot the server from the file and check that it answers 2xx."""
    argv = adapter.config_argv(path, app)
    check = adapter.config_check_argv(path, app)
    if check is not None:
        _run_config_check(adapter.name, check, app)
    # Same environment and stop rules as a measured run, but started from the file.
    spec = replace(adapter.launch_spec(app, LOOPBACK, port, settings), argv=tuple(argv))
    log_path = path.with_name(path.name + ".boot.log")
    try:
        with ServerProcess.start(
            spec,
            cpus=server_cpus,
            log_path=log_path,
            host=LOOPBACK,
            port=port,
            ready_path=ready_path,
        ):
            pass
    except TrialError as exc:
        raise TunerError(f"the config file did not boot, so it was not written: {exc}") from exc


def _run_config_check(server: str, argv: list[str], app: AppRef) -> None:
    done = subprocess.run(  # noqa: S603 - argv list from the adapter, no shell
        argv, capture_output=True, text=True, timeout=60, cwd=app.pythonpath
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TunerError(f"{server}'s config check rejected the config file: {tail[0]}")
