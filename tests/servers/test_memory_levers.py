"""The memory levers of the pre-forking servers (tuner/servers/gc_freeze.py): gunicorn's
preload_app with gc_freeze (server hooks), uWSGI's lazy-apps and gc-freeze (an eval app
loader), in the written file and in a trial's launch. Pure, except the last two tests, which
boot the servers (marked `server` by their fixtures)."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import HOST, ROOT, require_adapter, running, wait_for_pids
from tests.servers.test_contract import SeededTrial, space_path
from tuner.apps import AppRef, Interface, parse_app
from tuner.errors import ConfigError
from tuner.search.space import load_space, suggest
from tuner.servers import adapter_serving, get_adapter
from tuner.servers.base import Bind, ServerAdapter
from tuner.servers.gunicorn import HOOKS_FILE
from tuner.servers.gunicorn_asgi import WORKER_FILE

BIND = Bind.tcp(HOST, 8000)
GC_APP = "tests/support/apps/gc_freeze_app.py:app"
# What a written gunicorn.conf.py's hooks do, run as gunicorn runs them: the file is read
# (gc.disable()), the master calls pre_fork before it forks and each worker post_fork.
RUN_HOOKS = """
import gc, sys
namespace = {}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
read = gc.isenabled()
namespace["pre_fork"](None, None)
frozen = gc.get_freeze_count()
namespace["post_fork"](None, None)
print(read, frozen > 0, gc.isenabled())
"""
# uWSGI's eval loader code run as the master runs it, before it forks: the app is loaded.
RUN_LOADER = """
import gc, sys
sys.path.insert(0, sys.argv[2])
namespace = {}
exec(sys.argv[1], namespace)
print(callable(namespace["application"]), gc.get_freeze_count() > 0, gc.isenabled())
"""


def gunicorns() -> list[ServerAdapter]:
    """gunicorn for WSGI apps and for ASGI apps (the uvicorn worker): both have the levers."""
    return [get_adapter("gunicorn"), adapter_serving("gunicorn", Interface.ASGI)]


def app_of(adapter: ServerAdapter) -> AppRef:
    """The smallest app of the interface `adapter` serves, WSGI where it serves both (the CLI
    finds the interface by importing the app)."""
    interface = Interface.WSGI if Interface.WSGI in adapter.interfaces else Interface.ASGI
    text = "apps/asgi_hello.py" if interface is Interface.ASGI else "apps/hello.py"
    return replace(parse_app(text, cwd=ROOT), interface=interface)


def calls(node: ast.AST) -> set[str]:
    """The `module.function` calls in `node`, as text."""
    return {ast.unparse(call.func) for call in ast.walk(node) if isinstance(call, ast.Call)}


# --- gunicorn ----------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter", gunicorns(), ids=["wsgi", "asgi"])
def test_the_gunicorn_file_carries_the_gc_hooks_with_preload_only(adapter: ServerAdapter) -> None:
    values = {"preload_app": True, "gc_freeze": True}
    text = adapter.render_artifact(app_of(adapter), BIND, values).text
    module = ast.parse(text)
    compile(text, adapter.artifact_filename, "exec")
    hooks = {node.name: node for node in module.body if isinstance(node, ast.FunctionDef)}
    assert [arg.arg for arg in hooks["pre_fork"].args.args] == ["server", "worker"]
    assert [arg.arg for arg in hooks["post_fork"].args.args] == ["server", "worker"]
    assert calls(hooks["pre_fork"]) == {"gc.freeze"}
    assert calls(hooks["post_fork"]) == {"gc.enable"}
    top_level = [node for node in module.body if isinstance(node, ast.Expr)]
    assert {"gc.disable"} <= set().union(*(calls(node) for node in top_level))
    assert "preload_app = True" in text

    for plain in ({"preload_app": True}, {"preload_app": False}, {}):
        text = adapter.render_artifact(app_of(adapter), BIND, plain).text
        assert "gc." not in text and "def pre_fork" not in text, plain
    for refused in (adapter.resolve, lambda v: adapter.render_artifact(app_of(adapter), BIND, v)):
        with pytest.raises(ConfigError, match="gc_freeze=true with preload_app=false"):
            refused({"gc_freeze": True})


def test_the_written_hooks_run_the_gc_recipe(tmp_path: Path) -> None:
    """Off as the file is read (before the master imports the app), every object frozen by
    pre_fork, on again in the worker by post_fork."""
    adapter = get_adapter("gunicorn")
    path = tmp_path / adapter.artifact_filename
    values = {"preload_app": True, "gc_freeze": True, "workers": 3}
    path.write_text(adapter.render_artifact(app_of(adapter), BIND, values).text)
    done = subprocess.run(
        [sys.executable, "-c", RUN_HOOKS, str(path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "True", "True"]


@pytest.mark.parametrize("adapter", gunicorns(), ids=["wsgi", "asgi"])
def test_a_gunicorn_trial_reads_the_hooks_from_its_own_config_file(
    adapter: ServerAdapter, tmp_path: Path
) -> None:
    app = app_of(adapter)
    frozen = adapter.launch(
        app, BIND, adapter.resolve({"preload_app": True, "gc_freeze": True}), tmp_path
    )
    config = frozen.argv[frozen.argv.index("--config") + 1]
    assert Path(config).name in (HOOKS_FILE, WORKER_FILE)
    assert "--preload" in frozen.argv and frozen.argv[-1] == app.spec
    text = frozen.files[config]
    compile(text, config, "exec")
    assert "def pre_fork(server, worker):" in text and "def post_fork(server, worker):" in text
    # The same hooks as the written file's.
    written = adapter.render_artifact(app, BIND, {"preload_app": True, "gc_freeze": True}).text
    assert text.split("# gc_freeze:")[1] in written

    preloaded = adapter.launch(app, BIND, adapter.resolve({"preload_app": True}), tmp_path)
    assert "gc." not in "".join(preloaded.files.values())
    if Interface.WSGI in adapter.interfaces:  # the WSGI trial needs no file without the hooks
        assert "--config" not in preloaded.argv and not preloaded.files


def test_no_draw_of_the_gunicorn_spaces_freezes_without_preload() -> None:
    for adapter in gunicorns():
        space = load_space(space_path(adapter), adapter.table, adapter.name)
        drawn = [suggest(space, SeededTrial(seed), cpus=2) for seed in range(300)]
        assert any(values.get("gc_freeze") for values in drawn)
        assert all(values["preload_app"] for values in drawn if values.get("gc_freeze"))


# --- uWSGI -------------------------------------------------------------------------------------


def test_the_uwsgi_ini_loads_the_app_between_the_gc_recipes_steps() -> None:
    uwsgi = get_adapter("uwsgi")
    app = app_of(uwsgi)
    lines = uwsgi.render_artifact(app, BIND, {"gc-freeze": True, "master": True}).text.splitlines()
    assert not [line for line in lines if line.startswith("module")]
    (code,) = [line.split(" = ", 1)[1] for line in lines if line.startswith("eval = ")]
    steps = [ast.unparse(node) for node in ast.parse(code).body]
    load = f"from {app.module} import {app.callable} as application"
    assert steps == ["import gc", "gc.disable()", load, "gc.freeze()", "gc.enable()"]
    # With the app's own settings, they are set first, in the same loader.
    text = uwsgi.render_artifact(app, BIND, {"gc-freeze": True}, env={"APP_POOL": "4"}).text
    (code,) = [line[len("eval = ") :] for line in text.splitlines() if line.startswith("eval = ")]
    assert "env = APP_POOL=4" in text
    assert code.index("gc.disable()") < code.index("APP_POOL") < code.index(load)

    argv = uwsgi.launch(app, BIND, uwsgi.resolve({"gc-freeze": True}), Path("unused")).argv
    assert "--module" not in argv and argv[argv.index("--eval") + 1] == code.replace(
        "import os; os.environ.update({'APP_POOL': '4'}); ", ""
    )
    plain = uwsgi.launch(app, BIND, uwsgi.resolve({}), Path("unused")).argv
    assert "--eval" not in plain and plain[plain.index("--module") + 1] == app.spec
    assert "eval" not in uwsgi.render_artifact(app, BIND, {}).text


def test_the_uwsgi_loader_leaves_the_app_loaded_frozen_and_the_collector_on() -> None:
    uwsgi = get_adapter("uwsgi")
    app = app_of(uwsgi)
    argv = uwsgi.launch(app, BIND, uwsgi.resolve({"gc-freeze": True}), Path("unused")).argv
    code = argv[argv.index("--eval") + 1]
    done = subprocess.run(
        [sys.executable, "-c", RUN_LOADER, code, app.pythonpath],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["True", "True", "True"]


def test_uwsgi_lazy_apps_is_written_and_refuses_gc_freeze() -> None:
    uwsgi = get_adapter("uwsgi")
    app = app_of(uwsgi)
    assert "lazy-apps = true" in uwsgi.render_artifact(app, BIND, {"lazy-apps": True}).text
    assert (
        "--lazy-apps" in uwsgi.launch(app, BIND, uwsgi.resolve({"lazy-apps": True}), Path("u")).argv
    )
    assert "lazy-apps" not in uwsgi.render_artifact(app, BIND, {}).text
    with pytest.raises(ConfigError, match="gc-freeze=true with lazy-apps=true"):
        uwsgi.resolve({"gc-freeze": True, "lazy-apps": True})


# --- booted ------------------------------------------------------------------------------------

# The app's objects: about 40 MB of small lists (tests/support/apps/gc_freeze_app.py).
OBJECTS_MB = 40
# One worker beside its master: without the freeze, its full collection copies about every
# page of the objects (PSS ~ the whole 40 MB); frozen, they stay shared with the master (PSS
# ~ half). A quarter of the objects' size is the least difference the test accepts.
LEAST_SAVED_MB = OBJECTS_MB / 4
LEVERS = {
    "gunicorn": ({"preload_app": True, "workers": 1}, "gc_freeze"),
    "uwsgi": ({"master": True, "processes": 1}, "gc-freeze"),
}


def worker_after_collections(
    adapter: ServerAdapter, values: dict[str, object], log_path: Path
) -> tuple[str, float]:
    """The worker's gc state ("<freeze count> <enabled>") and its PSS in MB once it has run
    full collections (GET /collect)."""
    with running(adapter, GC_APP, values, log_path=log_path) as server:
        pids = wait_for_pids(server, 2)
        base = f"http://{server.host}:{server.port}"
        for _ in range(3):
            assert httpx.get(f"{base}/collect", timeout=30).status_code == 200
        state = httpx.get(f"{base}/", timeout=10).text
        assert len(pids) == 2, pids  # the master and its one worker
        pss_mb = psutil.Process(pids[1]).memory_full_info().pss / 2**20
    return state, pss_mb


@pytest.mark.parametrize("name", sorted(LEVERS))
def test_gc_freeze_keeps_a_preloaded_apps_pages_shared(
    name: str, real_servers: None, tmp_path: Path
) -> None:
    """The lever as it runs: with it, the worker's objects are frozen, its collector is on,
    and its full collections leave the app's pages shared (a lower PSS than without)."""
    adapter = require_adapter(name)
    base, lever = LEVERS[name]
    plain_state, plain_mb = worker_after_collections(
        adapter, {**base, lever: False}, tmp_path / "plain.log"
    )
    frozen_state, frozen_mb = worker_after_collections(
        adapter, {**base, lever: True}, tmp_path / "frozen.log"
    )
    frozen_count, frozen_on = frozen_state.split()
    assert int(frozen_count) > 100_000 and frozen_on == "1", frozen_state
    assert plain_state.split() == ["0", "1"], plain_state
    assert frozen_mb < plain_mb - LEAST_SAVED_MB, (frozen_mb, plain_mb)
