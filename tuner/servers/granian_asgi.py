"""granian (2.x) for ASGI apps (`--interface asgi`): its settings for that interface.

Each worker process runs the app's coroutines on one Python event loop (`loop`, with
`task_impl` making its tasks), while its Rust runtime (`runtime_threads`, `runtime_mode`) does
the network I/O; `backpressure` caps the requests a worker runs at once. granian 2.8.9 refuses
more than one blocking thread for ASGI ("Blocking threads > 1 is not supported on ASGI and
RSGI", server/common.py), so there is no thread count here: concurrency is the loop's.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from functools import cache

from tuner.apps import Interface
from tuner.errors import ConfigError
from tuner.servers.base import ProcessModel, shipped_space, worker_counts
from tuner.servers.granian import SETTINGS as WSGI_SETTINGS
from tuner.servers.granian import STYLE, GranianAdapter
from tuner.servers.setting_builders import CHOICE
from tuner.settings import SettingsTable, Value

# granian's loops that need a package of their own (granian/_loops.py registers each only
# where it imports), in the order `auto` picks them; winloop is Windows only.
LOOP_PACKAGES = ("rloop", "uvloop")
# granian 2.8.9 falls back to asyncio tasks, with a warning, on Python 3.12 and later.
RUST_TASKS_BEFORE = (3, 12)


@cache
def installed(module: str) -> bool:
    """`module` importable by this Python, so by the granian the tuner runs."""
    return importlib.util.find_spec(module) is not None


def effective_loop(values: Mapping[str, Value]) -> str:
    """The loop a worker runs: auto is rloop, else uvloop, else asyncio, as installed."""
    loop = str(values["loop"])
    if loop != "auto":
        return loop
    return next((name for name in LOOP_PACKAGES if installed(name)), "asyncio")


SETTINGS = SettingsTable(
    "granian",
    (
        WSGI_SETTINGS.get("workers"),
        WSGI_SETTINGS.get("runtime_threads"),
        STYLE.value(
            "runtime_mode",
            CHOICE,
            "auto",
            "st: one single-threaded runtime per runtime thread; mt: one multi-threaded "
            "runtime; auto = mt for ASGI",
            choices=("auto", "st", "mt"),
        ),
        STYLE.value(
            "loop",
            CHOICE,
            "auto",
            "the workers' event loop: auto = rloop, else uvloop, else asyncio, as installed",
            choices=("auto", "asyncio", "uvloop", "rloop"),
        ),
        STYLE.value(
            "task_impl",
            CHOICE,
            "asyncio",
            "how the app's coroutines become tasks: asyncio's, or granian's own in Rust "
            "(experimental; Python < 3.12 only)",
            choices=("asyncio", "rust"),
        ),
        WSGI_SETTINGS.get("http"),
        WSGI_SETTINGS.get("backlog"),
        WSGI_SETTINGS.get("backpressure"),
        WSGI_SETTINGS.get("http1_keep_alive"),
        WSGI_SETTINGS.get("http1_buffer_size"),
        WSGI_SETTINGS.get("workers_lifetime"),
        WSGI_SETTINGS.get("access_log"),
    ),
)


class GranianAsgiAdapter(GranianAdapter):
    """granian set up for ASGI apps (GranianAdapter.serving)."""

    table = SETTINGS
    space_file = shipped_space("granian-asgi")
    interfaces = frozenset({Interface.ASGI})
    interface_flag = "asgi"
    process_model = ProcessModel(
        forks_workers=True, processes="workers", threads=None, kind_label="runtime"
    )

    def threads(self, values: Mapping[str, Value]) -> int:
        return 1  # one event loop per worker (granian allows no more blocking threads)

    def extras(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        # granian's own extras bring the loops; `auto` ran the one installed here.
        loop = effective_loop(values)
        return (loop,) if loop in LOOP_PACKAGES else ()

    def extra_distributions(self, values: Mapping[str, Value]) -> tuple[str, ...]:
        # The loop again, pinned to the one measured (the extra asks only for a minimum).
        return self.extras(values)

    def check_combination(self, values: Mapping[str, Value]) -> None:
        super().check_combination(values)
        loop = str(values["loop"])
        if loop in LOOP_PACKAGES and not installed(loop):
            raise ConfigError(
                f"granian loop={loop}: {loop} is not installed here, so granian would refuse "
                f"to start; pip install 'granian[{loop}]', or use loop=auto"
            )
        if values["task_impl"] == "rust" and sys.version_info >= RUST_TASKS_BEFORE:
            raise ConfigError(
                "granian task_impl=rust: granian runs asyncio tasks instead on Python 3.12 and "
                "later (this is "
                f"{sys.version_info.major}.{sys.version_info.minor}); use task_impl=asyncio"
            )

    def hand_grid(self, cpus: int) -> list[dict[str, Value]]:
        loops = ["asyncio", *(name for name in LOOP_PACKAGES if installed(name))]
        modes = [(loop, mode) for loop in loops for mode in ("st", "mt")]
        return [
            {"workers": n, "loop": loop, "runtime_mode": mode}
            for n in worker_counts(cpus)
            for loop, mode in modes
        ]
