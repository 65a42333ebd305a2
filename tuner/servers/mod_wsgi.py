"""mod_wsgi-express: Apache httpd with mod_wsgi, configured from one command line.

`mod_wsgi-express start-server` writes an Apache config into its server root and execs
Apache in the foreground. Apache's MPM children (event, worker or prefork) hold the client
connections and pass each request to `processes` mod_wsgi daemon processes of `threads`
threads each, which run the app. The artifact is a launcher script around that one command.

Started as root, Apache refuses to serve unless its children switch to another user
(`--user`/`--group`), and that user must be able to read the Python installation and the
app. A trial run as root therefore starts mod_wsgi-express in a user namespace of its own
(`unshare --user`): Apache sees an ordinary user and serves with the tuner's own file access,
as every other server's workers do.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef
from tuner.errors import ToolMissingError
from tuner.servers.base import (
    Artifact,
    ArtifactRequest,
    Bind,
    LaunchSpec,
    ProcessModel,
    ServerAdapter,
    SizedRequest,
    StartupSigns,
    comment_block,
    first_version_number,
    shell_env_lines,
)
from tuner.servers.cmdlauncher import sized_check_argv, sized_command_files
from tuner.servers.setting_builders import CHOICE, FLOAT, INT, SettingStyle, dashed
from tuner.settings import SettingsTable, Value

# A sized launcher hands its `sizing:` line on in this variable to the file beside it that
# Apache's start sources, which logs it.
SIZING_LINE_VARIABLE = "MOD_WSGI_SIZING_LINE"
SIZED_ENVVARS = "mod_wsgi_sized.envvars"

SIGNS = StartupSigns(
    # Apache: "(98)Address already in use: AH00072: make_sock: could not bind to address".
    port_in_use=("Address already in use", "could not bind to address"),
    # optparse: "mod_wsgi-express: error: option --threads: invalid integer value: 'x'";
    # Apache: "AH00526: Syntax error on line 12 of .../httpd.conf".
    rejected_value=("error: option", "Syntax error", "not designed to serve pages"),
)
# The non-root user Apache's children run as when the deployed launcher is started as root.
DEFAULT_RUN_USER = "www-data"


# `--threads 5` on mod_wsgi-express's command line, which is also what a launcher writes.
STYLE = SettingStyle(key_of=dashed, truth=lambda value: "")


SETTINGS = SettingsTable(
    "mod_wsgi",
    (
        # Rendered only above 1: an explicit `--processes 1` also sets wsgi.multiprocess.
        STYLE.value(
            "processes", INT, 1, "mod_wsgi daemon processes that run the app", minimum=1, unset=1
        ),
        STYLE.value("threads", INT, 5, "request threads per daemon process", minimum=1),
        STYLE.value(
            "max_clients",
            INT,
            0,
            "client connections Apache accepts at once; 0 = mod_wsgi-express's rule, "
            "10 + max(10, 1.5 x processes x threads)",
            minimum=0,
            unset=0,
        ),
        STYLE.value(
            "server_mpm",
            CHOICE,
            "event",
            "Apache's front: event (a thread per active request, idle keep-alive connections "
            "parked), worker (a thread per connection), prefork (a process per connection)",
            choices=("event", "worker", "prefork"),
        ),
        STYLE.value(
            "server_backlog", INT, 500, "listen queue length of Apache's client socket", minimum=1
        ),
        STYLE.value(
            "daemon_backlog",
            INT,
            100,
            "queue length of the socket between Apache and the daemon processes",
            minimum=1,
        ),
        STYLE.value(
            "keep_alive_timeout",
            INT,
            2,
            "seconds an idle keep-alive connection stays open; 0 = keep-alive off "
            "(mod_wsgi 6's default is 2)",
            minimum=0,
        ),
        STYLE.value(
            "maximum_requests",
            INT,
            0,
            "restart a daemon process after N requests; 0 = never",
            minimum=0,
        ),
        STYLE.value(
            "queue_timeout",
            INT,
            45,
            "seconds a request may wait for a daemon thread before it is answered 503",
            minimum=1,
        ),
        STYLE.flag(
            "embedded_mode",
            False,
            "run the app inside Apache's MPM children (processes x threads of them) instead "
            "of daemon processes: no hop over a unix socket; daemon-only settings are ignored",
            written_off=False,
        ),
        STYLE.value(
            "response_flush_delay",
            INT,
            5,
            "milliseconds Apache waits for more of a daemon's response before flushing what "
            "it has to the client (daemon mode)",
            minimum=0,
            unset=5,
        ),
        STYLE.value(
            "switch_interval",
            FLOAT,
            0.005,
            "Python's GIL switch interval in seconds (sys.setswitchinterval), in every "
            "process that runs the app",
            minimum=0.0001,
            unset=0.005,
        ),
        STYLE.flag("access_log", False, "write an access log line per request", written_off=False),
    ),
)


class ModWsgiAdapter(ServerAdapter):
    name = "mod_wsgi"
    artifact_filename = "mod_wsgi-express.sh"
    logging_settings = MappingProxyType({"access_log": False})
    table = SETTINGS
    binary = "mod_wsgi-express"
    install_hint = (
        "pip install mod_wsgi (builds against Apache: apt-get install apache2-dev apache2-bin)"
    )
    distribution = "mod_wsgi"
    process_model = ProcessModel(
        forks_workers=True, processes="processes", threads="threads", kind_label="Apache MPM"
    )
    # mod_wsgi-express reads no variable for its counts; MOD_WSGI_ as the launcher's own
    # MOD_WSGI_RUN_USER.
    sizing_env = "MOD_WSGI_PROCESSES"

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        where = "embedded" if values["embedded_mode"] else "daemon threads"
        return f"{values['server_mpm']} MPM / {where}"

    def version(self) -> str:
        # `mod_wsgi-express module-config` would need Apache; the package knows its version.
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as package_version

        try:
            return first_version_number(package_version("mod_wsgi"))
        except PackageNotFoundError:
            raise ToolMissingError(f"mod_wsgi is not installed; {self.install_hint}") from None

    def _command(
        self, express: str, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> list[str]:
        """The start-server command: the app, the address, the log, then the tuned flags."""
        return [
            express,
            "start-server",
            "--application-type",
            "module",
            "--entry-point",
            app.module,
            "--callable-object",
            app.callable,
            "--working-directory",
            app.pythonpath,
            "--python-path",
            app.pythonpath,
            "--host",
            bind.host,
            "--port",
            str(bind.port),
            # Apache's error log (and the access log) to stderr/stdout, not the server root.
            "--log-to-terminal",
            *self.table.argv(self.resolve(values)),
        ]

    def _as_ordinary_user(self) -> list[str]:
        """As root: the prefix that runs Apache in a user namespace of its own (see above)."""
        if os.geteuid() != 0:
            return []
        unshare = shutil.which("unshare")
        if unshare is None:
            raise ToolMissingError(
                "mod_wsgi-express run as root needs `unshare` (util-linux) so that Apache "
                "does not run as root"
            )
        return [unshare, "--user"]

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        argv = self._command(self.executable(), app, bind, values)
        # A server root per trial: the generated httpd.conf, the pid file and the sockets.
        # Absolute: Apache runs in the app's folder, and trials pass a relative workdir.
        argv += ["--server-root", str(workdir.resolve() / "mod_wsgi-server-root")]
        return self._spec([*self._as_ordinary_user(), *argv], app, {})

    def _spec(self, argv: list[str], app: AppRef, env: Mapping[str, str]) -> LaunchSpec:
        return LaunchSpec(
            argv=tuple(argv),
            env={"PYTHONUNBUFFERED": "1", **env},
            cwd=app.pythonpath,
            # SIGTERM is Apache's "stop now": it stops its children and the daemon
            # processes (which get mod_wsgi's shutdown-timeout, 5 s, to finish).
            stop_signal=signal.SIGTERM,
            stop_grace_s=8.0,
            signs=SIGNS,
        )

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        return self._script(request)

    def _script(
        self,
        request: ArtifactRequest,
        from_env: Mapping[str, str] | None = None,
        envvars: str | None = None,
    ) -> Artifact:
        """The launcher; `from_env` maps the settings whose value the command reads from a
        variable (`--threads "${MOD_WSGI_THREADS:-5}"`, after the other settings), a sized
        file's counts. processes = 1 is rendered then too (it is not left out). `envvars`:
        the file beside it that Apache's start sources (`--envvars-script`)."""
        command = self._command("mod_wsgi-express", request.app, request.bind, request.values)
        resolved = self.resolve(request.values)
        read = [f'--envvars-script "$(dirname "$0")/{envvars}"'] if envvars else []
        for name, variable in (from_env or {}).items():
            words = self.table.by_name[name].argv(resolved[name])
            if words:  # the measured words go: the variable's take their place, last
                at = [i for i in range(len(command)) if command[i : i + len(words)] == words]
                del command[at[0] : at[0] + len(words)]
            read.append(f'--{name.replace("_", "-")} "${{{variable}:-{resolved[name]}}}"')
        lines = ["#!/bin/sh", *comment_block(request.header, "#")]
        lines += [
            "#",
            "# mod_wsgi-express writes an Apache config (in /tmp/mod_wsgi-HOST:PORT:UID unless",
            "# --server-root says otherwise) and runs Apache in the foreground; SIGTERM stops it.",
            "# EDIT --host/--port for your deployment (127.0.0.1 accepts connections from this",
            "# machine only, e.g. behind nginx) and --working-directory/--python-path: the",
            "# app's folder.",
            "set -eu",
            "# Started as root, Apache must switch its children to another user, one that can",
            "# read the app and the Python installation.",
            'if [ "$(id -u)" = 0 ]; then',
            f'  set -- --user "${{MOD_WSGI_RUN_USER:-{DEFAULT_RUN_USER}}}" '
            f'--group "${{MOD_WSGI_RUN_GROUP:-{DEFAULT_RUN_USER}}}"',
            "fi",
            "# The app, the address, then the tuned settings (processes=1, max_clients=0,",
            "# response_flush_delay=5 and switch_interval=0.005 are mod_wsgi-express's",
            "# defaults and left out).",
        ]
        # Apache's children, mod_wsgi's daemon processes among them, inherit these.
        lines += shell_env_lines(request.env)
        lines.append(" \\\n  ".join([_continued(command), *read]) + ' "$@"')
        return self.shell_launcher(lines)

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """mod_wsgi-express.sh with --processes and --threads read from MOD_WSGI_PROCESSES
        and MOD_WSGI_THREADS, the launcher beside it that sets them from the box's limits
        (cmdlauncher.sized_command_files), and the envvars file that logs its `sizing:` line
        once Apache starts: mod_wsgi-express empties a log file on its stderr (opening it
        to write, to see that it can) before, which would erase a line printed then."""
        launcher, script = sized_command_files(
            self,
            request,
            {"processes": "MOD_WSGI_PROCESSES", "threads": "MOD_WSGI_THREADS"},
            lambda shell, from_env: self._script(shell, from_env, SIZED_ENVVARS),
            line_variable=SIZING_LINE_VARIABLE,
        )
        header, filename = request.header, request.filename
        envvars = "\n".join(
            [
                *comment_block(header, "#"),
                f"# Sourced by Apache's start (--envvars-script in {filename}), after",
                "# mod_wsgi-express has written its config: the `sizing:` line",
                f"# {launcher.filename} computed for this box, logged here.",
                f'if [ -n "${{{SIZING_LINE_VARIABLE}:-}}" ]; then',
                f"  printf '%s\\n' \"${SIZING_LINE_VARIABLE}\" >&2",
                "fi",
            ]
        )
        sourced = Artifact(SIZED_ENVVARS, envvars + "\n", run_hint=f"sh {filename}")
        return (launcher, script, sourced)

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        spec = self._artifact_launch(path, app, bind, values)
        shell = spec.argv.index("/bin/sh")
        argv = (*spec.argv[:shell], sys.executable, str(path))
        return replace(spec, argv=argv)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        # The script runs `mod_wsgi-express` from PATH: the tuner's own first. The default
        # server root goes under $TMPDIR.
        search_path = self.own_bin_first()
        # A short, fresh folder per boot: the daemon's unix socket paths live below it, and a
        # path past 107 bytes is cut, so two daemons collide ("Address already in use").
        root = tempfile.mkdtemp(prefix="tuner-mod_wsgi-")
        env = {"PATH": search_path, "TMPDIR": root}
        spec = self._spec([*self._as_ordinary_user(), "/bin/sh", str(path)], app, env)
        return replace(spec, scratch=(root,))

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return ["/bin/sh", "-n", str(path)]

    def sized_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return sized_check_argv(path)


def _continued(argv: list[str]) -> str:
    """`exec` + argv as shell words, one option per line (readable, and easy to edit)."""
    parts = [f"exec {shlex.quote(argv[0])} {shlex.quote(argv[1])}"]
    words = argv[2:]
    index = 0
    while index < len(words):
        if index + 1 < len(words) and not words[index + 1].startswith("--"):
            parts.append(f"{shlex.quote(words[index])} {shlex.quote(words[index + 1])}")
            index += 2
        else:
            parts.append(shlex.quote(words[index]))
            index += 1
    return " \\\n  ".join(parts)
