"""werkzeug's development server (what `flask run` starts): a baseline, not a deployment.

It shows what "just `flask run`" costs next to a real server. One request at a time by
default; `threaded` starts a thread per connection (Flask's `flask run` default), `processes`
forks a child per connection, at most `processes` at once. Forked children are not workers:
each one serves one connection until the client closes it, so with keep-alive a server with
fewer `processes` than clients leaves the others waiting.

The deployable file is a Python launcher (werkzeug has no command of its own) whose first
lines say plainly that it is not for production.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.errors import ConfigError
from tuner.servers.base import BASELINE_DEFAULT, DIRECT, Baseline, Bind, ProcessModel
from tuner.servers.grids import product_grid
from tuner.servers.pylauncher import PYTHON, PythonLauncherAdapter, constant
from tuner.servers.setting_builders import BOOL, CHOICE, INT
from tuner.settings import SettingsTable, Value

BASELINE_FLASK_RUN = "flask run"

SETTINGS = SettingsTable(
    "werkzeug",
    (
        PYTHON.value(
            "mode",
            CHOICE,
            "single",
            "single: one request at a time (run_simple's default); threaded: a thread per "
            "connection (flask run's default); processes: a forked child per connection",
            choices=("single", "threaded", "processes"),
        ),
        PYTHON.value(
            "processes",
            INT,
            1,
            "forked children at once (mode=processes only)",
            minimum=1,
        ),
        PYTHON.value("request_log", BOOL, True, "a log line per request on stderr"),
        PYTHON.value(
            "nodelay",
            BOOL,
            False,
            "TCP_NODELAY on accepted connections (WSGIRequestHandler.disable_nagle_algorithm); "
            "off, a response's body waits for the ACK of its headers",
        ),
        PYTHON.value(
            "backlog", INT, 128, "listen queue length (capped by net.core.somaxconn)", minimum=1
        ),
    ),
)

_SERVER_CODE = f"""\
import logging

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, run_simple

# Read when the socket starts listening, so set on the class before the server is made.
BaseWSGIServer.request_queue_size = {constant("backlog")}
# Read by socketserver's StreamRequestHandler.setup for every accepted connection.
WSGIRequestHandler.disable_nagle_algorithm = {constant("nodelay")}
if not {constant("request_log")}:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
print(f"werkzeug serving on http://{{HOST}}:{{PORT}}", flush=True)
run_simple(
    HOST,
    PORT,
    app,
    threaded={constant("mode")} == "threaded",
    processes={constant("processes")} if {constant("mode")} == "processes" else 1,
)
"""


class WerkzeugAdapter(PythonLauncherAdapter):
    name = "werkzeug"
    artifact_filename = "werkzeug_serve.py"
    table = SETTINGS
    module = "werkzeug.serving"
    distribution = "werkzeug"
    install_hint = "pip install werkzeug"
    notice = (
        "NOT FOR PRODUCTION: this runs werkzeug's development server (what `flask run`",
        "starts). It is a baseline to compare real servers against; deploy one of those.",
    )
    # Forked children (mode=processes) are not workers: one per connection, for its life.
    process_model = ProcessModel(
        forks_workers=False, processes=None, threads=None, kind_label="mode"
    )

    def concurrency_model(self, values: Mapping[str, Value]) -> str:
        return str(values["mode"])

    def pins_connections(self, values: Mapping[str, Value], *, bind: Bind = DIRECT) -> bool:
        # A forked child keeps its keep-alive connection until the client closes it.
        return bind.kept_open and values["mode"] == "processes"

    def check_combination(self, values: Mapping[str, Value]) -> None:
        processes = int(values["processes"])
        if processes > 1 and values["mode"] != "processes":
            raise ConfigError(
                f"werkzeug processes={processes} with mode={values['mode']}: only "
                "mode=processes forks; use mode=processes, or processes=1"
            )

    def baselines(self, cpus: float) -> tuple[Baseline, ...]:
        """The server's default (one request at a time) and what `flask run` starts."""
        return (
            Baseline(BASELINE_DEFAULT, self.resolve({}), "werkzeug run_simple's own defaults"),
            Baseline(
                BASELINE_FLASK_RUN,
                self.resolve({"mode": "threaded"}),
                "threaded, as `flask run` starts it (Flask's default since 1.0)",
            ),
        )

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        """Each mode (forked children 2 to 128) by request log by backlog: 44 configs."""
        switches = {"request_log": (True, False), "backlog": (128, 1024)}
        return product_grid({"mode": ("single", "threaded"), **switches}) + product_grid(
            {"mode": ("processes",), "processes": (2, 4, 8, 16, 32, 48, 64, 96, 128), **switches}
        )

    def server_code(self, values: Mapping[str, Value]) -> list[str]:
        return _SERVER_CODE.splitlines()
