"""The server registry follows TUNER_SERVERS as it is when asked: pure logic."""

from __future__ import annotations

import pytest

from tuner.errors import ConfigError
from tuner.servers import ENV_VAR, get_adapter, server_names

PLUGIN = "wsgiref=tests.servers.wsgiref_adapter:WsgirefAdapter"


def test_an_adapter_joining_after_the_first_listing_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert "wsgiref" not in server_names()  # listed (and cached) without it first
    monkeypatch.setenv(ENV_VAR, PLUGIN)
    assert "wsgiref" in server_names()
    assert get_adapter("wsgiref").name == "wsgiref"
    monkeypatch.delenv(ENV_VAR)
    with pytest.raises(ConfigError, match="unknown server 'wsgiref'"):
        get_adapter("wsgiref")
