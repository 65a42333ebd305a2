"""The written-file part of the adapter contract (tuner/servers/base.py): the file a user
deploys, rendered from the same table as the command line, and its boot."""

from __future__ import annotations

import abc
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import final

from tuner.apps import AppRef
from tuner.servers.binds import Bind
from tuner.servers.part_launcher import LaunchSpec
from tuner.servers.part_workers import WorkersPart
from tuner.settings import Value


@dataclass(frozen=True)
class Artifact:
    """The deployable file an adapter writes: a config file, an environment file or a launcher.

    `text` is complete (header included); `mode` is its file mode (0o755 for a launcher).
    `run_hint` is the one command that uses it, for the file's reader and the terminal.
    """

    filename: str
    text: str
    run_hint: str
    mode: int = 0o644


@dataclass(frozen=True)
class ArtifactRequest:
    """What a deployable file is rendered from: the app, the `Bind` its server listens at,
    the config (`values`), the `header` that goes first as comments, and the app's own
    settings (`env`, tuner/appsettings.py) that the file sets in the app's environment. Built
    once, by `render_artifact` (or `render_sized`), and handed whole to the adapter's hooks;
    a hook that changes one part (a wrapper's values, a launcher's header) `replace`s it."""

    app: AppRef
    bind: Bind
    values: Mapping[str, Value]
    header: str = ""
    env: Mapping[str, str] | None = None


class FilePart(WorkersPart):
    """The deployable file a server's config is written as, and how that file is booted to
    prove it. Required: `_render_artifact` and `_artifact_launch`."""

    # The name of the deployable file (`Artifact.filename`).
    artifact_filename: str

    @final
    def render_artifact(
        self,
        app: AppRef,
        bind: Bind,
        values: Mapping[str, Value],
        header: str = "",
        env: Mapping[str, str] | None = None,
    ) -> Artifact:
        """The file a user deploys for a server bound as `bind`, from the same table as the
        command line; `header` goes first, as comments. `env` holds the app's own settings
        (tuner/appsettings.py): the file must set them in the environment the app is imported
        in, the server's own way (gunicorn `raw_env`, uWSGI `env`, `export` in a shell
        launcher, `os.environ` in a Python one), so that booting the file alone runs the app
        as measured. The bind and the app's interface are checked first (`_render_artifact`
        does the rest)."""
        self.check_bind(bind)
        self.check_app(app)
        return self._render_artifact(ArtifactRequest(app, bind, values, header, env))

    @abc.abstractmethod
    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        """`render_artifact` for a bind already checked."""

    def check_artifact_name(self, path: Path) -> None:  # noqa: B027 - a hook
        """Raise ConfigError for a file name the server cannot read its file from (any name by
        default): the tune command asks before the study, the boot check again."""

    @final
    def artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        """How to boot the artifact written at `path` (rendered for `bind`), exactly as its
        `run_hint` tells a user to: this is how the tuner proves the file works. The bind is
        checked first, and the app's interface (`_artifact_launch` does the rest)."""
        self.check_bind(bind)
        self.check_app(app)
        return self._artifact_launch(path, app, bind, values)

    @abc.abstractmethod
    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        """`artifact_launch` for a bind already checked (a spec naming the bind as
        `_launch`'s does)."""

    def shell_launcher(self, lines: list[str]) -> Artifact:
        """The artifact as a shell script, run as `sh FILE` (granian, waitress, mod_wsgi)."""
        return Artifact(
            self.artifact_filename,
            "\n".join(lines) + "\n",
            run_hint=f"sh {self.artifact_filename}",
            mode=0o755,
        )

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        """A command that checks the artifact without serving (exit 0 = valid), if the server
        has one; booting it is the check either way."""
        return None


def shell_env_lines(env: Mapping[str, str] | None) -> list[str]:
    """`export NAME=value` lines that set the app's settings in a shell launcher."""
    if not env:
        return []
    lines = ["# The app's own settings, as measured (it reads them from its environment)."]
    return lines + [f"export {name}={shlex.quote(value)}" for name, value in env.items()]


def python_env_lines(env: Mapping[str, str] | None) -> list[str]:
    """`os.environ[NAME] = value` lines for a Python launcher, run before the app is imported."""
    if not env:
        return []
    lines = ["# The app's own settings, as measured (it reads them from its environment)."]
    return lines + [f"os.environ[{name!r}] = {value!r}" for name, value in env.items()]


def comment_block(header: str, prefix: str) -> list[str]:
    """`header` as comment lines; every line is prefixed, so a newline cannot end a comment."""
    return [f"{prefix} {line}".rstrip() for line in header.splitlines()] if header else []
