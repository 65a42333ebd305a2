"""An adapter around another one: every question of the contract goes to the wrapped adapter.

Two wrappers add settings of their own to a server's table: the app's environment variables
(`tuner.servers.appenv`) and a front's settings (`tuner.front.fronted`). Each sees a config
with its own settings in it, and the wrapped adapter must not: `inner_values` takes them out.

No method is forwarded by hand. `WrappedAdapter` asks the wrapped adapter every method and
attribute the contract's parts declare (tuner/servers/part_*.py), derived from them: the
argument named `values` (a config) goes through `inner_values`, the one named `request` (a
file's) through `inner_request`, the rest as given. A method the contract gains is asked of
the wrapped adapter at once, so no wrapper can fall back to a part's default and silently
ignore the wrapped adapter's own (its baselines, its process model, its launcher). A wrapper
writes only what it changes. The bind is checked once, by the wrapper's own `launch`,
`render_artifact` or `artifact_launch` (`check_bind` asks the wrapped adapter): those final
operations are the parts' own, and their hooks go to the wrapped adapter's hooks.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeVar

from tuner.apps import Interface
from tuner.errors import ConfigError
from tuner.servers.base import ArtifactRequest, IdentityPart, ServerAdapter
from tuner.settings import SettingsTable, Value

# A file's request, plain or sized: a wrapper hands on the kind it was given.
Request = TypeVar("Request", bound=ArtifactRequest)
Wrapper = TypeVar("Wrapper", bound=type[ServerAdapter])
# Held by a wrapper itself, not asked of the wrapped adapter.
OWN_ATTRIBUTES = frozenset({"table"})


def _parts() -> list[type[IdentityPart]]:
    """`ServerAdapter` and the parts it is made of (tuner/servers/part_*.py)."""
    return [part for part in ServerAdapter.__mro__ if issubclass(part, IdentityPart)]


def contract_methods() -> tuple[str, ...]:
    """The methods a wrapper asks of the wrapped adapter: every one the contract's parts
    define, except the final operations (`launch` and the like, whose hook `_launch` is asked
    instead), which check the bind before their hook runs."""
    defined = {
        name
        for part in _parts()
        for name, member in vars(part).items()
        if inspect.isfunction(member) and not name.startswith("__")
    }
    final = {name for name in defined if f"_{name}" in defined}
    return tuple(sorted(defined - final))


def contract_attributes() -> tuple[str, ...]:
    """The class attributes the contract's parts declare (name, binary, process model, ...)."""
    declared = {name for part in _parts() for name in vars(part).get("__annotations__", {})}
    return tuple(sorted(declared))


def _asked_of_inner(name: str) -> Any:
    """The contract's method `name`, asked of the wrapped adapter with the config split."""
    signature = inspect.signature(getattr(ServerAdapter, name))

    def ask(self: WrappedAdapter, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        if "values" in bound.arguments:
            bound.arguments["values"] = self.inner_values(bound.arguments["values"])
        if "request" in bound.arguments:
            bound.arguments["request"] = self.inner_request(bound.arguments["request"])
        return getattr(self.inner, name)(*bound.args[1:], **bound.kwargs)

    ask.__name__ = name
    ask.__qualname__ = f"WrappedAdapter.{name}"
    ask.__doc__ = f"The wrapped adapter's `{name}`, with its own part of the config."
    return ask


def _inner_attribute(name: str) -> property:
    return property(lambda self: getattr(self.inner, name), doc=f"The wrapped adapter's {name}.")


def _asking_inner(cls: Wrapper) -> Wrapper:
    """`cls` with each method and attribute of the contract it does not define itself asked
    of the wrapped adapter."""
    for name in contract_methods():
        if name not in vars(cls):
            setattr(cls, name, _asked_of_inner(name))
    for name in contract_attributes():
        if name not in vars(cls) and name not in OWN_ATTRIBUTES:
            setattr(cls, name, _inner_attribute(name))
    abc.update_abstractmethods(cls)
    return cls


@_asking_inner
class WrappedAdapter(ServerAdapter):
    """`inner` with the settings table `table` (the inner one plus the wrapper's settings)."""

    # The hooks every adapter must write, named here too so that a type checker sees them
    # written: asked of the wrapped adapter as every other method is.
    _launch = _asked_of_inner("_launch")
    _render_artifact = _asked_of_inner("_render_artifact")
    _artifact_launch = _asked_of_inner("_artifact_launch")
    version = _asked_of_inner("version")
    concurrency_model = _asked_of_inner("concurrency_model")

    def __init__(self, inner: ServerAdapter, table: SettingsTable) -> None:
        self.inner = inner
        self.table = table

    def inner_values(self, values: Mapping[str, Value]) -> dict[str, Value]:
        """The part of a config the wrapped adapter knows: all of it, unless a wrapper adds
        settings of its own."""
        return dict(values)

    def inner_request(self, request: Request) -> Request:
        """`request` with the part of its config the wrapped adapter knows."""
        return replace(request, values=self.inner_values(request.values))

    def serving(self, interface: Interface) -> ServerAdapter:
        # A wrapper wraps an adapter already set up for one interface (adapter_for_app):
        # it can only confirm that one.
        if self.inner.serving(interface) is not self.inner:
            raise ConfigError(f"{self.name}: set up the interface before wrapping the adapter")
        return self
