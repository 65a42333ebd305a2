"""The two streaming sample apps, driven in-process (no server): apps/stream_tokens.py on ASGI
and apps/stream_sse.py on WSGI answer the same server-sent event stream, its events spaced as
their knobs say and closed by the done event, beside a probe and a request lane.

Timings only bound from below what sleeps guarantee (a gap is never shorter than its sleep); a
slow machine makes the gaps longer, never the count of events different, since the count
comes from the stream's seeded plan."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from apps import stream_sse, stream_tokens
from apps.stream_knobs import DONE, Span, StreamKnobs, stream_seed
from tests.apps.drive import Reply, asgi_get, wsgi_get
from tests.conftest import ROOT
from tuner.apps import Interface, check_app_imports, parse_app

SHORT = {"STREAM_SECONDS": "0.2", "TOKEN_MS": "10-20"}
TOKEN_EVENT = re.compile(rb"data: [a-z]+\n\n")
# How much later than planned a stream may run on a slow, busy machine before the test says
# the app sleeps too long (seconds for milliseconds, say).
LATE_S = 2.0


def get(module: ModuleType, app: Any, path: str, query: str = "") -> Reply:
    if module is stream_tokens:
        return asyncio.run(asgi_get(app, path, query))
    return wsgi_get(app, path, query)


APPS = pytest.mark.parametrize("module", [stream_tokens, stream_sse], ids=["asgi", "wsgi"])


@pytest.fixture
def short_streams(monkeypatch: pytest.MonkeyPatch) -> StreamKnobs:
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)
    return StreamKnobs.from_env()


@APPS
def test_a_stream_is_server_sent_events_ending_with_the_done_event(
    module: ModuleType, short_streams: StreamKnobs
) -> None:
    app = module.create_app()  # reads the knobs from the environment, as at import
    reply = get(module, app, "/stream", "seed=3")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert reply.headers["cache-control"] == "no-cache"
    assert reply.headers["x-accel-buffering"] == "no"
    *tokens, (_, last) = reply.chunks
    assert last == DONE
    assert all(TOKEN_EVENT.fullmatch(chunk) for _, chunk in tokens), tokens[:3]
    # 0.2 s of gaps of 10-20 ms: more than 0.2 / 0.02 - 1 tokens, at most 0.2 / 0.01.
    plan = short_streams.plan(3)
    assert 0.2 / 0.020 - 1 < len(tokens) == len(plan) <= 0.2 / 0.010
    assert [chunk for _, chunk in tokens] == [f"data: {t}\n\n".encode() for _, t in plan]
    # Each event comes after its gap, as it is made, not all at once at the end.
    sent = [0.0] + [at for at, _ in tokens]
    gaps = [later - earlier for earlier, later in zip(sent, sent[1:], strict=False)]
    for gap, (planned_s, _) in zip(gaps, plan, strict=True):
        assert gap >= planned_s - 0.001, (gaps, plan)
    planned_total_s = sum(gap for gap, _ in plan)
    assert 0.2 - 0.020 < planned_total_s <= 0.2
    assert planned_total_s - 0.001 <= reply.chunks[-1][0] < planned_total_s + LATE_S


@APPS
def test_streams_without_a_seed_differ_and_a_seed_repeats_one(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAM_SECONDS", "0.05-0.15")
    monkeypatch.setenv("TOKEN_MS", "2-5")
    app = module.create_app()
    unseeded = [get(module, app, "/stream").body for _ in range(3)]
    assert len(set(unseeded)) == 3
    assert (
        get(module, app, "/stream", "seed=11").body == get(module, app, "/stream", "seed=11").body
    )


@APPS
def test_the_probe_and_the_request_lane_answer(module: ModuleType) -> None:
    app = module.create_app({})
    probe = get(module, app, "/healthz")
    assert (probe.status, probe.body) == (200, b"ok")
    request = get(module, app, "/")
    assert request.status == 200
    assert request.headers["content-type"].startswith("application/json")
    assert json.loads(request.body)["status"] == "ok"
    assert get(module, app, "/nothing-here").status == 404


def test_the_default_streams_last_two_to_ten_seconds_in_gaps_of_20_to_50_ms() -> None:
    knobs = StreamKnobs.from_env({})
    assert knobs == StreamKnobs(seconds=Span(2.0, 10.0), token_ms=Span(20.0, 50.0))
    plans = [knobs.plan(seed) for seed in range(40)]
    lengths = [sum(gap for gap, _ in plan) for plan in plans]
    assert all(2.0 - 0.050 < length <= 10.0 for length in lengths)
    assert max(lengths) - min(lengths) > 4.0  # they vary over the range
    gaps = [gap for plan in plans for gap, _ in plan]
    assert min(gaps) >= 0.020 and max(gaps) <= 0.050
    assert knobs.plan(7) == knobs.plan(7)


def test_a_stream_takes_the_seed_it_asks_for_else_the_next_number() -> None:
    assert stream_seed("42") == 42
    first, second = stream_seed(None), stream_seed("not-a-number")
    assert second == first + 1


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"STREAM_SECONDS": "1.5"}, StreamKnobs(Span(1.5, 1.5), Span(20.0, 50.0))),
        ({"STREAM_SECONDS": " 0 ", "TOKEN_MS": "5"}, StreamKnobs(Span(0.0, 0.0), Span(5.0, 5.0))),
        ({"STREAM_SECONDS": "", "TOKEN_MS": "1-2.5"}, StreamKnobs(Span(2.0, 10.0), Span(1.0, 2.5))),
    ],
)
def test_a_knob_is_a_number_or_a_range(environ: dict[str, str], expected: StreamKnobs) -> None:
    assert StreamKnobs.from_env(environ) == expected


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"STREAM_SECONDS": "long"}, "STREAM_SECONDS='long'"),
        ({"STREAM_SECONDS": "10-2"}, "STREAM_SECONDS='10-2'"),
        ({"STREAM_SECONDS": "inf"}, "STREAM_SECONDS='inf'"),
        ({"TOKEN_MS": "0"}, "TOKEN_MS='0'"),  # a stream of zero gaps would never end
        ({"TOKEN_MS": "-5"}, "TOKEN_MS='-5'"),
    ],
)
def test_a_bad_knob_stops_the_import_with_one_line(environ: dict[str, str], words: str) -> None:
    factories: list[Callable[..., object]] = [stream_tokens.create_app, stream_sse.create_app]
    for create_app in factories:
        with pytest.raises(SystemExit) as caught:
            create_app(environ)
        message = str(caught.value)
        assert words in message and "LOW-HIGH" in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "interface"),
    [
        ("apps.stream_tokens:app", Interface.ASGI),
        ("apps/stream_tokens.py", Interface.ASGI),
        ("apps.stream_sse:app", Interface.WSGI),
        ("apps/stream_sse.py", Interface.WSGI),
    ],
)
def test_both_import_by_either_name(text: str, interface: Interface) -> None:
    assert check_app_imports(parse_app(text, cwd=ROOT)).interface is interface
