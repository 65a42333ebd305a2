"""The search space behind a front: the server's params, then the front's (front-nginx.toml)."""

from __future__ import annotations

from dataclasses import replace

from tuner.front.config import KEEP_CONN, PROTOCOL, front_table
from tuner.front.fronted import FrontedAdapter
from tuner.search.space import Param, SearchSpace, default_space_path, load_space
from tuner.servers.base import Protocol, ServerAdapter
from tuner.settings import SettingsTable


def with_front_space(
    adapter: ServerAdapter, space: SearchSpace
) -> tuple[ServerAdapter, SearchSpace]:
    """`space` extended with what the front opens, if `adapter` is measured behind one: the
    front's file is checked against every choice a front knows, then narrowed to what this
    server can be bound as (a param left with one choice, or about a protocol the server does
    not speak, is not searched)."""
    if not isinstance(adapter, FrontedAdapter):
        return adapter, space
    name = adapter.front_name
    front_space = load_space(
        default_space_path(f"front-{name}"), SettingsTable(name, front_table()), name
    )
    params: list[Param] = []
    for param in front_space.params:
        if param.setting not in adapter.table.by_name:
            continue  # fastcgi_keep_conn for a server that speaks no FastCGI
        setting = adapter.table.get(param.setting)
        choices = tuple(c for c in param.choices if param.type == "bool" or c in setting.choices)
        if len(choices) > 1:
            params.append(replace(param, choices=choices))
    # The front's params come first, so that a server setting that only means something
    # over HTTP (the server's `http_only_settings`) is drawn only when HTTP was.
    protocol = next((p for p in params if p.setting == PROTOCOL), None)
    if protocol is not None:  # kept connections are FastCGI's: not drawn for another protocol
        params = [
            replace(p, when={**p.when, protocol.name: (Protocol.FASTCGI.value,)})
            if p.setting == KEEP_CONN
            else p
            for p in params
        ]
    server_params = [
        replace(p, when={**p.when, protocol.name: (Protocol.HTTP.value,)})
        if protocol is not None and p.setting in adapter.inner.http_only_settings
        else p
        for p in space.params
    ]
    combined = SearchSpace(
        server=space.server,
        params=(*params, *server_params),
        source=f"{space.source} + {front_space.source}",
        table=adapter.table,
    )
    return adapter, combined
