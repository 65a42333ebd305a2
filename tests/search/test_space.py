"""Search-space loading, cpu expressions, conditions and the shipped default spaces."""

from __future__ import annotations

import random
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tuner.errors import ConfigError
from tuner.front import FRONTS
from tuner.front.config import front_table
from tuner.search.space import (
    SearchSpace,
    bounds,
    default_space_path,
    load_space,
    parse_expr,
    suggest,
)
from tuner.servers import get_adapter, server_names
from tuner.settings import Setting, SettingKind, SettingsTable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib


def _setting(name: str, kind: str, default: Any, doc: str = "", **kw: Any) -> Setting:
    return Setting(
        name=name,
        kind=kind,
        default=default,
        doc=doc,
        argv=lambda v: [],
        config=lambda v: [],
        **kw,
    )


# A small gunicorn-like table, independent of tuner.servers.
TABLE = SettingsTable(
    "fake",
    (
        _setting("workers", "int", 1, minimum=1),
        _setting("worker_class", "choice", "sync", choices=("sync", "gthread", "gevent")),
        _setting("threads", "int", 1, minimum=1),
        _setting("worker_connections", "int", 1000, minimum=1),
        _setting("timeout", "float", 30.0, minimum=0),
        _setting("accesslog", "bool", False, doc="a log line per request"),
        _setting("max_requests", "int", 0, minimum=0),
        _setting("max_requests_jitter", "int", 0, minimum=0),
        _setting("protocol", "choice", "http", choices=("http", "http-socket", "http11-socket")),
        _setting("gevent", "int", 0, minimum=0),
    ),
)


class FakeTrial:
    """Records every suggest call; draws uniformly (or from `pick`) within the given range."""

    def __init__(self, seed: int = 0, pick: dict[str, Any] | None = None) -> None:
        self.rng = random.Random(seed)
        self.pick = pick or {}
        self.calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []

    def suggest_int(self, name: str, low: int, high: int, *, log: bool = False, step: int = 1):
        self.calls.append(("int", name, (low, high), {"log": log, "step": step}))
        return self.pick.get(name, low + step * self.rng.randint(0, (high - low) // step))

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False):
        self.calls.append(("float", name, (low, high), {"log": log}))
        return self.pick.get(name, self.rng.uniform(low, high))

    def suggest_categorical(self, name: str, choices: Any):
        self.calls.append(("categorical", name, tuple(choices), {}))
        return self.pick.get(name, self.rng.choice(list(choices)))

    def names(self) -> list[str]:
        return [c[1] for c in self.calls]


def write(tmp_path: Path, body: str, server: str = "fake") -> Path:
    path = tmp_path / "space.toml"
    path.write_text(f'server = "{server}"\n' + textwrap.dedent(body))
    return path


def load(tmp_path: Path, body: str, server: str = "fake") -> SearchSpace:
    return load_space(write(tmp_path, body, server), TABLE, "fake")


GOOD = """
[params.workers]
type = "int"
low = 1
high = "4*cpus+1"
log = true
doc = "worker processes"
[params.worker_class]
type = "categorical"
choices = ["sync", "gthread", "gevent"]
[params.threads]
type = "int"
low = 2
high = 16
when = { worker_class = ["gthread"] }
[params.worker_connections]
type = "int"
low = 100
high = 2000
log = true
when = { worker_class = ["gevent"] }
[params.timeout]
type = "float"
low = 5
high = 60.5
[params.accesslog]
type = "bool"
[params.max_requests]
type = "categorical"
choices = [0, 1000, 10000]
[params.max_requests_jitter]
type = "int"
low = 0
high = 500
step = 50
when = { max_requests = [1000, 10000] }
"""


def test_good_file_loads(tmp_path: Path) -> None:
    space = load(tmp_path, GOOD)
    assert space.server == "fake"
    assert space.source == str(tmp_path / "space.toml")
    assert space.names() == (
        "workers",
        "worker_class",
        "threads",
        "worker_connections",
        "timeout",
        "accesslog",
        "max_requests",
        "max_requests_jitter",
    )
    threads = space.params[2]
    assert threads.setting == "threads" and threads.when == {"worker_class": ("gthread",)}
    assert space.params[0].log and space.params[0].doc == "worker processes"
    assert space.params[5].choices == (False, True)
    assert space.params[7].step == 50


# --- what a param may leave to its setting: type, doc, a choice setting's choices ----------

INFERRED = """
[params.workers]
low = 1
high = "4*cpus+1"
log = true
[params.timeout]
low = 5
high = 60.5
[params.accesslog]
[params.worker_class]
[params.max_requests]
choices = [0, 1000, 10000]
[params.protocol]
choices = ["http11-socket", "http"]
"""


def test_a_param_without_type_takes_it_from_its_settings_kind(tmp_path: Path) -> None:
    space = load(tmp_path, INFERRED)
    assert [(p.name, p.type) for p in space.params] == [
        ("workers", "int"),  # an int setting: an int range
        ("timeout", "float"),  # a float setting: a float range
        ("accesslog", "bool"),
        ("worker_class", "categorical"),  # a choice setting: its choices
        ("max_requests", "categorical"),  # an int setting searched over listed values
        ("protocol", "categorical"),
    ]
    workers, timeout = space.params[:2]
    assert (workers.low, workers.high, workers.log) == (1, "4*cpus+1", True)
    assert (timeout.low, timeout.high) == (5, 60.5)


def test_choices_left_out_are_all_of_the_settings_in_its_order(tmp_path: Path) -> None:
    space = load(tmp_path, INFERRED + '[params.gevent]\ntype = "categorical"\nchoices = [0, 5]\n')
    by_name = {p.name: p for p in space.params}
    assert by_name["accesslog"].choices == (False, True)
    assert by_name["worker_class"].choices == ("sync", "gthread", "gevent")
    # given choices are kept as given: a subset, in the file's order, coerced
    assert by_name["max_requests"].choices == (0, 1000, 10000)
    assert by_name["protocol"].choices == ("http11-socket", "http")
    assert by_name["gevent"].choices == (0, 5)
    # and a categorical type given on a choice setting also defaults to all of them
    again = load(tmp_path, '[params.worker_class]\ntype = "categorical"\n')
    assert again.params[0].choices == ("sync", "gthread", "gevent")


def test_a_bool_setting_with_listed_choices_is_categorical_in_that_order(tmp_path: Path) -> None:
    space = load(tmp_path, "[params.accesslog]\nchoices = [true, false]\n")
    assert (space.params[0].type, space.params[0].choices) == ("categorical", (True, False))


def test_doc_left_out_is_the_settings_own(tmp_path: Path) -> None:
    body = '[params.accesslog]\n[params.workers]\nlow = 1\nhigh = 2\ndoc = "mine"\n'
    space = load(tmp_path, body)
    assert [p.doc for p in space.params] == ["a log line per request", "mine"]


def test_a_given_type_that_fits_loads_as_the_inferred_one(tmp_path: Path) -> None:
    """Files that still spell every type load unchanged: GOOD with and without them."""
    untyped = "\n".join(line for line in GOOD.splitlines() if not line.startswith("type ="))
    assert untyped != GOOD
    assert load(tmp_path, untyped).params == load(tmp_path, GOOD).params


def test_an_int_range_on_a_float_setting_stays_int(tmp_path: Path) -> None:
    space = load(tmp_path, '[params.timeout]\ntype = "int"\nlow = 5\nhigh = 60\nstep = 5\n')
    assert space.params[0].type == "int" and space.params[0].step == 5
    assert isinstance(suggest(space, FakeTrial(), 2)["timeout"], float)


def test_setting_key_maps_a_differently_named_param(tmp_path: Path) -> None:
    space = load(tmp_path, '[params.procs]\ntype = "int"\nlow = 1\nhigh = 4\nsetting = "workers"\n')
    assert space.params[0].name == "procs" and space.params[0].setting == "workers"
    trial = FakeTrial()
    assert set(suggest(space, trial, cpus=2)) == {"workers"}
    assert trial.names() == ["procs"]


# --- every loader error: one line, naming the file and the key -----------------------------

ERRORS = [
    # (body, words the message must contain)
    ('[params.wrokers]\ntype = "int"\nlow = 1\nhigh = 2\n', ["params.wrokers", "valid settings"]),
    ('[params.procs]\ntype = "int"\nlow = 1\nhigh = 2\nsetting = "nope"\n', ["params.procs"]),
    ('[params.workers]\ntype = "integer"\nlow = 1\nhigh = 2\n', ["params.workers", "valid types"]),
    ("[params]\nworkers = 3\n", ["params.workers", "table"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = 2\nlo = 1\n', ["params.workers", "'lo'"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = 2\nchoices = [1]\n', ["'choices'"]),
    ('[params.workers]\ntype = "int"\nlow = 5\nhigh = 2\n', ["params.workers", "low 5 > high 2"]),
    ('[params.workers]\ntype = "int"\nlow = 8\nhigh = "cpus"\n', ["params.workers", "cpus=1"]),
    ('[params.workers]\ntype = "int"\nlow = 1\n', ["params.workers", "high"]),
    ('[params.workers]\ntype = "int"\nlow = 1.5\nhigh = 4\n', ["params.workers", "integer"]),
    ('[params.workers]\ntype = "int"\nlow = true\nhigh = 4\n', ["params.workers", "low"]),
    ('[params.workers]\ntype = "int"\nlow = 0\nhigh = 4\n', ["params.workers", "low = 0"]),
    ('[params.workers]\ntype = "int"\nlow = 0\nhigh = 4\nlog = true\n', ["log scale"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = 4\nlog = 1\n', ["log = 1"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = 4\nstep = 0\n', ["step = 0"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = 8\nlog = true\nstep = 2\n', ["step"]),
    ('[params.timeout]\ntype = "float"\nlow = 1\nhigh = 4\nstep = 1\n', ["'step'"]),
    (
        '[params.threads]\ntype = "float"\nlow = 1\nhigh = 4\n',
        ["params.threads", "type = 'float'", "kind is int", "valid types for it: int, categorical"],
    ),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "2**cpus"\n', ["'2**cpus'"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "cpus/2"\n', ["'cpus/2'"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "ncpu+1"\n', ["'ncpu'"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "__import__(\'os\')"\n', ["not allowed"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "cpus*1.5"\n', ["1.5"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "4*(cpus"\n', ["cannot parse"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "8//(cpus-1)"\n', ["division by zero"]),
    ('[params.workers]\ntype = "int"\nlow = 1\nhigh = "100-cpus"\n', ["cpus=100"]),
    ('[params.worker_class]\ntype = "categorical"\nchoices = ["sync", "eventlet"]\n', ["eventlet"]),
    ('[params.worker_class]\ntype = "categorical"\nchoices = []\n', ["at least one"]),
    ('[params.workers]\ntype = "categorical"\n', ["params.workers", "choices", "kind is int"]),
    ('[params.worker_class]\ntype = "categorical"\nchoices = ["sync", "sync"]\n', ["repeat"]),
    ('[params.workers]\ntype = "categorical"\nchoices = [1, "two"]\n', ["'two'"]),
    (
        '[params.workers]\ntype = "bool"\n',
        ["params.workers", "type = 'bool'", "valid types for it: int, categorical"],
    ),
    # a given type must fit the setting's kind; a range on a bool or a choice setting does not
    (
        '[params.accesslog]\ntype = "int"\nlow = 0\nhigh = 1\n',
        ["params.accesslog", "type = 'int'", "kind is bool", "for it: categorical, bool"],
    ),
    (
        '[params.worker_class]\ntype = "int"\nlow = 1\nhigh = 2\n',
        ["params.worker_class", "type = 'int'", "kind is choice", "for it: categorical"],
    ),
    (
        '[params.worker_class]\ntype = "bool"\n',
        ["params.worker_class", "type = 'bool'", "valid types for it: categorical"],
    ),
    ('[params.timeout]\ntype = "bool"\n', ["params.timeout", "type = 'bool'", "kind is float"]),
    # without a type, the setting's kind decides which keys apply
    (
        "[params.accesslog]\nlow = 0\nhigh = 1\n",
        ["params.accesslog", "'high' does not apply to type bool", "kind is bool"],
    ),
    (
        "[params.worker_class]\nlow = 1\nhigh = 2\n",
        ["params.worker_class", "'high' does not apply to type categorical", "kind is choice"],
    ),
    (
        "[params.workers]\nlow = 1\nhigh = 2\nchoices = [1, 2]\n",
        ["params.workers", "'high' does not apply to type categorical"],
    ),
    ('[params.accesslog]\ntype = "bool"\nlow = 1\n', ["'low'"]),
    ('[params.accesslog]\ntype = "bool"\ndoc = 3\n', ["doc"]),
    ('[params.accesslog]\ntype = "bool"\nsetting = 3\n', ["setting = 3"]),
    (
        '[params.workers]\ntype = "int"\nlow = 1\nhigh = 2\n'
        '[params.procs]\ntype = "int"\nlow = 1\nhigh = 2\nsetting = "workers"\n',
        ["params.procs", "already tuned by params.workers"],
    ),
]

CONDITION_ERRORS = [
    # unknown param in a condition
    (
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\nwhen = { wc = ["gthread"] }\n',
        ["params.threads", "when.wc", "declared params: threads"],
    ),
    # a value the referenced param can never take
    (
        '[params.worker_class]\ntype = "categorical"\nchoices = ["sync", "gthread"]\n'
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\n'
        'when = { worker_class = ["gevent"] }\n',
        ["params.threads", "when.worker_class", "'gevent'", "valid values: 'gthread', 'sync'"],
    ),
    # a value the referenced setting rejects
    (
        '[params.worker_class]\ntype = "categorical"\nchoices = ["sync", "gthread"]\n'
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\n'
        'when = { worker_class = ["eventlet"] }\n',
        ["params.threads", "when.worker_class", "'eventlet'", "expected one of"],
    ),
    # condition on a param declared later
    (
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\nwhen = { worker_class = ["gthread"] }\n'
        '[params.worker_class]\ntype = "categorical"\nchoices = ["sync", "gthread"]\n',
        ["params.threads", "declared later", "before params.threads"],
    ),
    # self reference
    (
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\nwhen = { threads = [2] }\n',
        ["params.threads", "itself"],
    ),
    # two-param cycle
    (
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\nwhen = { worker_class = ["gthread"] }\n'
        '[params.worker_class]\ntype = "categorical"\nchoices = ["sync", "gthread"]\n'
        "when = { threads = [2] }\n",
        ["params.threads", "cycle threads -> worker_class -> threads"],
    ),
    # malformed `when`
    (
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\nwhen = { worker_class = [] }\n',
        ["params.threads", "non-empty"],
    ),
    (
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\nwhen = "gthread"\n',
        ["params.threads", "when must be a table"],
    ),
    # `{ min = N }` on a param that is not a number, with another key, or not a number
    (
        '[params.worker_class]\ntype = "categorical"\nchoices = ["sync", "gthread"]\n'
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\n'
        "when = { worker_class = { min = 2 } }\n",
        ["params.threads", "when.worker_class", "needs an int or float param", "categorical"],
    ),
    (
        '[params.workers]\ntype = "int"\nlow = 1\nhigh = 4\n'
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\n'
        "when = { workers = { max = 2 } }\n",
        ["params.threads", "when must be a table", "{ min = N }"],
    ),
    (
        '[params.workers]\ntype = "int"\nlow = 1\nhigh = 4\n'
        '[params.threads]\ntype = "int"\nlow = 1\nhigh = 4\n'
        'when = { workers = { min = "two" } }\n',
        ["params.threads", "when.workers", "min = 'two' is not a number"],
    ),
]


def test_a_minimum_condition_draws_the_param_only_at_or_above_it(tmp_path: Path) -> None:
    body = (
        '[params.workers]\ntype = "int"\nlow = 1\nhigh = 4\n'
        '[params.max_requests]\ntype = "categorical"\nchoices = [0, 1000]\n'
        "when = { workers = { min = 2 } }\n"
    )
    space = load(tmp_path, body)
    assert space.params[1].when_min == {"workers": 2.0} and space.params[1].when == {}
    for workers in (1, 2, 4):
        trial = FakeTrial(pick={"workers": workers})
        config = suggest(space, trial, 2)
        assert ("max_requests" in trial.names()) is (workers >= 2), (workers, trial.names())
        assert config["workers"] == workers


@pytest.mark.parametrize(("body", "words"), ERRORS + CONDITION_ERRORS)
def test_loader_errors_are_one_line_naming_file_and_key(
    tmp_path: Path, body: str, words: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, body)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'space.toml'}: ")
    for word in words:
        assert word in message, message


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[params.workers]\ntype = "int"\nlow = = 1\n')
    with pytest.raises(ConfigError) as info:
        load_space(path, TABLE, "fake")
    message = str(info.value)
    assert message.startswith(f"{path}: invalid TOML") and "line 4" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("", ["server = 'fake'", "missing"]),
        ('server = "uwsgi"\n', ["server = 'uwsgi'", "expected server = 'fake'"]),
        ('server = "fake"\n', ["no [params.NAME]"]),
        ('server = "fake"\nextra = 1\n', ["'extra'", "valid keys"]),
    ],
)
def test_file_level_errors(tmp_path: Path, body: str, words: list[str]) -> None:
    path = tmp_path / "space.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_space(path, TABLE, "fake")
    assert str(info.value).startswith(f"{path}: ")
    for word in words:
        assert word in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read search space"):
        load_space(tmp_path / "nope.toml", TABLE, "fake")


# --- cpu expressions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4*cpus+1", {1: 5, 2: 9, 8: 33, 16: 65}),
        ("2*cpus+1", {1: 3, 2: 5, 8: 17, 16: 33}),
        ("cpus//2+1", {1: 1, 2: 2, 8: 5, 16: 9}),
        ("(cpus-1)*2+2", {1: 2, 2: 4, 8: 16, 16: 32}),
        ("7", {1: 7, 2: 7, 8: 7, 16: 7}),
    ],
)
def test_cpu_expressions(text: str, expected: dict[int, int]) -> None:
    fn = parse_expr(text)
    assert {cpus: fn(cpus) for cpus in expected} == expected


@pytest.mark.parametrize("cpus", [1, 2, 8, 16])
def test_bounds_and_suggest_resolve_cpus(tmp_path: Path, cpus: int) -> None:
    space = load(tmp_path, GOOD)
    resolved = bounds(space, cpus)
    assert resolved["workers"] == (1, 4 * cpus + 1)
    assert resolved["threads"] == (2, 16)
    assert resolved["worker_class"] == ("sync", "gthread", "gevent")
    assert resolved["accesslog"] == (False, True)
    trial = FakeTrial(pick={"worker_class": "gthread"})
    config = suggest(space, trial, cpus)
    workers_call = next(c for c in trial.calls if c[1] == "workers")
    assert workers_call == ("int", "workers", (1, 4 * cpus + 1), {"log": True, "step": 1})
    assert 1 <= config["workers"] <= 4 * cpus + 1


def test_suggest_coerces_and_keys_by_setting(tmp_path: Path) -> None:
    space = load(tmp_path, GOOD)
    trial = FakeTrial(pick={"worker_class": "gevent", "max_requests": 1000, "timeout": 7})
    config = suggest(space, trial, 4)
    assert config["worker_class"] == "gevent"
    assert isinstance(config["timeout"], float) and config["timeout"] == 7.0
    assert config["max_requests"] == 1000
    assert config["max_requests_jitter"] % 50 == 0
    assert isinstance(config["accesslog"], bool)
    assert TABLE.resolve(config)  # every key is a real setting with a valid value


# --- conditions ---------------------------------------------------------------------------


def test_threads_never_suggested_with_sync(tmp_path: Path) -> None:
    space = load(tmp_path, GOOD)
    for seed in range(200):
        trial = FakeTrial(seed)
        config = suggest(space, trial, 4)
        names = trial.names()
        assert ("threads" in names) == (config["worker_class"] == "gthread")
        assert ("worker_connections" in names) == (config["worker_class"] == "gevent")
        assert ("max_requests_jitter" in names) == (config["max_requests"] != 0)
        assert names == [n for n in space.names() if n in names]  # file order


UWSGI_LIKE = """
[params.protocol]
type = "categorical"
choices = ["http", "http-socket", "http11-socket"]
[params.gevent]
type = "categorical"
choices = [0, 100, 1000]
when = { protocol = ["http", "http-socket"] }
[params.threads]
type = "int"
low = 1
high = 32
log = true
when = { gevent = [0] }
"""


def test_gevent_never_with_http11_socket_and_skipped_params_use_default(tmp_path: Path) -> None:
    space = load(tmp_path, UWSGI_LIKE)
    seen = set()
    for seed in range(200):
        trial = FakeTrial(seed)
        config = suggest(space, trial, 2)
        if config["protocol"] == "http11-socket":
            assert "gevent" not in trial.names()
            # gevent stays at its default 0, so threads still apply
            assert "threads" in trial.names()
        seen.add((config["protocol"], config.get("gevent")))
        if config.get("gevent"):
            assert "threads" not in trial.names()
    assert ("http11-socket", None) in seen and ("http", 1000) in seen


def test_fixed_settings_are_not_sampled_and_drive_conditions(tmp_path: Path) -> None:
    space = load(tmp_path, GOOD)
    trial = FakeTrial()
    config = suggest(space, trial, 2, fixed={"worker_class": "gthread"})
    assert "worker_class" not in trial.names() and "worker_class" not in config
    assert "threads" in config


def test_condition_on_default_of_a_conditional_param_is_valid(tmp_path: Path) -> None:
    # gevent is conditional with choices [100, 1000]: its default 0 is still reachable
    body = UWSGI_LIKE.replace("[0, 100, 1000]", "[100, 1000]")
    space = load(tmp_path, body)
    assert space.params[2].when == {"gevent": (0,)}


# --- the shipped default spaces -----------------------------------------------------------


@pytest.mark.parametrize("server", ["gunicorn", "uwsgi"])
def test_default_spaces_load_against_real_tables(server: str) -> None:
    adapter = get_adapter(server)
    path = default_space_path(server)
    assert path.is_file()
    space = load_space(path, adapter.table, server)
    assert space.server == server
    for cpus in (1, 2, 8, 16):
        resolved = bounds(space, cpus)
        assert list(resolved) == [param.name for param in space.params]
        for param in space.params:
            if param.type in ("int", "float"):
                low, high = resolved[param.name]
                assert low <= high, (param.name, cpus, resolved[param.name])
            else:
                assert resolved[param.name] == param.choices and param.choices
        # the default spaces' one CPU-scaled bound: worker processes up to 4*cpus+1
        assert resolved[{"gunicorn": "workers", "uwsgi": "processes"}[server]] == (1, 4 * cpus + 1)
        for seed in range(50):
            trial = FakeTrial(seed)
            config = suggest(space, trial, cpus)
            # every draw is a combination the server accepts (the adapter's own rules)
            adapter.check_combination(adapter.table.resolve(config))
            if server == "gunicorn" and config["worker_class"] == "sync":
                assert "threads" not in trial.names()
                assert "keepalive" not in trial.names()
            if server == "uwsgi" and config["protocol"] == "http11-socket":
                assert "gevent" not in trial.names()


def _shipped_spaces() -> dict[Path, SettingsTable]:
    """Every shipped space file (search_spaces/) with the settings table it is loaded against:
    each server's, for each interface it serves, and each front's."""
    folder = default_space_path("gunicorn").parent
    spaces = {default_space_path(f"front-{f}"): SettingsTable(f, front_table()) for f in FRONTS}
    for name in server_names():
        for interface in get_adapter(name).interfaces:
            adapter = get_adapter(name).serving(interface)
            path = adapter.space_file or default_space_path(adapter.name)
            if path.parent == folder:  # not the tests' own adapters' spaces
                spaces[path] = adapter.table
    assert set(spaces) == set(folder.glob("*.toml")), "a shipped space no server loads"
    return spaces


def test_shipped_spaces_name_only_what_they_search() -> None:
    """The adapter declares each setting's type, doc and choices once; a shipped space adds
    only its ranges, its subsets of choices and its conditions."""
    repeated = []
    for path, table in _shipped_spaces().items():
        for name, spec in tomllib.loads(path.read_text())["params"].items():
            setting = table.get(spec.get("setting", name))
            repeated += [
                f"{path.name}: params.{name}: {key}" for key in ("type", "doc") if key in spec
            ]
            if (
                setting.kind is SettingKind.CHOICE
                and tuple(spec.get("choices", ())) == setting.choices
            ):
                repeated.append(f"{path.name}: params.{name}: choices (all of the setting's)")
    assert not repeated


def test_default_space_path_points_into_repo() -> None:
    path = default_space_path("gunicorn")
    assert path.parent.name == "search_spaces" and path.name == "gunicorn.toml"


# -- params that wait for a lane --------------------------------------------------------------


def test_a_param_waiting_for_a_lane_is_searched_only_with_that_lane() -> None:
    space = load_space(default_space_path("gunicorn"), get_adapter("gunicorn").table, "gunicorn")
    names = set(space.names())
    assert {"timeout", "graceful_timeout"} <= names
    plain = set(space.for_lanes(()).names())
    assert names - plain == {"timeout", "graceful_timeout"}
    assert set(space.for_lanes(("probe",)).names()) == plain
    assert set(space.for_lanes(("streams", "probe")).names()) == names


def test_a_param_whose_condition_names_a_dropped_param_sees_its_default(tmp_path: Path) -> None:
    table = get_adapter("gunicorn").table
    path = tmp_path / "s.toml"
    path.write_text(
        'server = "gunicorn"\n'
        '[params.timeout]\nchoices = [10, 30]\nlanes = ["streams"]\n'
        "[params.graceful_timeout]\nchoices = [1, 30]\nwhen = { timeout = [30] }\n"
        "[params.workers]\nlow = 1\nhigh = 4\nwhen = { timeout = [10] }\n"
    )
    space = load_space(path, table, "gunicorn").for_lanes(())
    # timeout stays at its default 30: graceful_timeout's condition holds, workers' does not.
    assert space.names() == ("graceful_timeout",)
    assert space.params[0].when == {}


@pytest.mark.parametrize("lanes", ["[]", '["stream"]', '"streams"', "[1]"])
def test_lanes_must_name_known_lanes(tmp_path: Path, lanes: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(f'server = "gunicorn"\n[params.timeout]\nchoices = [10, 30]\nlanes = {lanes}\n')
    expected = r"params.timeout: lanes = .*; expected a non-empty list of: streams, probe"
    with pytest.raises(ConfigError, match=expected):
        load_space(path, get_adapter("gunicorn").table, "gunicorn")
