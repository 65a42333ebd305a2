"""`tuner workload from-log`: access logs as written by nginx and gunicorn -> workload files."""

# ruff: noqa: E501 (log lines are as long as servers write them)

from __future__ import annotations

import gzip

import pytest

from tuner.cli import main
from tuner.loadgen import RequestSpec, load_workload_file
from tuner.workload import id_kind, template_key
from tuner.workload.templates import fold

# nginx `combined`, as nginx writes it: `\xHH` escapes in the request line, a TLS handshake
# sent to the HTTP port, a request line of "-" (nothing read), a line cut short by a crash, and
# a `main`-style line with $http_x_forwarded_for appended.
NGINX = r"""203.0.113.9 - - [12/Mar/2025:10:00:01 +0100] "GET /api/users/1042 HTTP/1.1" 200 512 "https://example.com/" "Mozilla/5.0 (X11; Linux x86_64)"
203.0.113.9 - alice [12/Mar/2025:10:00:02 +0100] "GET /api/users/77?expand=orders HTTP/1.1" 200 2048 "-" "curl/8.5.0"
203.0.113.9 - - [12/Mar/2025:10:00:02 +0100] "GET /api/users/1042 HTTP/1.1" 200 512 "-" "curl/8.5.0"
198.51.100.4 - - [12/Mar/2025:10:00:03 +0100] "GET /files/3f2504e0-4f89-11d3-9a0c-0305e82c3301/download HTTP/2.0" 200 10240 "-" "curl/8.5.0"
198.51.100.4 - - [12/Mar/2025:10:00:03 +0100] "GET /files/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d/download HTTP/2.0" 200 10240 "-" "curl/8.5.0"
198.51.100.4 - - [12/Mar/2025:10:00:04 +0100] "GET /commits/5f2b9c1e HTTP/1.1" 200 99 "-" "git/2.43"
198.51.100.4 - - [12/Mar/2025:10:00:04 +0100] "GET /commits/a3e8d07f HTTP/1.1" 200 99 "-" "git/2.43"
198.51.100.4 - - [12/Mar/2025:10:00:05 +0100] "GET /api/v2/status HTTP/1.1" 200 2 "-" "probe"
198.51.100.4 - - [12/Mar/2025:10:00:05 +0100] "GET /users/alice HTTP/1.1" 200 700 "-" "Mozilla/5.0"
198.51.100.4 - - [12/Mar/2025:10:00:05 +0100] "GET /users/bob HTTP/1.1" 200 700 "-" "Mozilla/5.0"
198.51.100.4 - - [12/Mar/2025:10:00:06 +0100] "GET /search?q=\x22wsgi\x22 HTTP/1.1" 200 900 "-" "Mozilla/5.0"
198.51.100.4 - - [12/Mar/2025:10:00:06 +0100] "GET /search?q=gunicorn HTTP/1.1" 200 900 "-" "Mozilla/5.0"
198.51.100.4 - - [12/Mar/2025:10:00:06 +0100] "HEAD / HTTP/1.1" 200 0 "-" "uptime"
198.51.100.4 - - [12/Mar/2025:10:00:07 +0100] "POST /api/users HTTP/1.1" 201 31 "-" "curl/8.5.0"
198.51.100.4 - - [12/Mar/2025:10:00:07 +0100] "DELETE /api/users/77 HTTP/1.1" 204 0 "-" "curl/8.5.0"
198.51.100.4 - - [12/Mar/2025:10:00:08 +0100] "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" 400 157 "-" "-"
198.51.100.4 - - [12/Mar/2025:10:00:08 +0100] "-" 400 0 "-" "-"
198.51.100.4 - - [12/Mar/2025:10:00:0
198.51.100.4 - - [12/Mar/2025:10:00:09 +0100] "GET /static/app.3f2a9c1b.js HTTP/1.1" 200 5120 "-" "Mozilla/5.0" "192.0.2.1"
198.51.100.4 - - [12/Mar/2025:10:00:09 +0100] "GET /caf%C3%A9 HTTP/1.1" 200 5 "-" "Mozilla/5.0"
198.51.100.4 - - [12/Mar/2025:10:00:09 +0100] "GET /\xC3\xA9t\xC3\xA9 HTTP/1.1" 404 5 "-" "Mozilla/5.0"

"""

# gunicorn 27's default `access_log_format`: `%(b)s` is "-" for an empty body.
GUNICORN = """127.0.0.1 - - [12/Mar/2025:10:00:01 +0000] "GET /orders/order-1234 HTTP/1.1" 200 11 "-" "python-httpx/0.27.0"
127.0.0.1 - - [12/Mar/2025:10:00:01 +0000] "GET /orders/order-1235 HTTP/1.1" 200 11 "-" "python-httpx/0.27.0"
127.0.0.1 - - [12/Mar/2025:10:00:01 +0000] "GET /orders/order-1234 HTTP/1.1" 304 - "-" "python-httpx/0.27.0"
[2025-03-12 10:00:00 +0000] [4242] [INFO] Booting worker with pid: 4242
127.0.0.1 - - [12/Mar/2025:10:00:02 +0000] "GET /v/dQw4w9WgXcQ7aZ HTTP/1.1" 200 11 "-" "-"
127.0.0.1 - - [12/Mar/2025:10:00:02 +0000] "GET /v/Xk2pL9mQr4TzB8 HTTP/1.1" 200 11 "-" "-"
127.0.0.1 - - [12/Mar/2025:10:00:02 +0000] "OPTIONS /api HTTP/1.1" 200 - "-" "-"
"""


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(["workload", "from-log", *args])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def workload_of(tmp_path, capsys, text: str, *args: str) -> tuple[dict, str]:
    """Run from-log on `text`; the written workload's entries by path, and stderr."""
    log = tmp_path / "access.log"
    log.write_text(text, encoding="utf-8")
    out = tmp_path / "workload.toml"
    code, stdout, stderr = run(capsys, str(log), "--out", str(out), *args)
    assert code == 0, stderr
    assert stdout == ""
    return {r.path: r for r in load_workload_file(out).requests}, stderr


@pytest.mark.parametrize(
    ("segment", "kind"),
    [
        ("42", "int"),
        ("0007", "int"),
        ("3f2504e0-4f89-11d3-9a0c-0305e82c3301", "uuid"),
        ("3F2504E0-4F89-11D3-9A0C-0305E82C3301", "uuid"),
        ("5f2b9c1e", "hex"),
        ("507f1f77bcf86cd799439011", "hex"),  # a MongoDB ObjectId
        ("9C0FFEE1D", "hex"),
        ("order-1234", "slug"),
        ("tune-gunicorn-42", "slug"),
        ("2024-01-15", "slug"),
        ("dQw4w9WgXcQ7", "token"),
        ("deadbeef", None),  # hex letters, but a word: no digit
        ("5f2B9c1e", None),  # mixed-case hex is not a hash
        ("v2", None),
        ("api", None),
        ("alice", None),
        ("app.3f2a9c1b.js", None),  # never part of a segment
        ("42.json", None),
        ("python3", None),
        ("how-to-tune", None),
        ("dqw4w9wgxcq7", None),  # lower-case only: could be a slug-like word
        ("", None),
    ],
)
def test_id_shapes(segment: str, kind: str | None) -> None:
    assert id_kind(segment) == kind


def test_only_segments_that_differ_are_folded() -> None:
    assert template_key("/a/1/b/2?x=1") == "/a/{int}/b/{int}"
    assert fold(["/a/1/b/2", "/a/1/b/3?x=1"]) == "/a/1/b/{int}"
    assert fold(["/items/42"]) == "/items/42"  # seen once: nothing says it is an ID


def test_nginx_combined_log(tmp_path, capsys) -> None:
    entries, stderr = workload_of(tmp_path, capsys, NGINX)
    assert entries["/api/users/{int}"] == RequestSpec(
        path="/api/users/{int}",
        weight=3,
        paths=(("/api/users/1042", 2.0), ("/api/users/77?expand=orders", 1.0)),
    )
    assert entries["/files/{uuid}/download"].weight == 2
    assert [p for p, _ in entries["/commits/{hex}"].paths] == [
        "/commits/5f2b9c1e",
        "/commits/a3e8d07f",
    ]
    # Not ID-shaped, or seen with one value: kept as they were.
    for literal in ["/api/v2/status", "/users/alice", "/users/bob", "/static/app.3f2a9c1b.js"]:
        assert entries[literal] == RequestSpec(path=literal, weight=1)
    # Query strings are kept: one template, replayed with each query (nginx escapes decoded).
    assert entries["/search"].paths == (('/search?q="wsgi"', 1.0), ("/search?q=gunicorn", 1.0))
    assert entries["/caf%C3%A9"].weight == 1  # percent-encoded: sent as logged
    assert len(entries) == 9
    # One line each: malformed lines, then what was not replayed and why, then the summary.
    lines = stderr.splitlines()
    assert lines[0].startswith("warning: 1 of 21 lines of ")
    assert "(first: line 18)" in lines[0]
    assert lines[1].startswith("note: not replayed: 2 POST/PUT/PATCH/DELETE")
    assert "1 HEAD" in lines[1] and "2 request lines that are not HTTP" in lines[1]
    assert "1 targets that are not a plain ASCII path" in lines[1]
    assert lines[2].startswith("wrote ") and "9 of 9 templates" in lines[2]
    assert "covering 14 of 14 replayable requests" in lines[2]


def test_gunicorn_default_format(tmp_path, capsys) -> None:
    entries, stderr = workload_of(tmp_path, capsys, GUNICORN)
    assert entries["/orders/{slug}"].paths == (
        ("/orders/order-1234", 2.0),
        ("/orders/order-1235", 1.0),
    )
    assert entries["/v/{token}"].weight == 2
    assert entries["/api"] == RequestSpec(method="OPTIONS", path="/api", weight=1)
    # gunicorn's own log line, where the access log goes to the same file.
    assert "1 of 7 lines" in stderr and "(first: line 4)" in stderr


def test_sample_keeps_the_most_frequent_templates(tmp_path, capsys) -> None:
    entries, stderr = workload_of(tmp_path, capsys, NGINX, "--sample", "2")
    assert list(entries) == ["/api/users/{int}", "/commits/{hex}"]  # 3, then 2 (ties by name)
    assert "2 of 9 templates, covering 5 of 14 replayable requests (35.7%)" in stderr


def test_max_values_keeps_the_weight_of_the_whole_template(tmp_path, capsys) -> None:
    entries, _ = workload_of(tmp_path, capsys, NGINX, "--max-values", "1")
    # One value left: a plain entry, still weighing all three requests of the template.
    assert entries["/api/users/1042"] == RequestSpec(path="/api/users/1042", weight=3)
    assert (
        "# the 1 most frequent of 2 distinct paths" not in (tmp_path / "workload.toml").read_text()
    )


def test_drop_query(tmp_path, capsys) -> None:
    entries, _ = workload_of(tmp_path, capsys, NGINX, "--drop-query")
    assert entries["/search"] == RequestSpec(path="/search", weight=2)
    assert entries["/api/users/{int}"].paths == (("/api/users/1042", 2.0), ("/api/users/77", 1.0))


def test_unsafe_methods_only_on_request(tmp_path, capsys) -> None:
    entries, stderr = workload_of(tmp_path, capsys, NGINX, "--unsafe")
    assert entries["/api/users"] == RequestSpec(method="POST", path="/api/users", weight=1)
    assert entries["/api/users/77"] == RequestSpec(method="DELETE", path="/api/users/77", weight=1)
    assert "POST" not in stderr.splitlines()[1]  # no longer among the skipped


def test_prints_to_stdout_without_out(tmp_path, capsys) -> None:
    log = tmp_path / "access.log"
    log.write_text(GUNICORN)
    code, stdout, stderr = run(capsys, str(log))
    assert code == 0
    assert stdout.startswith("# Workload from the access log")
    assert '[[requests]]\nmethod = "GET"\npath = "/orders/{slug}"\nweight = 3\n' in stdout
    assert "wrote" not in stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no lines to read"),
        ("\n\n", "no lines to read"),
        ("hello\nworld\n", "none of its 2 lines is in the nginx combined or gunicorn access"),
        (
            '1.2.3.4 - - [12/Mar/2025:10:00:07 +0100] "POST /a HTTP/1.1" 201 2 "-" "-"\n',
            "no request to replay; not replayed: 1 POST/PUT/PATCH/DELETE",
        ),
    ],
)
def test_nothing_to_replay_is_one_line_exit_2(tmp_path, capsys, text, message) -> None:
    log = tmp_path / "access.log"
    log.write_text(text)
    code, stdout, stderr = run(capsys, str(log), "--out", str(tmp_path / "w.toml"))
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and message in stderr
    assert not (tmp_path / "w.toml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sample", "0"], "--sample: '0': expected an integer >= 1"),
        (["--max-values", "10001"], "--max-values: '10001': expected an integer 1-10000"),
        (["--out", "/nonexistent/dir/w.toml"], "--out /nonexistent/dir/w.toml: cannot write"),
    ],
)
def test_bad_options_are_one_line_exit_2(tmp_path, capsys, args, message) -> None:
    log = tmp_path / "access.log"
    log.write_text(GUNICORN)
    code, stdout, stderr = run(capsys, str(log), *args)
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and message in stderr


def test_gzipped_log(tmp_path, capsys) -> None:
    log = tmp_path / "access.log.2.gz"
    log.write_bytes(gzip.compress(GUNICORN.encode()))
    code, stdout, _ = run(capsys, str(log))
    assert code == 0 and 'path = "/orders/{slug}"' in stdout
    log.write_bytes(gzip.compress(GUNICORN.encode())[:40])
    code, _, stderr = run(capsys, str(log))
    assert code == 2 and stderr.startswith(f"error: access log {log}: cannot read it (")
    assert stderr.count("\n") == 1
