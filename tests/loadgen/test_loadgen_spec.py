"""LoadSpec / workload validation and request building (no server needed)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import unavailable
from tuner.errors import ConfigError
from tuner.loadgen import ClientModel, LoadSpec, RequestSpec, Workload, load_workload_file
from tuner.loadgen.http import build_request, request_sequence, tagged_sequence
from tuner.loadgen.spec import MAX_PATHS

HELLO = Workload.single("/")
OK = {"host": "127.0.0.1", "port": 8000, "workload": HELLO}
A_CPU = min(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"host": "10.0.0.5"}, "host '10.0.0.5'"),
        ({"host": "example.com"}, "only targets this machine"),
        ({"port": 0}, "port 0"),
        ({"connections": 0}, "connections 0"),
        ({"duration_s": 0}, "duration_s 0"),
        ({"warmup_s": -1}, "warmup_s -1"),
        ({"timeout_s": float("nan")}, "timeout_s nan"),
        ({"rate_rps": 0}, "rate_rps 0"),
        ({"rate_rps": -5.0}, "rate_rps -5.0"),
        ({"load_cpus": ()}, "load_cpus"),
        ({"load_cpus": (4096,)}, "load CPU 4096"),
        ({"load_cpus": (A_CPU, A_CPU), "connections": 4}, "listed twice"),
        ({"workload": Workload(())}, "no requests"),
        ({"workload": Workload((RequestSpec(path="nope"),))}, "path 'nope'"),
        ({"workload": Workload((RequestSpec(method="HEAD"),))}, "method 'HEAD'"),
        ({"workload": Workload((RequestSpec(weight=0),))}, "weight 0"),
        ({"workload": Workload((RequestSpec(headers=(("Host", "x"),)),))}, "header 'Host'"),
    ],
)
def test_bad_values_are_config_errors(changes: dict, message: str) -> None:
    spec = LoadSpec(**{**OK, "load_cpus": (A_CPU,), **changes})
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        spec.validate()


def test_fewer_connections_than_load_cpus() -> None:
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    if len(cpus) < 2:
        unavailable("needs two CPUs")
    with pytest.raises(ConfigError, match="at least one per load CPU"):
        LoadSpec(**OK, connections=1, load_cpus=cpus[:2]).validate()


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "localhost", "::1"])
def test_loopback_hosts_are_allowed(host: str) -> None:
    LoadSpec(**{**OK, "host": host, "load_cpus": (A_CPU,)}).validate()


def test_from_url() -> None:
    spec = LoadSpec.from_url("http://127.0.0.1:8123/9000?x=1", duration_s=3, load_cpus=(A_CPU,))
    assert (spec.host, spec.port, spec.duration_s) == ("127.0.0.1", 8123, 3)
    assert spec.workload == Workload.single("/9000?x=1")
    for bad in ["https://127.0.0.1:8000/", "http://192.168.1.1:80/", "http://127.0.0.1/", "x"]:
        with pytest.raises(ConfigError):
            LoadSpec.from_url(bad, load_cpus=(A_CPU,))


def test_request_bytes() -> None:
    get = build_request(RequestSpec(path="/a"), "127.0.0.1", 80, keepalive=True)
    assert get == b"GET /a HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n"
    post = RequestSpec(method="POST", path="/p", headers=(("X-A", "1"),), body=b"hi")
    assert build_request(post, "::1", 81, keepalive=False) == (
        b"POST /p HTTP/1.1\r\nHost: [::1]:81\r\nX-A: 1\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\nhi"
    )


def test_weighted_sequence_is_proportional_and_interleaved() -> None:
    workload = Workload((RequestSpec(path="/a", weight=3), RequestSpec(path="/b", weight=1)))
    sequence = request_sequence(workload, "127.0.0.1", 80, True)
    a = sum(1 for r in sequence if r.startswith(b"GET /a "))
    assert a == 750 and len(sequence) == 1000
    assert b"GET /b " in b"".join(sequence[:4])


def test_workload_file_toml_and_json(tmp_path) -> None:
    toml = tmp_path / "w.toml"
    toml.write_text(
        '[[requests]]\npath = "/items"\nweight = 3\n\n'
        '[[requests]]\nmethod = "post"\npath = "/items"\nbody = "{}"\n'
        'headers = { "Content-Type" = "application/json" }\n'
    )
    workload = load_workload_file(toml)
    assert workload.requests == (
        RequestSpec(path="/items", weight=3.0),
        RequestSpec(
            method="POST",
            path="/items",
            headers=(("Content-Type", "application/json"),),
            body=b"{}",
        ),
    )
    js = tmp_path / "w.json"
    js.write_text(json.dumps({"requests": [{"path": "/x"}]}))
    assert load_workload_file(js) == Workload.single("/x")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "non-empty list `requests`"),
        ("requests = 3", "non-empty list `requests`"),
        ('[[requests]]\npath = "/"\n[[requests]]\nverb = "GET"', r"request 2: unknown key 'verb'"),
        ('[[requests]]\nmethod = "BREW"', "request 1: method 'BREW': expected one of GET"),
        ("[[requests]]\nweight = -1", "request 1: weight -1"),
        ('[[requests]]\nweight = "heavy"', "request 1: weight 'heavy'"),
        ("[[requests]]\nheaders = { A = 1 }", "request 1: headers"),
        ('[[requests]]\npath = "/a b"', "request 1: path '/a b'"),
        ("[[requests]\n", "not valid TOML"),
        ("[[requests]]\npaths = []", "request 1: paths \\[\\]: expected a non-empty list"),
        ("[[requests]]\npaths = 3", "request 1: paths 3: expected a non-empty list"),
        ('[[requests]]\npaths = ["/a", 2]', "request 1: paths: 2 is not a path; expected a"),
        ('[[requests]]\npaths = ["/a", "b"]', "request 1: paths: 'b': expected an absolute path"),
        ('[[requests]]\npaths = ["/a", "/a"]', "request 1: paths: '/a' is listed twice"),
        ('[[requests]]\npaths = { "/a" = 0 }', "request 1: paths: '/a' has weight 0"),
        ('[[requests]]\npaths = { "/a" = "x" }', "request 1: paths: '/a' has weight 'x'"),
        ('[[requests]]\npaths = { "/a b" = 1 }', "request 1: paths: '/a b'"),
    ],
)
def test_bad_workload_files_name_file_entry_and_what_is_valid(tmp_path, text, message) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_workload_file(path)
    assert str(path) in str(info.value)


def test_missing_workload_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_workload_file(tmp_path / "nope.toml")


def test_paths_list_table_and_json(tmp_path) -> None:
    toml = tmp_path / "w.toml"
    toml.write_text(
        '[[requests]]\npath = "/items/{int}"\nweight = 3\n\n'
        '[requests.paths]\n"/items/1" = 5\n"/items/2?x=1" = 1\n\n'
        '[[requests]]\npaths = ["/u/a1b2c3d4", "/u/ffff0000"]\n'
    )
    workload = load_workload_file(toml)
    assert workload.requests == (
        RequestSpec(
            path="/items/{int}", weight=3.0, paths=(("/items/1", 5.0), ("/items/2?x=1", 1.0))
        ),
        # Without `path`, the first concrete path names the entry.
        RequestSpec(path="/u/a1b2c3d4", paths=(("/u/a1b2c3d4", 1.0), ("/u/ffff0000", 1.0))),
    )
    js = tmp_path / "w.json"
    js.write_text(json.dumps({"requests": [{"path": "/i/{int}", "paths": {"/i/1": 2}}]}))
    assert load_workload_file(js).requests == (
        RequestSpec(path="/i/{int}", paths=(("/i/1", 2.0),)),
    )


def test_too_many_paths_is_a_config_error() -> None:
    many = tuple((f"/i/{n}", 1.0) for n in range(MAX_PATHS + 1))
    spec = LoadSpec(
        **{**OK, "workload": Workload((RequestSpec(paths=many),)), "load_cpus": (A_CPU,)}
    )
    with pytest.raises(ConfigError, match=f"at most {MAX_PATHS}"):
        spec.validate()


def test_paths_are_sent_in_their_entry_turns_by_weight() -> None:
    items = RequestSpec(path="/items/{int}", weight=3, paths=(("/items/1", 2.0), ("/items/2", 1.0)))
    workload = Workload((items, RequestSpec(path="/b", weight=1)))
    sequence = request_sequence(workload, "127.0.0.1", 80, True)
    assert len(sequence) == 1000
    sent = [r.split(b" ")[1].decode() for r in sequence]
    assert (sent.count("/items/1"), sent.count("/items/2"), sent.count("/b")) == (500, 250, 250)
    assert "/items/{int}" not in sent  # the template names the entry; it is never sent
    assert workload.probe_path == "/items/1"  # nor is it the readiness probe's path
    assert set(sent[:6]) == {"/items/1", "/items/2", "/b"}  # interleaved, not in runs


def test_equal_weights_are_round_robin_and_every_path_comes_round() -> None:
    paths = tuple((f"/i/{n}", 1.0) for n in range(3000))
    workload = Workload((RequestSpec(paths=paths), RequestSpec(path="/other", weight=1)))
    sequence = request_sequence(workload, "127.0.0.1", 80, True)
    sent = [r.split(b" ")[1].decode() for r in sequence]
    assert len(sequence) == 6000  # longer than 1000, so each of the 3000 paths is sent
    replayed = [p for p in sent if p != "/other"]
    assert replayed == [f"/i/{n}" for n in range(3000)]


# -- the client model -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (ClientModel(slow_fraction=1.0), "slow clients 1.0: expected a fraction"),
        (ClientModel(slow_fraction=-0.1), "slow clients -0.1"),
        (ClientModel(slow_fraction=float("nan")), "slow clients nan"),
        (ClientModel(slow_fraction=0.1, slow_kbps=0), "slow client kbps 0"),
        (ClientModel(slow_fraction=0.1, think_ms=-1), "think time -1"),
        (ClientModel(idle_connections=-1), "idle connections -1"),
        (ClientModel(idle_connections=100_000), "idle connections 100000"),
        (ClientModel(slow_fraction=0.9), "leaves 0 fast connection"),
    ],
)
def test_bad_client_models_are_config_errors(model: ClientModel, message: str) -> None:
    spec = LoadSpec(**OK, load_cpus=(A_CPU,), connections=1, clients=model)
    with pytest.raises(ConfigError, match=message):
        spec.validate()


def test_slow_connections_round_the_fraction_and_spread_over_the_workers() -> None:
    model = ClientModel(slow_fraction=0.1)
    assert model.slow_connections(64) == 6
    assert model.slow_connections(4) == 1  # a fraction that rounds to none still gets one
    assert ClientModel().slow_connections(64) == 0
    cpus = tuple(sorted(os.sched_getaffinity(0)))[:2]
    if len(cpus) < 2:
        unavailable("needs two CPUs")
    spec = LoadSpec(
        **OK,
        load_cpus=cpus,
        connections=5,
        clients=ClientModel(slow_fraction=0.2, idle_connections=3),
    )
    spec.validate()
    # (connections, of them slow, idle) per worker: every worker keeps a fast connection.
    assert spec.per_worker() == [(2, 0, 2), (3, 1, 1)]
    assert spec.fast_connections == 4


def test_the_client_model_is_recorded_only_when_set() -> None:
    assert ClientModel().to_dict() is None
    assert ClientModel().describe() == "fast clients only"
    model = ClientModel(slow_fraction=0.1, think_ms=500, idle_connections=50)
    assert model.to_dict() == {
        "slow_fraction": 0.1,
        "slow_kbps": 256.0,
        "think_ms": 500,
        "idle_connections": 50,
    }
    assert model.describe() == (
        "10% slow clients at 256 kbit/s, 500 ms think time; 50 idle connections"
    )


def test_slow_client_options_need_a_fraction() -> None:
    from tuner.commands.options import LoadOptions, client_model_from

    with pytest.raises(ConfigError, match="--think-ms: describes the slow clients"):
        client_model_from(LoadOptions(think_ms=100.0))
    assert client_model_from(LoadOptions(slow_clients=0.1, slow_client_kbps=1000.0)) == ClientModel(
        slow_fraction=0.1, slow_kbps=1000.0
    )


def test_each_request_of_a_mix_carries_its_entry() -> None:
    workload = Workload(
        (RequestSpec(path="/a", weight=3), RequestSpec(path="/b/{int}", paths=(("/b/1", 1.0),)))
    )
    requests, entries = tagged_sequence(workload, "127.0.0.1", 8000, True)
    assert len(requests) == len(entries)
    for request, entry in zip(requests, entries, strict=True):
        assert request.startswith(b"GET /a " if entry == 0 else b"GET /b/1 ")
    assert entries.count(0) == 3 * entries.count(1)
