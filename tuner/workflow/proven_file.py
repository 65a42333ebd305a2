"""Write a server's deployable artifact that is known to boot: render, boot it, then move it in.

The artifact (a config file, an environment file or a launcher script, whatever the adapter
declares) is rendered from the adapter's settings table, a copy is written to a temporary
folder beside the target and booted exactly as its `run_hint` tells a user (with the server's
own check first, where it has one), and smoke-tested with a real request. Only then is it
renamed over the target, so a file that does not boot is never written and a half-written file
never exists.

The header names what the file needs as one `pip install` line: the adapter's requirements
for these settings (pinned to the versions measured) and the app's own. With `check_clean_venv`,
the copy is also booted in a virtual environment holding only those
(`tuner/workflow/cleanvenv.py`), so a file that needs more than it says is never written either.
At the end of a study (`keep_unproven`), such a file is written beside the target instead, as
FILE.unproven, marked so in its header: minutes of measurements are not thrown away for a
missing requirement line. `prove_clean_boot` runs the same proof on the default config before a
study, so a missing requirement shows in seconds.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tuner.apps import AppRef
from tuner.errors import ConfigError, TrialError, TunerError
from tuner.files import atomic_write
from tuner.machine.sizing import SizingRule
from tuner.procs.process import LOOPBACK, ServerProcess, free_port
from tuner.servers.base import Artifact, Bind, LaunchSpec, ServerAdapter
from tuner.settings import Value
from tuner.workflow.cleanvenv import CleanVenv, clean_venv
from tuner.workflow.provenance import install_command, install_lines

DEPLOY_PORT = 8000
UNPROVEN_SUFFIX = ".unproven"


class NotProvenClean(TunerError):
    """The file did not boot in a clean virtual environment holding only its requirements."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # the server's own reason, one line


class Unproven(TunerError):
    """A study's file was written as FILE.unproven: it boots here, not in a clean environment
    with only what its header names. Exit 3: the study finished, the file is not deployable."""

    exit_code = 3

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"wrote {path}, NOT proven in a clean virtual environment: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class ServerConfig:
    """A server's settings for an app: what an artifact renders and boots."""

    adapter: ServerAdapter
    app: AppRef
    settings: Mapping[str, Value]


@dataclass(frozen=True)
class BootCheck:
    """Where the proof boots a copy: the server's pinned CPUs, and the path that must answer."""

    server_cpus: tuple[int, ...]
    ready_path: str = "/"


@dataclass(frozen=True)
class Requirements:
    """What the header names as the file's `pip install` line beyond the server's own (the
    app's requirements, and where they came from), and whether the file must prove it needs no
    more by booting in a clean virtual environment holding only those (cached in `venv_cache`,
    default `cleanvenv.cache_dir()`); `keep_unproven` writes a file that fails that proof as
    FILE.unproven and raises Unproven."""

    app_lines: Sequence[str] = ()
    source: str = ""
    check_clean_venv: bool = False
    keep_unproven: bool = False
    venv_cache: Path | None = None


DEPLOY_BIND = Bind.tcp(LOOPBACK, DEPLOY_PORT)


def write_artifact(
    config: ServerConfig,
    header: Sequence[str],
    out_path: Path,
    *,
    boot: BootCheck,
    requirements: Requirements = Requirements(),
    deploy: Bind = DEPLOY_BIND,
    sizing: SizingRule | None = None,
) -> Path:
    """Render, validate by booting, and atomically write the artifact; returns its path.

    With `sizing`, the files that compute their counts at boot (`render_sized`: the config
    file, and a launcher beside it where the format cannot compute) are written instead, all
    in `out_path`'s folder, and booted as the first one's run_hint says.

    The booted copy differs from the written file only in its port (a free one, so validation
    never collides with a server already on the deploy address); `requirements` says what the
    header names and whether a clean virtual environment must prove it.
    """
    out_path = _checked_out(config.adapter, out_path)
    files = _Files(config, header, out_path, requirements, sizing)
    deployed = files.render(deploy)
    port = free_port(LOOPBACK)
    with tempfile.TemporaryDirectory(prefix=".tuner-check-", dir=out_path.parent) as check_dir:
        boot_path = files.write(files.render(Bind.tcp(LOOPBACK, port)), Path(check_dir))
        sized = sizing is not None
        boot_artifact(config, boot_path, port, boot=boot, sized=sized)
        if requirements.check_clean_venv:
            try:
                venv = clean_venv(files.needs, requirements.venv_cache)
                boot_artifact(config, boot_path, port, boot=boot, venv=venv, sized=sized)
            except TunerError as exc:  # did not boot there, or pip could not build it
                if not requirements.keep_unproven:
                    raise
                reason = exc.reason if isinstance(exc, NotProvenClean) else first_line(exc)
                raise files.kept_unproven(deploy, reason) from exc
        files.write(deployed, out_path.parent)
    return out_path


def _checked_out(adapter: ServerAdapter, out_path: Path) -> Path:
    """`out_path` resolved, its folder made; a folder given as the file is refused."""
    out_path = out_path.resolve()
    if out_path.is_dir():
        raise ConfigError(
            f"--out {str(out_path)!r} is a folder; give a file name such as "
            f"{out_path / adapter.artifact_filename}"
        )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    return out_path


@dataclass(frozen=True)
class _Files:
    """The files `write_artifact` renders for one bind, and where each goes."""

    config: ServerConfig
    header: Sequence[str]
    out_path: Path
    requirements: Requirements
    sizing: SizingRule | None

    @property
    def needs(self) -> tuple[str, ...]:
        """The header's `pip install` line: the server's requirements, then the app's."""
        adapter, settings = self.config.adapter, self.config.settings
        return (*adapter.requirements(adapter.resolve(settings)), *self.requirements.app_lines)

    def header_text(self, unproven: str = "") -> str:
        lines = install_lines(
            self.needs,
            checked=self.requirements.check_clean_venv,
            source=self.requirements.source,
            unproven=unproven,
        )
        return "\n".join([*self.header, *lines])

    def render(self, bind: Bind, unproven: str = "") -> tuple[Artifact, ...]:
        adapter, app, settings = self.config.adapter, self.config.app, self.config.settings
        header = self.header_text(unproven)
        if self.sizing is None:
            return (adapter.render_artifact(app, bind, settings, header=header),)
        return adapter.render_sized(
            app, bind, settings, self.sizing, header=header, filename=self.out_path.name
        )

    def named(self, artifact: Artifact) -> str:
        main = artifact.filename in (self.config.adapter.artifact_filename, self.out_path.name)
        return self.out_path.name if main else artifact.filename

    def write(self, artifacts: Sequence[Artifact], folder: Path) -> Path:
        """Write `artifacts` into `folder`; returns the first one's path (the one booted)."""
        paths = [folder / self.named(artifact) for artifact in artifacts]
        for artifact, path in zip(artifacts, paths, strict=True):
            atomic_write(path, artifact.text.encode("utf-8"), artifact.mode)
        return paths[0]

    def kept_unproven(self, deploy: Bind, reason: str) -> Unproven:
        """Write the files marked unproven, the main one as FILE.unproven; the error to raise."""
        kept = self.out_path.with_name(self.out_path.name + UNPROVEN_SUFFIX)
        for marked in self.render(deploy, reason):
            name = self.named(marked)
            target = kept if name == self.out_path.name else self.out_path.with_name(name)
            atomic_write(target, marked.text.encode("utf-8"), marked.mode)
        return Unproven(kept, reason)


def prove_clean_boot(
    config: ServerConfig,
    requirements: Sequence[str],
    *,
    boot: BootCheck,
    venv_cache: Path | None = None,
) -> None:
    """Boot the artifact of `config` in a clean virtual environment holding only
    `requirements` and check that it answers, as `write_artifact` does at the end: before a
    study, so a requirement missing from the app's shows in seconds. Raises NotProvenClean
    (or TunerError when pip cannot build the environment)."""
    venv = clean_venv(requirements, venv_cache)
    port = free_port(LOOPBACK)
    copy = config.adapter.render_artifact(
        config.app, Bind.tcp(LOOPBACK, port), config.settings, header="clean boot check"
    )
    with tempfile.TemporaryDirectory(prefix="tuner-clean-boot-") as folder:
        path = Path(folder) / copy.filename
        atomic_write(path, copy.text.encode("utf-8"), copy.mode)
        boot_artifact(config, path, port, boot=boot, venv=venv)


def boot_artifact(
    config: ServerConfig,
    path: Path,
    port: int,
    *,
    boot: BootCheck,
    venv: CleanVenv | None = None,
    sized: bool = False,
) -> None:
    """Boot the server from the artifact at `path` (rendered for `port`) and check that it
    answers 2xx; raises TunerError saying why it did not. With `venv`, the server and its
    check run from that environment, and its log stays there (the artifact's folder is
    temporary). `sized`: `path` is the first of `render_sized`'s files."""
    adapter, app, settings = config.adapter, config.app, config.settings
    env: Mapping[str, str] = venv.environ() if venv else {}
    bind = Bind.tcp(LOOPBACK, port)
    if sized:
        spec = adapter.sized_launch(path, app, bind, settings)
    else:
        spec = adapter.artifact_launch(path, app, bind, settings)
    log_path = path.with_name(path.name + ".boot.log")
    if venv is not None:
        spec = _in_venv(adapter, spec, venv)
        log_path = venv.path / f"{path.name}.boot.log"
    try:
        if sized:
            check = adapter.sized_check_argv(path, app)
        else:
            check = adapter.artifact_check_argv(path, app)
        if check is not None:
            argv = adapter.argv_in(check, venv.bin_dir) if venv else check
            _run_check(adapter.name, argv, app, env)
        with ServerProcess.start(
            spec,
            cpus=boot.server_cpus,
            log_path=log_path,
            host=LOOPBACK,
            port=port,
            ready_path=boot.ready_path,
        ):
            pass
    except (TrialError, CheckRejected) as exc:
        if venv is None:
            if isinstance(exc, CheckRejected):
                raise
            raise TunerError(
                f"the {path.name} file did not boot, so it was not written: {exc}"
            ) from exc
        # One line: what the file claims, and the server's own reason (the log's key line).
        raise NotProvenClean(
            f"the {path.name} file needs more than its requirement line says, so it was not "
            f"written: with only `{install_command(venv.requirements)}` in a clean virtual "
            f"environment, {first_line(exc)}",
            first_line(exc),
        ) from exc


class CheckRejected(TunerError):
    """The server's own config check refused the artifact."""


def _in_venv(adapter: ServerAdapter, spec: LaunchSpec, venv: CleanVenv) -> LaunchSpec:
    moved = adapter.launch_in(spec, venv.bin_dir)
    return replace(moved, env={**moved.env, **venv.environ()})


def first_line(exc: BaseException) -> str:
    """The first line of an error's message: what a one-line reason shows."""
    return (str(exc).splitlines() or ["no reason given"])[0]


def _run_check(
    server: str, argv: list[str], app: AppRef, env: Mapping[str, str] | None = None
) -> None:
    done = subprocess.run(  # noqa: S603 - argv list from the adapter, no shell
        argv,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=app.pythonpath,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CheckRejected(f"{server}'s config check rejected the file: {tail[0]}")
