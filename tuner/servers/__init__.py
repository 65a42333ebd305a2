"""The WSGI servers the tuner can run, by name; adapters are imported only when asked for."""

from __future__ import annotations

import importlib

from tuner.errors import ConfigError
from tuner.servers.base import LaunchSpec, ServerAdapter

# name -> "module:class", so `tuner --help` does not import every adapter.
_REGISTRY = {
    "gunicorn": "tuner.servers.gunicorn:GunicornAdapter",
    "uwsgi": "tuner.servers.uwsgi:UwsgiAdapter",
}
SERVERS: tuple[str, ...] = tuple(_REGISTRY)

__all__ = ["SERVERS", "LaunchSpec", "ServerAdapter", "get_adapter"]


def get_adapter(name: str) -> ServerAdapter:
    try:
        target = _REGISTRY[name.strip().lower()]
    except KeyError:
        raise ConfigError(f"unknown server {name!r}; valid servers: {', '.join(SERVERS)}") from None
    module_name, class_name = target.split(":")
    adapter_class = getattr(importlib.import_module(module_name), class_name)
    return adapter_class()
