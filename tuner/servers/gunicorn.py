"""gunicorn: its tunable settings as one table, and how to run it or write gunicorn.conf.py.

Pre-forking: a master forks `workers` processes, each sync, gthread (a thread pool) or gevent
for WSGI apps; for ASGI apps each is a uvicorn worker (tuner/servers/gunicorn_asgi.py).
"""

from __future__ import annotations

import importlib.util
import signal
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import MappingProxyType

from tuner.apps import AppRef, Interface
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
from tuner.servers.gc_freeze import GUNICORN_HOOKS
from tuner.servers.setting_builders import BOOL, CHOICE, INT, SettingStyle, unrendered
from tuner.settings import Setting, SettingsTable, Value

# gunicorn's own exit code when the app module imports but the callable cannot be loaded
# (Arbiter.APP_LOAD_ERROR). Exit 3 (WORKER_BOOT_ERROR) is left a trial failure: it also
# covers worker-level errors a different config may avoid, unless the log shows the app's own
# import failing (below). Bad setting values exit 1 or 2.
APP_LOAD_ERROR = 4
# Exit 3 with a traceback through gunicorn's import_app: the worker could not import the app
# module itself, which no setting changes.
WORKER_BOOT_ERROR = 3
APP_IMPORT_TRACE = "in import_app"

# The C HTTP parser behind http_parser=fast (and auto, where it is installed).
FAST_PARSER = "gunicorn_h1c"
# A trial's own small config file holding the gc_freeze hooks (the rest is on the argv), as
# the written gunicorn.conf.py holds them: server hooks cannot be given on the command line.
HOOKS_FILE = "gunicorn-gc-freeze.py"


@cache
def fast_parser_installed() -> bool:
    """gunicorn_h1c importable by this Python, so by the gunicorn the tuner runs."""
    return importlib.util.find_spec(FAST_PARSER) is not None


SIGNS = StartupSigns(
    # "Connection in use" comes first; gunicorn then retries for 5 s before giving up.
    port_in_use=("Address already in use", "Connection in use"),
    rejected_value=("error: argument", "Invalid value for", "Entry point"),
    app_broken_exit_codes=frozenset({APP_LOAD_ERROR}),
    app_broken_if_logged={WORKER_BOOT_ERROR: APP_IMPORT_TRACE},
)


# `--workers 3` on the command line, `workers = 3` (a Python literal) in gunicorn.conf.py.
STYLE = SettingStyle(text=repr, truth=lambda value: repr(bool(value)))

SETTINGS = SettingsTable(
    "gunicorn",
    (
        STYLE.value("workers", INT, 1, "worker processes", minimum=1),
        STYLE.value(
            "worker_class",
            CHOICE,
            "sync",
            "sync: one request at a time per worker; gthread: a thread pool per worker; "
            "gevent: greenlets, one per connection (time.sleep and sockets monkey-patched)",
            choices=("sync", "gthread", "gevent"),
        ),
        STYLE.value("threads", INT, 1, "threads per worker (gthread only)", minimum=1),
        STYLE.value(
            "worker_connections",
            INT,
            1000,
            "max simultaneous clients per worker (gevent and gthread)",
            minimum=1,
        ),
        STYLE.value(
            "keepalive",
            INT,
            2,
            "seconds to keep an idle keep-alive connection open (the sync worker never keeps "
            "connections alive)",
            minimum=0,
            flag="--keep-alive",
        ),
        STYLE.value(
            "max_requests", INT, 0, "restart a worker after N requests; 0 = never", minimum=0
        ),
        STYLE.value(
            "max_requests_jitter",
            INT,
            0,
            "random 0..N added to max_requests per worker so they do not restart together",
            minimum=0,
        ),
        STYLE.value("backlog", INT, 2048, "listen queue length", minimum=1),
        Setting(
            "accesslog",
            BOOL,
            False,
            "write an access log line per request (to stdout)",
            lambda v: ["--access-logfile", "-"] if v else [],
            lambda v: [("accesslog", repr("-") if v else "None")],
        ),
        STYLE.value(
            "timeout",
            INT,
            30,
            "seconds a silent worker lives before it is killed and restarted; 0 = never",
            minimum=0,
        ),
        STYLE.value(
            "graceful_timeout",
            INT,
            30,
            "seconds a stopping or recycled worker (max_requests) has to finish the requests "
            "and streams it carries before it is killed",
            minimum=0,
        ),
        STYLE.value(
            "http_parser",
            CHOICE,
            "auto",
            "python: gunicorn's pure-Python HTTP parser; fast: the gunicorn_h1c C parser "
            "(picohttpparser); auto: fast where gunicorn_h1c is installed, else python",
            choices=("auto", "fast", "python"),
        ),
        STYLE.flag(
            "reuse_port",
            False,
            "SO_REUSEPORT: each worker opens its own listening socket and the kernel spreads "
            "new connections over them (instead of workers racing on one shared socket)",
        ),
        STYLE.value(
            "protocol",
            CHOICE,
            "http",
            "http: clients speak HTTP to gunicorn; uwsgi: uWSGI's binary protocol, for "
            "nginx's uwsgi_pass in front (behind --front nginx it follows front_protocol)",
            choices=("http", "uwsgi"),
        ),
        STYLE.flag(
            "preload_app",
            False,
            "import the app in the master before forking workers (shares memory, faster boot)",
            flag="--preload",
        ),
        unrendered(
            "gc_freeze",
            BOOL,
            False,
            "with preload_app: no cyclic GC in the master, gc.freeze() before each fork, GC on "
            "again in each worker, so the app's objects stay shared (server hooks in the file)",
        ),
    ),
)


def gunicorn_cut_signs(values: Mapping[str, Value]) -> tuple[CutSign, ...]:
    """How gunicorn's log says a worker ended under the requests it served, as gunicorn 27.0.1
    writes it (arbiter.py's murder_workers, reap_workers and spawn_worker; the workers'
    max_requests check). Its log prefix `[%(process)d]` names the worker that writes a line
    itself (the arbiter names the worker in the message): one worker's end counts once."""
    timeout, drain = values.get("timeout", 30), values.get("graceful_timeout", 30)
    return (
        CutSign(
            r"WORKER TIMEOUT \(pid:(?P<pid>\d+)\)",
            "gunicorn WORKER TIMEOUT",
            f"timeout = {timeout} s kills a worker whose request runs longer, a stream's too",
        ),
        CutSign(
            r"\[(?P<pid>\d+)\] \[INFO\] Autorestarting worker after current request",
            "gunicorn worker recycled",
            f"max_requests = {values.get('max_requests', 0)}: the worker restarts after that "
            f"many requests, and what it still carries gets graceful_timeout = {drain} s",
        ),
        CutSign(
            r"Worker \(pid:(?P<pid>\d+)\) was sent SIGKILL",
            "gunicorn worker SIGKILLed",
            "a worker killed outright (out of memory, gunicorn says)",
        ),
        CutSign(
            r"Worker \(pid:(?P<pid>\d+)\) was sent SIGABRT",
            "gunicorn worker aborted",
            f"SIGABRT: gunicorn's kill of a worker silent for longer than timeout = {timeout} s",
        ),
        CutSign(
            r"Worker exiting \(pid: (?P<pid>\d+)\)",
            "gunicorn worker exited",
            "a worker ended during the run, and the connections it held with it",
        ),
    )


def check_gc_freeze(values: Mapping[str, Value]) -> None:
    """Refuse gc_freeze without preload_app: the master has no app objects to freeze then."""
    if values["gc_freeze"] and not values["preload_app"]:
        raise ConfigError(
            "gunicorn gc_freeze=true with preload_app=false: each worker imports the app "
            "after the fork, so the master has none of its objects to freeze; use "
            "preload_app=true, or gc_freeze=false"
        )


def gc_freeze_hooks(values: Mapping[str, Value]) -> list[str]:
    """The server hooks a config with gc_freeze needs in its gunicorn.conf.py (none without:
    tuner/servers/gc_freeze.py says what they do)."""
    return list(GUNICORN_HOOKS) if values.get("gc_freeze") else []


class GunicornAdapter(ServerAdapter):
    name = "gunicorn"
    artifact_filename = "gunicorn.conf.py"
    table = SETTINGS
    binary = "gunicorn"
    install_hint = "pip install gunicorn"
    distribution = "gunicorn"
    logging_settings = MappingProxyType({"accesslog": False})
    sizing_env = "WEB_CONCURRENCY"
    process_model = ProcessModel(
        forks_workers=True, processes="workers", threads="threads", kind_label="worker_class"
    )
    # `--bind unix:PATH` (gunicorn's docs, "bind"); `protocol = "uwsgi"` speaks uWSGI's binary
    # protocol there, for nginx's uwsgi_pass. The bind decides the protocol (`resolve`):
    # `protocol` is uwsgi exactly when the server is bound for uwsgi (check_bound).
    binds = frozenset(
        (transport, protocol)
        for transport in Transport
        for protocol in (Protocol.HTTP, Protocol.UWSGI)
    )
    # Read from gunicorn 27.0.1: a uwsgi request is parsed by gunicorn/uwsgi/message.py, never
    # by the HTTP parser (so http_parser is moot), and nginx keeps no uwsgi connection alive
    # (so keepalive is moot; `resolve` turns it off, see there).
    http_only_settings: tuple[str, ...] = ("http_parser", "keepalive")
    # WSGI apps as above; ASGI apps through the uvicorn worker (gunicorn_asgi.py).
    interfaces = frozenset({Interface.WSGI, Interface.ASGI})
    interface_adapters = MappingProxyType(
        {Interface.ASGI: "tuner.servers.gunicorn_asgi:GunicornAsgiAdapter"}
    )

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return str(values["worker_class"])

    def cut_signs(self, values: Mapping[str, Value]) -> tuple[CutSign, ...]:
        return gunicorn_cut_signs(values)

    def extras(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        # gunicorn's gevent worker imports `packaging`, declared only in its gevent extra.
        return ("gevent",) if values["worker_class"] == "gevent" else ()

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        # The C parser is named as its own distribution, pinned to the version measured, not
        # as gunicorn's `fast` extra: gunicorn 27.0.1's extra asks for gunicorn_h1c>=0.6.14,
        # newer than the one measured (and than the newest our package index carries, 0.6.10,
        # so `pip install 'gunicorn[fast]==27.0.1'` fails there). `auto` measured here used
        # the C parser whenever it is installed, so a host needs it to run as measured.
        parser = values["http_parser"]
        if parser == "fast" or (parser == "auto" and fast_parser_installed()):
            return (FAST_PARSER,)
        return ()

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        modes: list[dict[str, Value]] = [{"worker_class": "sync"}]
        modes += [{"worker_class": "gthread", "threads": t} for t in (2, 4, 8, 16)]
        modes += [{"worker_class": "gevent", "worker_connections": c} for c in (100, 1000, 2000)]
        return [{"workers": n, **mode} for n in worker_counts(cpus) for mode in modes]

    def check_combination(self, values: Mapping[str, Value]) -> None:
        check_gc_freeze(values)
        if values["http_parser"] == "fast" and not fast_parser_installed():
            raise ConfigError(
                f"gunicorn http_parser=fast: the C parser ({FAST_PARSER}) is not installed "
                f"here, so gunicorn would fail every request; pip install {FAST_PARSER}, or "
                "use http_parser=python"
            )
        threads = int(values["threads"])
        worker_class = values["worker_class"]
        if worker_class == "gevent" and threads > 1:
            raise ConfigError(
                f"gunicorn worker_class=gevent with threads={threads}: gevent workers ignore "
                "threads (they run one greenlet per connection, up to worker_connections); "
                "use threads=1 with gevent, or worker_class=gthread for threads"
            )
        if worker_class == "sync" and threads > 1:
            raise ConfigError(
                f"gunicorn worker_class=sync with threads={threads}: gunicorn silently runs "
                "gthread workers instead; use worker_class=gthread for threads, or threads=1"
            )

    def check_bound(self, bind: Bind, values: Mapping[str, Value]) -> None:
        if values["protocol"] != bind.protocol.value:
            # Behind a front the bind sets the protocol (resolve); without one the load
            # generator, which speaks HTTP only, is the client.
            raise ConfigError(
                f"gunicorn protocol={values['protocol']} on a server reached by "
                f"{bind.protocol}: only nginx speaks uWSGI's binary protocol to gunicorn, and "
                "the load generator speaks HTTP; use --front nginx --set front_protocol=uwsgi "
                "(or protocol=http without a front)"
            )
        if bind.path is not None and values.get("reuse_port"):
            # Measured: each worker logs "[Errno 95] Operation not supported", exits and is
            # started again, and the socket never answers.
            raise ConfigError(
                "gunicorn reuse_port=true on a unix socket: SO_REUSEPORT is for TCP, so every "
                "worker fails to listen and is restarted for ever; use reuse_port=false, or "
                "front_transport=tcp"
            )

    def resolve(self, values: Mapping[str, object], *, bind: Bind = DIRECT) -> dict[str, Value]:
        """`values` as gunicorn runs them bound as `bind`: over the uwsgi protocol,
        `protocol = uwsgi` and `keepalive = 0`, so that a trial records what ran.

        nginx's uwsgi_pass opens a connection per request and closes it once it has the
        response (no upstream keep-alive for uwsgi). A gthread or gevent worker with keepalive
        on then waits for a next request, reads nginx's close as a truncated header and logs
        "Error handling request" with a traceback for every request (gunicorn 27.0.1,
        measured behind nginx 1.22); keepalive = 0 closes first, as sync workers always do.
        """
        if bind.protocol is Protocol.UWSGI:
            values = {**values, "protocol": Protocol.UWSGI.value, "keepalive": 0}
        return super().resolve(values, bind=bind)

    def _wiring(self, app: AppRef, bind: Bind) -> list[tuple[str, str]]:
        """The settings every run needs, not tuned: where the app is and where to listen."""
        return [
            ("wsgi_app", repr(app.spec)),
            # chdir (not pythonpath) puts the app's folder on sys.path early enough for
            # `gunicorn --check-config`, and gives the app the working directory it was tuned in.
            ("chdir", repr(app.pythonpath)),
            ("bind", repr([_bind_text(bind)])),
            # gunicorn 25.1+ opens a control socket at ~/.gunicorn/gunicorn.ctl by default;
            # two servers at once (or a deployed one and a trial) would fight over it.
            ("control_socket_disable", "True"),
        ]

    def _launch(
        self, app: AppRef, bind: Bind, values: Mapping[str, Value], workdir: Path
    ) -> LaunchSpec:
        resolved = self.resolve(values, bind=bind)
        argv = [
            self.executable(),
            "--bind",
            _bind_text(bind),
            "--no-control-socket",
            "--chdir",
            app.pythonpath,
            *self.table.argv(resolved),
            app.spec,
        ]
        spec = self._spec(argv, app, resolved, bind)
        hooks = gc_freeze_hooks(resolved)
        if not hooks:
            return spec
        # The hooks in a small config file, as the written one holds them; the argv wins.
        hooks_file = workdir.resolve() / HOOKS_FILE
        argv[-1:-1] = ["--config", str(hooks_file)]
        return replace(spec, argv=tuple(argv), files={str(hooks_file): "\n".join(hooks) + "\n"})

    def _spec(
        self,
        argv: list[str],
        app: AppRef,
        values: Mapping[str, Value],
        bind: Bind,
    ) -> LaunchSpec:
        stop, quick = self.stop_signals(values)
        return LaunchSpec(
            argv=tuple(argv),
            env={"PYTHONUNBUFFERED": "1"},
            cwd=app.pythonpath,
            stop_signal=stop,
            quick_stop_signal=quick,
            stop_grace_s=5.0,
            signs=SIGNS,
            bind=bind if bind.kind != HTTP_OVER_TCP else None,
        )

    def stop_signals(
        self, values: Mapping[str, Value]
    ) -> tuple[signal.Signals, signal.Signals | None]:
        """The signal that stops this config, and the quicker one after it (`_stop_signals`)."""
        worker_class = values.get("worker_class", self.table.defaults()["worker_class"])
        return _stop_signals(str(worker_class))

    def worker_lines(self, values: Mapping[str, Value]) -> list[str]:
        """Lines of the written file that set up its worker class beyond the table's own
        `key = value` lines (the ASGI variant's uvicorn worker); none for WSGI."""
        return []

    def _render_artifact(self, request: ArtifactRequest) -> Artifact:
        lines = self._file_lines(request, self.resolve(request.values, bind=request.bind))
        return Artifact(
            self.artifact_filename,
            "\n".join(lines) + "\n",
            run_hint=f"gunicorn --config {self.artifact_filename}",
        )

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """gunicorn.conf.py is Python: it reads the box's limits and sets `workers` (and
        `threads`, for gthread) from the rule itself, and logs the `sizing:` line from gunicorn's
        on_starting hook, in gunicorn's own log. WEB_CONCURRENCY overrides the count (gunicorn's
        convention: its own default for `workers` reads it)."""
        resolved = self.resolve(request.values, bind=request.bind)
        # The uvicorn worker's table has no worker_class (nor threads): one loop per worker.
        threaded = resolved.get("worker_class") == "gthread"
        computed = ("workers", "threads") if threaded else ("workers",)
        lines = self._file_lines(request, resolved, computed)
        lines += ["", *sizing_code(request.rule), 'workers = SIZED["processes"]']
        if threaded:
            lines.append('threads = SIZED["threads"]')
        lines += [
            "",
            "",
            "def on_starting(server):",
            '    server.log.info(SIZED["line"])',
        ]
        filename = request.filename
        return (
            Artifact(filename, "\n".join(lines) + "\n", run_hint=f"gunicorn --config {filename}"),
        )

    def _file_lines(
        self,
        request: ArtifactRequest,
        resolved: Mapping[str, Value],
        computed: tuple[str, ...] = (),
    ) -> list[str]:
        """The file's lines: header, wiring, the app's settings, the tuned settings at their
        `resolved` values (those in `computed` are left to the sizing code that follows)."""
        app, bind, env = request.app, request.bind, request.env
        lines = comment_block(request.header, "#")
        if lines:
            lines.append("")
        lines.append("# Where the app is and where to listen. EDIT chdir (the app's folder on the")
        lines.append("# machine it was tuned on) and bind for your deployment: 127.0.0.1 accepts")
        lines.append("# connections from this machine only (e.g. behind nginx).")
        lines += [f"{key} = {text}" for key, text in self._wiring(app, bind)]
        if bind.protocol is Protocol.UWSGI:
            lines.append("# Speaks uWSGI's binary protocol to nginx's uwsgi_pass (protocol below),")
            lines.append("# with keepalive = 0: nginx opens a connection per uwsgi request. Over")
            lines.append("# TCP gunicorn takes uwsgi requests only from uwsgi_allow_ips (default")
            lines.append("# 127.0.0.1 and ::1): add nginx's address if it runs on another host.")
        if env:
            # gunicorn sets raw_env in its master before it imports the app or forks.
            lines += [
                "",
                "# The app's own settings, as measured (it reads them from its environment).",
            ]
            lines.append(f"raw_env = {[f'{name}={value}' for name, value in env.items()]!r}")
        lines += self.worker_lines(resolved)
        lines += ["", "# Tuned settings (every one listed, defaults included)."]
        for setting in self.table.settings:
            if setting.name in computed:
                lines.append(f"# {setting.name}: sized at boot, below  # {setting.doc}")
                continue
            for key, text in setting.config(resolved[setting.name]):
                lines.append(f"{key} = {text}  # {setting.doc}")
        return lines + gc_freeze_hooks(resolved)

    def _file_argv(self, path: Path, app: AppRef) -> list[str]:
        # -c always: without it gunicorn reads ./gunicorn.conf.py from its working folder.
        return [self.executable(), "--config", str(path)]

    def _artifact_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._spec(self._file_argv(path, app), app, values, bind)

    def artifact_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        return [*self._file_argv(path, app), "--check-config"]

    def version(self) -> str:
        return first_version_number(self._version_output("--version"))


def _stop_signals(worker_class: str) -> tuple[signal.Signals, signal.Signals | None]:
    """The signal that stops gunicorn with `worker_class` workers, and the quicker one for
    workers still there half a second later (None: the first one is already quick).

    SIGINT is gunicorn's quick shutdown, but a gthread worker's SIGINT/SIGQUIT handler calls
    ThreadPoolExecutor.shutdown, which takes the pool's lock: when the signal lands while the
    worker's main thread holds that lock in submit() (accepting a connection, or starting one
    of its threads: most likely just after boot or as a load run's connections close), the
    worker deadlocks and only SIGKILL ends it (gunicorn 27.0.1, seen with py-spy; 3 of 12
    stops after a short load). SIGTERM's handler (sync and gthread) only sets a flag and wakes
    the worker, which stops accepting and exits at once when idle; the master then stops too
    (graceful_timeout, 30 s, bounds its wait for the workers). The quick signal follows for a
    worker still busy or waiting on a kept-alive (2 s) or silent (5 s) connection, by then
    outside submit(). Measured after a load run: SIGTERM stops sync and gthread in 0.22-0.27 s,
    SIGINT in 0.32-0.46 s (its handler sleeps 0.1 s). A gevent worker notices SIGTERM only in
    its one-second loop (0.35-0.56 s), so it keeps SIGINT (0.34-0.37 s).
    """
    if worker_class == "gevent":
        return signal.SIGINT, None
    return signal.SIGTERM, signal.SIGQUIT


def _bind_text(bind: Bind) -> str:
    """gunicorn's `bind`: `unix:PATH` for a unix socket, else `host:port`."""
    return f"unix:{bind.path}" if bind.path is not None else bind.address()
