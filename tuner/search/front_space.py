"""The search space behind a front: the server's params, then the front's (front-nginx.toml)."""

from __future__ import annotations

from dataclasses import replace

from tuner.front.config import PROTOCOL, front_table
from tuner.front.fronted import FrontedAdapter
from tuner.search.space import Param, SearchSpace, default_space_path, load_space, settled
from tuner.servers.base import Protocol, ServerAdapter
from tuner.settings import SettingKind, SettingsTable


def with_front_space(
    adapter: ServerAdapter, space: SearchSpace
) -> tuple[ServerAdapter, SearchSpace]:
    """`space` extended with what the front opens, if `adapter` is measured behind one: the
    front's file is checked against every choice a front knows, then narrowed to what this
    server can be bound as (a param left with one choice, or about a protocol the server does
    not speak, is not searched), and the file's conditions on what is not searched are
    settled (`_settled`)."""
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
        choices = tuple(
            c
            for c in param.choices
            if setting.kind is not SettingKind.CHOICE or c in setting.choices
        )
        if param.type not in ("categorical", "bool") or len(choices) > 1:
            params.append(replace(param, choices=choices))
    params = _settled(params, front_space, adapter.table)
    # The front's params come first, so that a server setting that only means something
    # over HTTP (the server's `http_only_settings`) is drawn only when HTTP was.
    protocol = next((p for p in params if p.setting == PROTOCOL), None)
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


def _settled(params: list[Param], front_space: SearchSpace, table: SettingsTable) -> list[Param]:
    """`params` (what this server searches of the front's file) with each condition on a
    param it does not search settled by the value that param has here: its default in the
    server's front table, or, for a setting the server lacks, the front's default (as
    `FrontConfig` reads it: fastcgi_keep_conn on)."""
    searched = {p.name for p in params}
    in_effect = {
        param.name: (table if param.setting in table.by_name else front_space.table)
        .get(param.setting)
        .default
        for param in front_space.params
        if param.name not in searched
    }
    return list(settled(params, in_effect, table))
