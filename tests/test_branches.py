"""Each study starts with one config per concurrency model its space reaches: pure logic."""

from __future__ import annotations

import pytest

from tuner.search.branches import branch_starts
from tuner.search.space import default_space_path, load_space
from tuner.servers import get_adapter


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("gunicorn", {"gthread", "gevent"}),
        (
            "uwsgi",
            {
                f"{protocol} / {mode}"
                for protocol in ("http", "http-socket", "http11-socket")
                for mode in ("gevent", "threads", "processes")
                if not (protocol == "http11-socket" and mode == "gevent")  # refused pair
            }
            - {"http-socket / processes"},  # the baselines' model
        ),
    ],
)
def test_every_model_the_baselines_miss_gets_one_start(server: str, expected: set[str]) -> None:
    adapter = get_adapter(server)
    space = load_space(default_space_path(server), adapter.table, server)
    covered = [adapter.concurrency_model(b.values) for b in adapter.baselines(1)]
    starts = branch_starts(space, adapter, 1, seed=3, covered=covered)
    models = []
    for params in starts:
        settings = {p.setting: params[p.name] for p in space.params if p.name in params}
        models.append(adapter.concurrency_model(adapter.resolve(settings)))
    assert sorted(models) == sorted(expected)  # each once, none the baselines measure
    assert starts == branch_starts(space, adapter, 1, seed=3, covered=covered)  # seeded
