"""The servers the tuner can run, by name; adapters are imported only when asked for.

A server is one line below. Servers from elsewhere plug in the same way without a change
here: a package declares an entry point in the `tuner.servers` group (`name =
"module:Class"`), or `TUNER_SERVERS="name=module:Class,..."` names importable classes (how the
test suite adds its minimal adapter).
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from importlib.metadata import entry_points

from tuner.apps import Interface
from tuner.errors import ConfigError
from tuner.servers.base import LaunchSpec, ServerAdapter

# name -> "module:class", so `tuner --help` does not import every adapter.
_BUILT_IN = {
    "gunicorn": "tuner.servers.gunicorn:GunicornAdapter",
    "uwsgi": "tuner.servers.uwsgi:UwsgiAdapter",
    "waitress": "tuner.servers.waitress:WaitressAdapter",
    "cheroot": "tuner.servers.cheroot:CherootAdapter",
    "twisted": "tuner.servers.twisted:TwistedAdapter",
    "werkzeug": "tuner.servers.werkzeug:WerkzeugAdapter",
    "granian": "tuner.servers.granian:GranianAdapter",
    "bjoern": "tuner.servers.bjoern:BjoernAdapter",
    "mod_wsgi": "tuner.servers.mod_wsgi:ModWsgiAdapter",
    "flup": "tuner.servers.flup:FlupAdapter",
    "tornado": "tuner.servers.tornado:TornadoAdapter",
    "uvicorn": "tuner.servers.uvicorn:UvicornAdapter",
    "hypercorn": "tuner.servers.hypercorn:HypercornAdapter",
    "daphne": "tuner.servers.daphne:DaphneAdapter",
}
# Servers the shoot-outs name that cannot run here, and why: `--server NAME` says so.
_REFUSED = {
    "meinheld": "meinheld cannot be installed on Python 3.11: `pip install meinheld` fails "
    "because its last release (1.0.2, 2020; unmaintained since) requires greenlet<0.5, whose "
    "C code does not compile against Python 3.11",
    "fapws3": "fapws3 cannot be installed on Python 3: `pip install fapws3` fails because "
    "its last release (0.11.dev, 2012; none since) is Python 2 code (its setup.py uses the "
    "print statement)",
    "cogen": "cogen cannot be installed on Python 3: `pip install cogen` fails because its last "
    "release (0.2.1, 2009; none since) is Python 2 code (its setup.py calls file())",
    "spawning": "spawning cannot be installed on Python 3: `pip install spawning` fails because "
    "its last release (0.9.7, 2011; none since) is Python 2 code (its setup.py calls file())",
}
ENTRY_POINT_GROUP = "tuner.servers"
ENV_VAR = "TUNER_SERVERS"
SERVERS: tuple[str, ...] = tuple(_BUILT_IN)

__all__ = [
    "SERVERS",
    "LaunchSpec",
    "ServerAdapter",
    "adapter_serving",
    "get_adapter",
    "server_names",
    "servers_serving",
]


def _from_env() -> dict[str, str]:
    found: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in os.environ.get(ENV_VAR, "").split(","))):
        name, sep, target = item.partition("=")
        if not sep or ":" not in target:
            raise ConfigError(f"{ENV_VAR} item {item!r}: expected name=module:Class")
        found[name.strip().lower()] = target.strip()
    return found


def _registry() -> dict[str, str]:
    # Keyed by TUNER_SERVERS as it is now: a registry cached at the first call would miss an
    # adapter that joins later in the same process (the tests' wsgiref adapter, set by their
    # conftest after another module had listed the servers, silently left the contract suite).
    return _registry_for(os.environ.get(ENV_VAR, ""))


@cache
def _registry_for(env: str) -> dict[str, str]:
    plugins = {ep.name.lower(): ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**_BUILT_IN, **plugins, **_from_env()}


def server_names() -> tuple[str, ...]:
    """Every server name: built in, from entry points, and from TUNER_SERVERS."""
    return tuple(_registry())


def get_adapter(name: str) -> ServerAdapter:
    registry = _registry()
    try:
        target = registry[name.strip().lower()]
    except KeyError:
        if name.strip().lower() in _REFUSED:
            raise ConfigError(_REFUSED[name.strip().lower()]) from None
        valid = ", ".join(registry)
        raise ConfigError(f"unknown server {name!r}; valid servers: {valid}") from None
    module_name, _, class_name = target.partition(":")
    try:
        adapter_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"server {name!r}: cannot load its adapter {target}: {exc}") from None
    adapter = adapter_class()
    if not isinstance(adapter, ServerAdapter):
        raise ConfigError(f"server {name!r}: {target} is not a ServerAdapter")
    return adapter


def servers_serving(interface: Interface) -> tuple[str, ...]:
    """Every registered server whose adapter can serve apps of `interface` (installed here or
    not: what the user could run), in registry order."""
    names = []
    for name in server_names():
        try:
            if interface in get_adapter(name).interfaces:
                names.append(name)
        except ConfigError:  # a plugin whose adapter does not load: it serves nothing here
            continue
    return tuple(names)


def adapter_serving(name: str, interface: Interface) -> ServerAdapter:
    """The adapter of `name` set up for apps of `interface`; a server that cannot serve it is
    refused in one line naming the servers that can."""
    adapter = get_adapter(name)
    if interface not in adapter.interfaces:
        able = ", ".join(servers_serving(interface)) or "none registered"
        raise ConfigError(
            f"--server {name}: {adapter.name} cannot serve {interface.describe()}; "
            f"servers that can: {able}"
        )
    return adapter.serving(interface)
