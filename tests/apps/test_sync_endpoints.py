"""apps/sync_endpoints.py, driven in-process (no server): its sync endpoints wait for a token of
anyio's thread limiter, whose size the app setting THREAD_LIMIT sets at startup, while its
async /healthz needs none; and apps/sync_endpoints.tuner.toml loads with the tuner's own
loader into a search the tuner can draw from.

Timings only bound from below what sleeps guarantee: two calls that share one token take at
least two blocks, however slow the machine."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import anyio.to_thread
import pytest

from apps import sync_endpoints
from tests.apps.drive import Reply, asgi_get, lifespan
from tests.conftest import ROOT
from tuner.apps import Interface, check_app_imports, parse_app
from tuner.appsettings import load_app_settings, settings_path
from tuner.commands.setup import with_app_params
from tuner.search.space import default_space_path, load_space
from tuner.servers.appenv import WithAppSettings, adapter_for_app
from tuner.servers.base import Bind

SETTINGS = ROOT / "apps" / "sync_endpoints.tuner.toml"


async def anyio_default_tokens() -> float:
    return anyio.to_thread.current_default_thread_limiter().total_tokens


async def tokens_after_startup(environ: dict[str, str]) -> float:
    async with lifespan(sync_endpoints.create_app(environ)):
        return await anyio_default_tokens()


def test_thread_limit_sets_the_limiter_at_startup() -> None:
    assert asyncio.run(tokens_after_startup({"THREAD_LIMIT": "7"})) == 7
    # Unset, the app leaves anyio's default, the default its settings file declares.
    default = asyncio.run(anyio_default_tokens())
    assert asyncio.run(tokens_after_startup({})) == default == 40
    (declared,) = load_app_settings(SETTINGS).settings
    assert declared.default == default


async def finish_times(app: object, paths: list[str]) -> list[tuple[float, Reply]]:
    """GET every path at once; each reply with the seconds it took from the start."""
    started = time.perf_counter()

    async def timed(path: str) -> tuple[float, Reply]:
        reply = await asgi_get(app, path)
        return time.perf_counter() - started, reply

    async with lifespan(app):
        return await asyncio.gather(*(timed(path) for path in paths))


def test_sync_endpoints_share_the_limiters_tokens_and_the_probe_needs_none() -> None:
    block_s = 0.2
    app = sync_endpoints.create_app({"THREAD_LIMIT": "1", "BLOCK_MS": str(block_s * 1000)})
    (index_s, index), (item_s, item), (probe_s, probe) = asyncio.run(
        finish_times(app, ["/", "/items/3", "/healthz"])
    )
    assert (index.status, item.status, probe.status) == (200, 200, 200)
    assert json.loads(index.body) == {"status": "ok"}
    assert json.loads(item.body) == {"id": 3, "name": "item"}
    assert probe.body == b"ok"
    # One token: the second blocking call waited for the first to end.
    assert max(index_s, item_s) >= 2 * block_s
    # The probe, async, answered while the first call still held the token.
    assert probe_s < min(index_s, item_s)


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"THREAD_LIMIT": "0"}, "THREAD_LIMIT='0': expected a whole number above 0"),
        ({"THREAD_LIMIT": "7.5"}, "THREAD_LIMIT='7.5': expected a whole number above 0"),
        ({"BLOCK_MS": "soon"}, "BLOCK_MS='soon': expected a number above 0"),
        ({"BLOCK_MS": "nan"}, "BLOCK_MS='nan': expected a number above 0"),
    ],
)
def test_a_bad_value_stops_the_import_with_one_line(environ: dict[str, str], words: str) -> None:
    with pytest.raises(SystemExit, match=words) as caught:
        sync_endpoints.create_app(environ)
    assert str(caught.value).startswith("apps/sync_endpoints.py: ")


def test_the_thread_limit_is_an_app_setting_the_tuner_searches(tmp_path: Path) -> None:
    app = check_app_imports(parse_app("apps/sync_endpoints.py", cwd=ROOT))
    assert app.interface is Interface.ASGI
    assert settings_path(parse_app("apps.sync_endpoints:app", cwd=ROOT), None) == SETTINGS
    declared = load_app_settings(SETTINGS)
    assert declared.names() == ("THREAD_LIMIT",)
    (setting,) = declared.settings
    assert (setting.default, setting.minimum) == (40, 1)
    search = declared.search["THREAD_LIMIT"]
    assert (search["low"], search["high"], search["log"]) == (4, 200, True)
    assert not (declared.per_process or declared.refused or declared.exhausted)

    # On an ASGI server the study searches it with the server's settings, and each trial's
    # server process gets it in its environment.
    adapter = adapter_for_app("uvicorn", app, None)
    assert isinstance(adapter, WithAppSettings)
    space = with_app_params(
        adapter, load_space(default_space_path("uvicorn"), adapter.table, "uvicorn")
    )
    assert space.names()[-1] == "THREAD_LIMIT"
    assert space.params[-1].type == "int"  # from the setting's kind
    resolved = adapter.resolve({"THREAD_LIMIT": "7"})
    assert resolved["THREAD_LIMIT"] == 7
    spec = adapter.launch(app, Bind.tcp("127.0.0.1", 8000), resolved, tmp_path)
    assert spec.env["THREAD_LIMIT"] == "7"
    assert adapter.resolve({})["THREAD_LIMIT"] == 40
