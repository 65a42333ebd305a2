"""uWSGI: its tunable settings as one table, and how to run it or write uwsgi.ini.

Pre-forking (with or without its master): `processes` workers, each sync, threaded or a gevent
loop, speaking HTTP itself (http-socket, http11-socket) or behind uWSGI's HTTP router (http).
"""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef
from tuner.errors import ConfigError
from tuner.logsigns import CutSign
from tuner.servers.base import (
    DIRECT,
    HTTP_OVER_TCP,
    Artifact,
    ArtifactRequest,
    Bind,
    LaunchSpec,
    ProcessModel,
    Protocol,
    ServerAdapter,
    SizedRequest,
    StartupSigns,
    Transport,
    comment_block,
    first_version_number,
    sizing_code,
    worker_counts,
)
from tuner.servers.gc_freeze import uwsgi_loader
from tuner.servers.setting_builders import BOOL, CHOICE, INT, SettingStyle, unrendered
from tuner.settings import Setting, SettingsTable, Value

# With need-app, uWSGI exits 22 (UWSGI_FAILED_APP_CODE) when the app cannot be imported or
# the callable is missing. An unknown option exits 1; a value the kernel refuses exits 1.
FAILED_APP_CODE = 22

SIGNS = StartupSigns(
    port_in_use=("Address already in use",),
    # e.g. "Listen queue size is greater than the system max net.core.somaxconn (4096)."
    rejected_value=("greater than", "unrecognized option", "invalid"),
    app_broken_exit_codes=frozenset({FAILED_APP_CODE}),
)

# Not tuned, always on: what makes a uWSGI instance safe to run and to stop.
ALWAYS_ON = (
    "strict",  # unknown options are errors instead of being ignored
    "need-app",  # exit instead of serving 500s when the app fails to load
    "die-on-term",  # 2.0.x reloads on SIGTERM otherwise; systemd and docker send SIGTERM
)

# uWSGI expands %(...), $(...), @(...) and friends inside ini values, and a newline would
# start a new option: only plain words, paths, numbers and addresses are written.
_SAFE_INI_VALUE = re.compile(r"[A-Za-z0-9_./:\[\]+,-]+")
# An app's environment value may also hold single spaces (uWSGI trims only the ends).
_SAFE_ENV_VALUE = re.compile(r"[A-Za-z0-9_./:\[\]+,-]+( [A-Za-z0-9_./:\[\]+,-]+)*")

# The launcher beside a sized uwsgi.ini; its sizing code (`sizing_code`) goes after the first
# line, and `# threads` marks where the thread count goes (threaded modes only).
SIZED_LAUNCHER_NAME = "uwsgi_sized.py"
SIZED_LAUNCHER = """# Starts uWSGI with {ini} (beside this file), its counts sized for this box.
import shutil
import sys

print(SIZED["line"], file=sys.stderr, flush=True)
# The uwsgi installed with this Python first (an un-activated virtualenv), else from PATH.
uwsgi = shutil.which("uwsgi", path=os.path.dirname(sys.executable)) or "uwsgi"
ini = os.path.join(os.path.dirname(os.path.abspath(__file__)), {ini!r})
argv = [uwsgi, "--ini", ini, "--processes", str(SIZED["processes"])]
# threads
os.execvp(uwsgi, argv)
"""


# `--processes 4` on the command line, `processes = 4` in uwsgi.ini; a switch is written only
# when on (uWSGI's switches are off by default).
STYLE = SettingStyle()


def _threads_argv(value: Value) -> list[str]:
    return ["--threads", str(value), "--enable-threads"] if int(value) > 1 else []


def _threads_config(value: Value) -> list[tuple[str, str]]:
    return [("threads", str(value)), ("enable-threads", "true")] if int(value) > 1 else []


def _gevent_argv(value: Value) -> list[str]:
    # Early monkey patching (before the app is imported) is what lets time.sleep and blocking
    # sockets in the app yield to other requests.
    return ["--gevent", str(value), "--gevent-early-monkey-patch"] if int(value) > 0 else []


def _gevent_config(value: Value) -> list[tuple[str, str]]:
    if int(value) == 0:
        return []
    return [("gevent", str(value)), ("gevent-early-monkey-patch", "true")]


def _keepalive_argv(value: Value) -> list[str]:
    # An optional-argument option: getopt only takes the value in the `--opt=value` form.
    return [f"--http-keepalive={value}"] if int(value) > 0 else []


def _keepalive_config(value: Value) -> list[tuple[str, str]]:
    return [("http-keepalive", str(value))] if int(value) > 0 else []


SETTINGS = SettingsTable(
    "uwsgi",
    (
        STYLE.value("processes", INT, 1, "worker processes", minimum=1),
        Setting(
            "threads",
            INT,
            1,
            "threads per worker process (rendered with enable-threads)",
            _threads_argv,
            _threads_config,
            minimum=1,
        ),
        Setting(
            "gevent",
            INT,
            0,
            "0 = off; N = gevent loop with N async cores per worker, monkey-patched early so "
            "time.sleep and sockets in the app overlap",
            _gevent_argv,
            _gevent_config,
            minimum=0,
        ),
        unrendered(
            "protocol",
            CHOICE,
            "http-socket",
            "http: uWSGI's HTTP router process in front of the workers; http-socket: workers "
            "speak HTTP themselves and close the connection after each response; "
            "http11-socket: workers speak HTTP/1.1 and keep connections alive; uwsgi: the "
            "binary uwsgi protocol (`socket`), set by a bind behind nginx's uwsgi_pass",
            # Rendered by the adapter, which knows the address to bind.
            choices=("http", "http-socket", "http11-socket", "uwsgi"),
        ),
        Setting(
            "http-keepalive",
            INT,
            0,
            "keep-alive in the http router (protocol=http only): 0 = off, 1 = on, "
            "N > 1 = on with an N s idle timeout",
            _keepalive_argv,
            _keepalive_config,
            minimum=0,
        ),
        STYLE.value(
            "http-processes",
            INT,
            1,
            "HTTP router processes in front of the workers (protocol=http only); one router "
            "is one CPU at most",
            minimum=1,
            unset=1,
        ),
        STYLE.flag("disable-logging", False, "no request log line per request", written_off=False),
        STYLE.value(
            "max-worker-lifetime",
            INT,
            0,
            "restart a worker after N seconds; 0 = never (needs master)",
            minimum=0,
        ),
        STYLE.value(
            "max-requests",
            INT,
            0,
            "restart a worker after N requests; 0 = never (needs master; not before the "
            "worker is 10 s old)",
            minimum=0,
        ),
        # The kernel caps it at net.core.somaxconn; uWSGI refuses to start above that.
        STYLE.value("listen", INT, 100, "listen queue length", minimum=1, maximum=65535),
        STYLE.flag("thunder-lock", False, "serialize accept() between workers", written_off=False),
        STYLE.flag(
            "master",
            False,
            "run the master process (uWSGI's default is off: no respawn of dead workers)",
            written_off=False,
        ),
        STYLE.flag(
            "lazy-apps",
            False,
            "import the app in each worker after the fork instead of once before it (uWSGI's "
            "default, copy-on-write shared): more memory, for apps that are not fork-safe",
            written_off=False,
        ),
        unrendered(
            "gc-freeze",
            BOOL,
            False,
            "without lazy-apps: the app loaded with the cyclic GC off, then gc.freeze() before "
            "the fork, so its objects stay shared (an eval app loader in the file)",
        ),
    ),
)


def _ini_value(key: str, text: str) -> str:
    if not _SAFE_INI_VALUE.fullmatch(text):
        raise ConfigError(
            f"uwsgi.ini {key}={text!r}: only letters, digits and _ . / : [ ] + , - can be "
            "written to an ini file safely"
        )
    return text


def _env_lines(env: Mapping[str, str] | None) -> list[str]:
    """The app's own settings as `env` lines (the app is loaded by `_loader`'s code after
    they are set).

    `env` alone is uWSGI's way, and enough for a uWSGI binary that starts Python after reading
    its options. The pyuwsgi wheel (what the tuner measures) is a Python program: its
    `os.environ` was read before uWSGI parsed this file, so `env` never reaches the app there.
    """
    if not env:
        return []
    for name, value in env.items():
        if not _SAFE_ENV_VALUE.fullmatch(value):  # no % or $( that uWSGI expands, no newline
            raise ConfigError(
                f"uwsgi.ini env {name}={value!r}: only letters, digits, single spaces and "
                "_ . / : [ ] + , - can be written to an ini file safely"
            )
    return [
        "; The app's own settings, as measured (it reads them from its environment).",
        *(f"env = {name}={value}" for name, value in env.items()),
    ]


def _loader(app: AppRef, env: Mapping[str, str] | None, gc_freeze: bool) -> str | None:
    """Python code for uWSGI's `eval` app loader (in place of `module`) where the app cannot be
    loaded by its name alone, else None: with the app's settings it sets them in `os.environ`
    first (`_env_lines`), and with gc-freeze it loads the app between the gc recipe's steps
    (tuner/servers/gc_freeze.py)."""
    if not env and not gc_freeze:
        return None
    code = f"from {app.module} import {app.callable} as application"
    if env:
        update = ", ".join(f"{name!r}: {value!r}" for name, value in env.items())
        code = f"import os; os.environ.update({{{update}}}); {code}"
    return uwsgi_loader(code) if gc_freeze else code


class UwsgiAdapter(ServerAdapter):
    name = "uwsgi"
    artifact_filename = "uwsgi.ini"
    table = SETTINGS
    binary = "uwsgi"
    install_hint = "pip install pyuwsgi"
    # The prebuilt wheel, with the gevent loop built in (distribution builds need a plugin).
    distribution = "pyuwsgi"
    logging_settings = MappingProxyType({"disable-logging": True})
    sizing_env = "UWSGI_PROCESSES"
    process_model = ProcessModel(
        forks_workers=True, processes="processes", threads="threads", kind_label="protocol / mode"
    )
    # `socket = ADDRESS` speaks the binary uwsgi protocol (nginx's uwsgi_pass); `socket`,
    # `http-socket` and `http11-socket` take a unix socket's path as their address too
    # (uWSGI docs, "Configuring uWSGI", "Native HTTP support").
    # Which HTTP the workers speak (http, http-socket, http11-socket): moot over `socket`.
    http_only_settings = ("protocol",)
    binds = frozenset(
        (transport, protocol)
        for transport in Transport
        for protocol in (Protocol.HTTP, Protocol.UWSGI)
    )

    def cut_signs(self, values: Mapping[str, Value]) -> tuple[CutSign, ...]:
        # uWSGI 2.0.30's core: trigger_harakiri (master_utils.c) and simple_goodbye_cruel_world
        # (uwsgi.c, "...The work of process %d is done. Seeya!"; "is done (%s)" since 2.1).
        requests, lifetime = values.get("max-requests", 0), values.get("max-worker-lifetime", 0)
        return (
            CutSign(
                r"HARAKIRI ON WORKER \d+ \(pid: (?P<pid>\d+)",
                "uWSGI HARAKIRI",
                "harakiri kills a worker whose request runs longer than its limit, a stream's too",
            ),
            CutSign(
                r"\.\.\.The work of process (?P<pid>\d+) is done\b",
                "uWSGI worker recycled",
                f"max-requests = {requests}, max-worker-lifetime = {lifetime} s: a recycled "
                "worker ends, and the requests it still serves with it",
            ),
        )

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        if int(values["gevent"]) > 0:
            mode = "gevent"
        elif int(values["threads"]) > 1:
            mode = "threads"
        else:
            mode = "processes"
        return f"{values['protocol']} / {mode}"

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        # The pyuwsgi wheel has the gevent loop built in but does not declare gevent itself:
        # without it the loop cannot start.
        return ("gevent",) if int(values["gevent"]) > 0 else ()

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        modes: list[dict[str, Value]] = [
            {"protocol": "http-socket", "threads": t} for t in (1, 4, 16)
        ]
        modes += [{"protocol": "http11-socket", "threads": t} for t in (4, 16)]
        modes += [{"protocol": "http-socket", "gevent": g} for g in (100, 1000)]
        modes += [{"protocol": "http", "threads": 1}]
        return [
            {"processes": n, "master": True, "disable-logging": True, **mode}
            for n in worker_counts(cpus)
            for mode in modes
        ]

    def resolve(self, values: Mapping[str, object], *, bind: Bind = DIRECT) -> dict[str, Value]:
        """`values` as uWSGI runs them bound as `bind`: over the uwsgi protocol the workers
        listen with `socket` whatever HTTP `protocol` the search left, so a trial records
        `protocol = uwsgi`, what ran."""
        if bind.protocol is Protocol.UWSGI:
            values = {**values, "protocol": Protocol.UWSGI.value}
        return super().resolve(values, bind=bind)

    def check_bound(self, bind: Bind, values: Mapping[str, Value]) -> None:
        if (values["protocol"] == Protocol.UWSGI.value) != (bind.protocol is Protocol.UWSGI):
            # Behind a front the bind sets the protocol (resolve); without one the load
            # generator, which speaks HTTP only, is the client.
            raise ConfigError(
                f"uwsgi protocol={values['protocol']} on a server reached by {bind.protocol}: "
                "only nginx speaks uWSGI's binary protocol, and the load generator speaks HTTP; "
                "use --front nginx --set front_protocol=uwsgi (or an HTTP protocol: http, "
                "http-socket, http11-socket)"
            )

    def pins_connections(self, values: Mapping[str, Value], *, bind: Bind = DIRECT) -> bool:
        # A sync or threaded http11-socket worker stays on its keep-alive connection until the
        # client closes it (measured: 64 connections on 4 sync processes, 60 got nothing).
        http11 = bind.protocol is Protocol.HTTP and values["protocol"] == "http11-socket"
        return bind.kept_open and http11 and int(values["gevent"]) == 0

    def check_combination(self, values: Mapping[str, Value]) -> None:
        gevent = int(values["gevent"])
        threads = int(values["threads"])
        if gevent and values["protocol"] == "http11-socket":
            raise ConfigError(
                f"uwsgi gevent={gevent} with protocol=http11-socket: uWSGI's gevent loop "
                "crash-loops its workers on kept-alive connections; use protocol=http-socket "
                "or protocol=http with gevent"
            )
        if gevent and threads > 1:
            raise ConfigError(
                f"uwsgi gevent={gevent} with threads={threads}: threads replace the gevent "
                "async cores (uWSGI falls back to threaded mode); use threads=1 with gevent, "
                "or gevent=0 with threads"
            )
        routers = int(values["http-processes"])
        if routers > 1 and values["protocol"] != "http":
            raise ConfigError(
                f"uwsgi http-processes={routers} with protocol={values['protocol']}: only "
                "uWSGI's HTTP router (protocol=http) has router processes; use protocol=http "
                "or http-processes=1"
            )
        for recycling in ("max-requests", "max-worker-lifetime"):
            if int(values[recycling]) and not values["master"]:
                raise ConfigError(
                    f"uwsgi {recycling}={values[recycling]} with master=false: without the "
                    "master no one respawns a recycled worker and the server dies; "
                    "set master=true"
                )
        if values["gc-freeze"] and values["lazy-apps"]:
            raise ConfigError(
                "uwsgi gc-freeze=true with lazy-apps=true: each worker imports the app after "
                "the fork, so the master has none of its objects to freeze; use "
                "lazy-apps=false, or gc-freeze=false"
            )

    def _wiring(self, app: AppRef, bind: Bind, protocol: str) -> list[tuple[str, str]]:
        """Options every run needs, not tuned: the address, the app and where it lives.

        chdir gives the app the working directory it was tuned in, from the file too. A bind
        for the uwsgi protocol replaces the HTTP `protocol` setting by `socket`.
        """
        return [
            ("socket" if bind.protocol is Protocol.UWSGI else protocol, bind.address()),
            ("chdir", app.pythonpath),
            ("pythonpath", app.pythonpath),
            ("module", app.spec),
        ]

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        resolved = self.resolve(values, bind=bind)
        argv = [self.executable(), *(f"--{option}" for option in ALWAYS_ON)]
        # The app's settings reach a trial through its environment: only gc-freeze needs eval.
        loader = _loader(app, None, bool(resolved["gc-freeze"]))
        for key, text in self._wiring(app, bind, str(resolved["protocol"])):
            if loader and key == "module":
                key, text = "eval", loader
            argv += [f"--{key}", text]
        argv += self.table.argv(resolved)
        return self._spec(argv, app, bind)

    def _spec(self, argv: list[str], app: AppRef, bind: Bind) -> LaunchSpec:
        return LaunchSpec(
            argv=tuple(argv),
            env={"PYTHONUNBUFFERED": "1"},
            cwd=app.pythonpath,
            # SIGINT makes the master kill its workers and exit at once (SIGTERM is the
            # same with die-on-term, but SIGINT also works for a worker signalled directly).
            stop_signal=signal.SIGINT,
            stop_grace_s=5.0,
            signs=SIGNS,
            bind=bind if bind.kind != HTTP_OVER_TCP else None,
        )

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        app, bind, env = request.app, request.bind, request.env
        resolved = self.resolve(request.values, bind=bind)
        lines = comment_block(request.header, "#")
        lines.append("[uwsgi]")
        lines.append("; Always on: fail loudly, and stop on SIGTERM.")
        lines += [f"{option} = true" for option in ALWAYS_ON]
        lines.append("; Where the app is and where to listen. EDIT chdir (the app's folder on the")
        lines.append("; machine it was tuned on) and the socket address for your deployment:")
        lines.append("; 127.0.0.1 accepts connections from this machine only.")
        loader = _loader(app, env, bool(resolved["gc-freeze"]))
        for key, text in self._wiring(app, bind, str(resolved["protocol"])):
            if not (loader and key == "module"):  # the app is loaded below, by eval
                lines.append(f"{key} = {_ini_value(key, text)}")
        lines += _env_lines(env)
        if resolved["gc-freeze"]:
            lines.append("; gc-freeze: the master loads the app with the cyclic GC off, then")
            lines.append("; gc.freeze() puts every object it made where no collection walks it,")
            lines.append("; so the workers' collections do not copy the pages they share; the")
            lines.append("; GC is on again before the fork.")
        if loader:
            lines.append(f"eval = {loader}")
        if int(resolved["gevent"]) > 0:
            lines.append("; Needs a uWSGI build with the gevent loop: the pyuwsgi wheel has it")
            lines.append("; built in; a distribution's uwsgi needs its gevent plugin (e.g.")
            lines.append("; uwsgi-plugin-gevent-python3, plus `plugins = python3,gevent`).")
        lines.append("; Tuned settings (switches that are off, uWSGI's default, are left out).")
        for key, text in self.table.config_lines(resolved):
            lines.append(f"{key} = {_ini_value(key, text)}")
        return Artifact(
            self.artifact_filename,
            "\n".join(lines) + "\n",
            run_hint=f"uwsgi --ini {self.artifact_filename}",
        )

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """uwsgi.ini cannot compute, so a launcher beside it does: it reads the box's limits,
        prints the `sizing:` line (the first line of uWSGI's log) and execs uWSGI with the ini
        and the counts, which the command line sets over the ini's (the ini alone runs one
        measured size). UWSGI_PROCESSES overrides the count: uWSGI's own convention, every
        option as UWSGI_<NAME>, so uWSGI reads the same value itself."""
        filename = request.filename
        resolved = self.resolve(request.values, bind=request.bind)
        ini = self._render_artifact(request)
        launcher = SIZED_LAUNCHER.format(ini=filename).splitlines()
        threaded = int(resolved["gevent"]) == 0
        lines = [
            "#!/usr/bin/env python3",
            *comment_block(request.header, "#"),
            *launcher[:1],
            *sizing_code(request.rule),
            *launcher[1:],
        ]
        if threaded:
            lines.insert(lines.index("# threads"), 'argv += ["--threads", str(SIZED["threads"])]')
            lines.insert(lines.index("# threads"), 'argv += ["--enable-threads"]')
        lines.remove("# threads")
        script = Artifact(
            SIZED_LAUNCHER_NAME,
            "\n".join(lines) + "\n",
            run_hint=f"python {SIZED_LAUNCHER_NAME}",
            mode=0o755,
        )
        return (script, replace(ini, filename=filename))

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec([sys.executable, str(path)], app, bind)

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec([self.executable(), "--ini", str(path)], app, bind)

    def version(self) -> str:
        return first_version_number(self._version_output("--version"))
