"""The adapter contract in parts (tuner/servers/part_*.py) and the builders every adapter
declares its settings with (tuner/servers/setting_builders.py). Pure logic: nothing starts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.servers.miniasgi_adapter import MiniAsgiAdapter
from tests.servers.wsgiref_adapter import WsgirefAdapter
from tuner.errors import ConfigError
from tuner.servers.base import ServerAdapter
from tuner.servers.setting_builders import BOOL, CHOICE, FLOAT, INT, SettingStyle, unrendered
from tuner.servers.wrapped import contract_attributes, contract_methods
from tuner.settings import Setting, SettingKind

# What every server must write: the hooks without a default and the attributes without one.
REQUIRED_HOOKS = {"_launch", "_render_artifact", "_artifact_launch", "version", "concurrency_model"}
REQUIRED_ATTRIBUTES = {
    "name",
    "table",
    "binary",
    "install_hint",
    "process_model",
    "artifact_filename",
}


@pytest.mark.parametrize(
    ("adapter_class", "differs"),
    [
        # A launcher run by this very Python, not by a `python3` found on PATH.
        (WsgirefAdapter, {"executable"}),
        # The same, and a hand grid of its own: it has no processes nor threads to count.
        (MiniAsgiAdapter, {"executable", "hand_grid"}),
    ],
)
def test_a_new_server_writes_only_the_required_parts_and_what_differs(
    adapter_class: type[ServerAdapter], differs: set[str]
) -> None:
    assert ServerAdapter.__abstractmethods__ == REQUIRED_HOOKS
    defaulted = {name for name in contract_attributes() if hasattr(ServerAdapter, name)}
    assert set(contract_attributes()) - defaulted == REQUIRED_ATTRIBUTES
    finals = {"launch", "render_artifact", "artifact_launch", "render_sized", "sized_launch"}
    contract = set(contract_methods()) | finals
    written = {name for name in vars(adapter_class) if name in contract}
    assert written == REQUIRED_HOOKS | differs
    declared = {name for name in vars(adapter_class) if name in contract_attributes()}
    assert declared >= REQUIRED_ATTRIBUTES
    adapter_class()  # nothing required is left out


def test_a_value_is_written_in_its_servers_style() -> None:
    gunicorn = SettingStyle(text=repr)
    workers = gunicorn.value("workers", INT, 1, "worker processes", minimum=1)
    assert workers.argv(3) == ["--workers", "3"] and workers.config(3) == [("workers", "3")]
    keepalive = gunicorn.value("keepalive", INT, 2, "seconds", flag="--keep-alive")
    assert keepalive.argv(5) == ["--keep-alive", "5"]
    choice = gunicorn.value("worker_class", CHOICE, "sync", "x", choices=("sync", "gthread"))
    assert choice.config("gthread") == [("worker_class", "'gthread'")]

    waitress = SettingStyle(joined=True).value("recv_bytes", INT, 8192, "bytes", minimum=1)
    assert waitress.argv(4096) == ["--recv-bytes=4096"]

    granian = SettingStyle(key_of=lambda name: "GRANIAN_" + name.upper())
    backpressure = granian.value("backpressure", INT, 0, "x", minimum=0, unset=0)
    assert backpressure.argv(0) == [] and backpressure.config(0) == []
    assert backpressure.argv(8) == ["--backpressure", "8"]
    assert backpressure.config(8) == [("GRANIAN_BACKPRESSURE", "8")]

    python = SettingStyle(key_of=str.upper, text=repr, command_line=False)
    interval = python.value("expiration_interval", FLOAT, 0.5, "seconds", minimum=0.01)
    assert interval.argv(1.5) == [] and interval.config(1.5) == [("EXPIRATION_INTERVAL", "1.5")]


def test_switches_and_flags_are_written_both_ways_or_only_when_on() -> None:
    switch = SettingStyle().switch("date_header", True, "send a date header")
    assert switch.argv(True) == ["--date-header"] and switch.argv(False) == ["--no-date-header"]
    assert switch.config(False) == [("date_header", "false")]
    assert switch.kind is SettingKind.BOOL

    uwsgi = SettingStyle().flag("thunder-lock", False, "x", written_off=False)
    assert uwsgi.argv(True) == ["--thunder-lock"] and uwsgi.argv(False) == []
    assert uwsgi.config(True) == [("thunder-lock", "true")] and uwsgi.config(False) == []

    gunicorn = SettingStyle(truth=lambda value: repr(bool(value)))
    preload = gunicorn.flag("preload_app", False, "x", flag="--preload")
    assert preload.argv(True) == ["--preload"] and preload.config(False) == [
        ("preload_app", "False")
    ]


def test_unrendered_settings_render_nowhere_and_still_check_their_values() -> None:
    setting = unrendered("loop", CHOICE, "auto", "the loop", choices=("auto", "uvloop"))
    assert setting.argv("uvloop") == [] and setting.config("uvloop") == []
    with pytest.raises(ConfigError, match="expected one of auto, uvloop"):
        setting.coerce("trio")
    bounded = unrendered("backlog", INT, 5, "queue", minimum=1, maximum=65535)
    with pytest.raises(ConfigError, match="<= 65535"):
        bounded.coerce(70000)


def test_a_kind_read_as_text_becomes_typed_and_a_wrong_one_is_refused() -> None:
    read: list[Any] = ["bool", "long"]  # as a file gives them
    setting = Setting("accesslog", read[0], False, "x")
    assert setting.kind is BOOL and setting.kind == "bool" and str(setting.kind) == "bool"
    with pytest.raises(ValueError, match="'long'"):
        Setting("pool", read[1], 1, "x")
