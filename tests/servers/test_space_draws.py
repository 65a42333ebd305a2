"""Every config a shipped space can draw is one its adapter accepts. A draw the adapter
refuses is a trial lost (recorded as invalid_combination) and, since the samplers learn
nothing from a failed trial, drawn again and again: the space's `when` conditions must keep
such combinations out. Pure: no server starts."""

from __future__ import annotations

import pytest

from tests.servers.test_contract import SERVED, SeededTrial, space_path
from tuner.errors import ConfigError
from tuner.search.space import load_space, suggest
from tuner.servers import get_adapter

DRAWS = 300
CPUS = (1, 2, 4, 16)


@pytest.mark.parametrize(
    ("name", "interface"),
    SERVED,
    ids=[name if i.value == "wsgi" else f"{name}-{i}" for name, i in SERVED],
)
def test_every_draw_of_the_space_is_a_config_the_adapter_accepts(name, interface) -> None:
    adapter = get_adapter(name).serving(interface)
    space = load_space(space_path(adapter), adapter.table, adapter.name)
    refused: dict[str, int] = {}
    seen: set[tuple[str, object]] = set()
    for cpus in CPUS:
        for seed in range(DRAWS):
            drawn = suggest(space, SeededTrial(seed * 31 + cpus), cpus=cpus)
            seen |= {(name, repr(value)) for name, value in drawn.items()}
            try:
                adapter.resolve(drawn)
            except ConfigError as exc:
                line = f"cpus={cpus}: {str(exc).splitlines()[0]}"
                refused[line] = refused.get(line, 0) + 1
    assert not refused, "\n".join(f"{n} x {line}" for line, n in refused.items())
    # Every choice is drawn (a switch drawn only under a condition, gunicorn's gc_freeze with
    # preload_app, too): a `when` that never holds would keep a setting out of every study.
    never = [
        f"{param.setting}={value!r}"
        for param in space.params
        for value in param.choices
        if (param.setting, repr(value)) not in seen
    ]
    assert not never, f"never drawn in {len(CPUS) * DRAWS} draws: {', '.join(never)}"
