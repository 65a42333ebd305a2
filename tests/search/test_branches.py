"""Each study starts with one config per concurrency model its space reaches: pure logic."""

from __future__ import annotations

import contextlib

import pytest

from tuner.errors import ConfigError
from tuner.search.branches import branch_starts
from tuner.search.space import admits, default_space_path, load_space
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


@pytest.mark.parametrize("server", ["gunicorn", "uwsgi", "mod_wsgi", "granian"])
def test_a_start_is_its_branch_at_the_defaults_but_for_its_thread_count(server: str) -> None:
    """A branch is judged by its start, so the start changes only what makes the branch (and
    its thread count): on gunicorn fib, random gthread starts with 2-5 workers (unfair there),
    access logging and recycling hid the branch's best, one worker with 16 threads."""
    adapter = get_adapter(server)
    space = load_space(default_space_path(server), adapter.table, server)
    defaults = adapter.resolve({})
    threads = adapter.process_model.threads
    covered = [adapter.concurrency_model(b.values) for b in adapter.baselines(1)]
    thread_counts = set()
    for seed in range(8):
        for params in branch_starts(space, adapter, 1, seed=seed, covered=covered):
            settings = {p.setting: params[p.name] for p in space.params if p.name in params}
            model = adapter.concurrency_model(adapter.resolve(settings))
            for param in space.params:
                value = settings.get(param.setting)
                if param.setting == threads and value is not None:
                    thread_counts.add(value)
                if value is None or value == defaults[param.setting] or param.setting == threads:
                    continue
                # Left as drawn only where the default is not in the space or would change
                # the branch (or the server refuses it with the rest).
                reverted = {**settings, param.setting: defaults[param.setting]}
                if admits(param, defaults[param.setting], 1):
                    with contextlib.suppress(ConfigError):
                        assert adapter.concurrency_model(adapter.resolve(reverted)) != model, (
                            seed,
                            param.name,
                            settings,
                        )
    assert len(thread_counts) > 1  # the thread count is still drawn


def test_admits_knows_choices_ranges_and_cpu_bounds() -> None:
    adapter = get_adapter("gunicorn")
    space = load_space(default_space_path("gunicorn"), adapter.table, "gunicorn")
    params = {p.name: p for p in space.params}
    assert admits(params["worker_class"], "gevent", 1)
    assert not admits(params["worker_class"], "eventlet", 1)
    assert not admits(params["keepalive"], 2, 1)  # gunicorn's default is not among the choices
    assert admits(params["workers"], 1, 1) and admits(params["workers"], 5, 1)
    assert not admits(params["workers"], 6, 1)  # high = 4*cpus+1
    assert admits(params["workers"], 9, 2)
    assert not admits(params["workers"], "3", 1)
