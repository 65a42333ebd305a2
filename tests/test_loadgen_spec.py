"""LoadSpec / workload validation and request building (no server needed)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import unavailable
from tuner.errors import ConfigError
from tuner.loadgen import LoadSpec, RequestSpec, Workload, load_workload_file
from tuner.loadgen.http import build_request, request_sequence

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
