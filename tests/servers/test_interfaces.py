"""Which app interfaces each adapter serves, and the refusal of the others before anything
starts (pure: no server runs here; the contract suite boots each interface for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.apps import AppRef, Interface
from tuner.errors import ConfigError
from tuner.servers import adapter_serving, get_adapter, server_names, servers_serving
from tuner.servers.base import Bind

NAMES = server_names()


@pytest.mark.parametrize("name", NAMES)
def test_each_interface_an_adapter_serves_sets_it_up_for_that_one_alone(name: str) -> None:
    adapter = get_adapter(name)
    assert adapter.interfaces, f"{name} declares no interface"
    for interface in adapter.interfaces:
        serving = adapter.serving(interface)
        assert serving.interfaces == frozenset({interface})
        assert serving.name == adapter.name
    for interface in set(Interface) - adapter.interfaces:
        with pytest.raises(ConfigError, match=f"{adapter.name} cannot serve"):
            adapter.serving(interface)


@pytest.mark.parametrize("name", NAMES)
def test_an_app_of_another_interface_is_refused_before_any_launch(
    name: str, tmp_path: Path
) -> None:
    adapter = get_adapter(name)
    for interface in adapter.interfaces:
        serving = adapter.serving(interface)
        other = next(iter(set(Interface) - {interface}))
        app = AppRef("candidate", "app", str(tmp_path), other)
        bind = Bind.tcp("127.0.0.1", 1)
        if bind.kind not in serving.binds:
            continue  # a front-only server: its bind is refused first, which is tested elsewhere
        with pytest.raises(ConfigError, match=f"{other.describe()}"):
            serving.launch(app, bind, serving.resolve({}), tmp_path)
        with pytest.raises(ConfigError, match=f"{other.describe()}"):
            serving.render_artifact(app, bind, serving.resolve({}))
        assert not any(tmp_path.iterdir()), "nothing is written for a refused app"


@pytest.mark.parametrize("interface", list(Interface))
def test_a_server_that_cannot_serve_the_app_names_those_that_can(interface: Interface) -> None:
    able = servers_serving(interface)
    for name in NAMES:
        if name in able:
            assert adapter_serving(name, interface).interfaces == frozenset({interface})
            continue
        with pytest.raises(ConfigError) as caught:
            adapter_serving(name, interface)
        message = str(caught.value)
        assert message.startswith(f"--server {name}: ")
        assert f"servers that can: {', '.join(able) or 'none registered'}" in message
        assert "\n" not in message
