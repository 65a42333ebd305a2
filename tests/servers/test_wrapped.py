"""A wrapper (tuner/servers/wrapped.py) asks the wrapped adapter every method and attribute of
the contract, with the wrapper's own settings taken out of each config it hands on; nothing
is forwarded by hand, so a method the contract gains is asked of the wrapped adapter too.
Pure logic: the wrapped adapter's methods are replaced by recorders, nothing starts."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.servers.wsgiref_adapter import WsgirefAdapter
from tuner.apps import AppRef
from tuner.servers.base import DIRECT, ArtifactRequest, ServerAdapter
from tuner.servers.setting_builders import INT, unrendered
from tuner.servers.wrapped import WrappedAdapter, contract_attributes, contract_methods
from tuner.settings import SettingsTable, Value

EXTRA = unrendered("EXTRA", INT, 0, "a setting only the wrapper knows")
CONFIG: dict[str, Value] = {"threads": 3, "EXTRA": 7}
APP = AppRef("hello", "app", "/srv/app")


class WithExtra(WrappedAdapter):
    """The smallest wrapper: one setting of its own, nothing else changed."""

    def __init__(self, inner: ServerAdapter) -> None:
        super().__init__(inner, SettingsTable("wsgiref", (*inner.table.settings, EXTRA)))

    def inner_values(self, values: Mapping[str, Value]) -> dict[str, Value]:
        return {name: value for name, value in values.items() if name != EXTRA.name}


class Recorded:
    """What a recorder was asked, and what it answered."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, inspect.BoundArguments]] = []

    def recorder(self, name: str) -> Any:
        signature = inspect.signature(getattr(ServerAdapter, name))

        def record(*args: Any, **kwargs: Any) -> object:
            self.calls.append((name, signature.bind(None, *args, **kwargs)))
            return (name, "answer")

        return record


def arguments(name: str) -> tuple[list[object], dict[str, object]]:
    """Arguments for the contract's method `name`: the config where it takes one, a file's
    request holding it where it takes that, and a distinct object for everything else."""
    args: list[object] = []
    kwargs: dict[str, object] = {}
    parameters = list(inspect.signature(getattr(ServerAdapter, name)).parameters.values())
    for parameter in parameters[1:]:
        if parameter.name == "values":
            value: object = dict(CONFIG)
        elif parameter.name == "request":
            value = ArtifactRequest(APP, DIRECT, dict(CONFIG))
        elif parameter.kind is parameter.VAR_POSITIONAL:
            args += ["--version"]
            continue
        else:
            value = (name, parameter.name)
        if parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = value
        else:
            args.append(value)
    return args, kwargs


# Every method but `serving`, which a wrapper answers itself: it confirms the one interface
# the wrapped adapter was set up for (test_dual_interfaces.py).
ASKED = tuple(name for name in contract_methods() if name != "serving")


@pytest.mark.parametrize("name", ASKED)
def test_each_method_is_asked_of_the_wrapped_adapter_with_its_own_config(name: str) -> None:
    inner = WsgirefAdapter()
    recorded = Recorded()
    setattr(inner, name, recorded.recorder(name))
    wrapper = WithExtra(inner)
    args, kwargs = arguments(name)
    assert getattr(wrapper, name)(*args, **kwargs) == (name, "answer")
    ((asked, bound),) = recorded.calls
    assert asked == name
    for parameter, given in bound.arguments.items():
        if parameter == "values":
            assert given == {"threads": 3}, name
        elif parameter == "request":
            assert given.values == {"threads": 3} and given.app is APP, name
        elif parameter not in ("self", "args"):
            assert given == (name, parameter), (name, parameter)


@pytest.mark.parametrize("name", contract_attributes())
def test_each_attribute_is_the_wrapped_adapters(name: str) -> None:
    inner = WsgirefAdapter()
    wrapper = WithExtra(inner)
    if name == "table":  # the wrapper's own: the inner table plus its settings
        assert wrapper.table.settings == (*inner.table.settings, EXTRA)
    else:
        assert getattr(wrapper, name) is getattr(inner, name)


def test_the_final_operations_are_the_bases_and_check_the_bind_once(tmp_path: Path) -> None:
    """`launch` and the like stay the base's own, so the bind is checked by the wrapper and
    the wrapped adapter's hook runs with its own config."""
    finals = {"launch", "render_artifact", "artifact_launch", "render_sized", "sized_launch"}
    assert finals.isdisjoint(contract_methods())
    inner = WsgirefAdapter()
    wrapper = WithExtra(inner)
    for name in finals:
        assert getattr(type(wrapper), name) is getattr(ServerAdapter, name), name
    spec = wrapper.launch(APP, DIRECT, wrapper.resolve(CONFIG), tmp_path)
    (launcher,) = spec.files.values()
    assert "THREADS = 3" in launcher and "EXTRA" not in launcher
