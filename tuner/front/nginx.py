"""nginx as the front: its config for one trial, the block a study writes, how to run it.

A trial's nginx runs from its own prefix folder (`-p PREFIX -c nginx.conf -g 'daemon off;'`):
its pid file, temp folders and config live there, nothing under /etc/nginx is read and no
root-owned file is left behind. It logs to stderr (the trial's front log) and runs in the
foreground, so the same watchdog that stops the server stops it.

The proxying is configured as production proxies usually are: an `upstream` with keep-alive
connections (HTTP/1.1, `Connection ""`; how many idle ones each worker keeps is the front's
`front_keepalive`), buffering on unless the search turns it off, the usual
forwarded headers; uWSGI's binary protocol goes through `uwsgi_pass` with the parameters
Debian's `uwsgi_params` file sets, and FastCGI through `fastcgi_pass` with those of Debian's
`fastcgi_params`, the site mounted at the root as a WSGI server expects (SCRIPT_NAME empty,
the whole path in PATH_INFO), and nginx's connections to the server kept open
(`fastcgi_keep_conn` with an upstream keepalive) unless the search turns that off.
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

from tuner.errors import ToolMissingError
from tuner.front.config import FrontConfig
from tuner.servers.base import Bind, LaunchSpec, Protocol, StartupSigns, first_version_number

NAME = "nginx"
INSTALL_HINT = "apt-get install nginx (Debian/Ubuntu), or your system's nginx package"
UPSTREAM = "tuner_app"
WORKER_CONNECTIONS = 4096
SIGNS = StartupSigns(
    port_in_use=("Address already in use",),
    rejected_value=("[emerg]", "invalid", "unknown directive"),
)
# Debian's /etc/nginx/uwsgi_params, inlined: the block stands alone.
UWSGI_PARAMS = (
    ("QUERY_STRING", "$query_string"),
    ("REQUEST_METHOD", "$request_method"),
    ("CONTENT_TYPE", "$content_type"),
    ("CONTENT_LENGTH", "$content_length"),
    ("REQUEST_URI", "$request_uri"),
    ("PATH_INFO", "$document_uri"),
    ("DOCUMENT_ROOT", "$document_root"),
    ("SERVER_PROTOCOL", "$server_protocol"),
    ("REQUEST_SCHEME", "$scheme"),
    ("HTTPS", "$https if_not_empty"),
    ("REMOTE_ADDR", "$remote_addr"),
    ("REMOTE_PORT", "$remote_port"),
    ("SERVER_PORT", "$server_port"),
    ("SERVER_NAME", "$server_name"),
)
# Debian's /etc/nginx/fastcgi_params, inlined, except for the script: a WSGI app is mounted at
# the site's root, so SCRIPT_NAME is empty and PATH_INFO holds the whole path (Debian's
# `SCRIPT_NAME $fastcgi_script_name` is for PHP; with it a WSGI server routes every request
# as if to "/"). HTTP_* variables (the request's headers) nginx adds by itself.
FASTCGI_PARAMS = (
    ("QUERY_STRING", "$query_string"),
    ("REQUEST_METHOD", "$request_method"),
    ("CONTENT_TYPE", "$content_type"),
    ("CONTENT_LENGTH", "$content_length"),
    ("SCRIPT_NAME", '""'),
    ("PATH_INFO", "$document_uri"),
    ("REQUEST_URI", "$request_uri"),
    ("DOCUMENT_URI", "$document_uri"),
    ("DOCUMENT_ROOT", "$document_root"),
    ("SERVER_PROTOCOL", "$server_protocol"),
    ("REQUEST_SCHEME", "$scheme"),
    ("HTTPS", "$https if_not_empty"),
    ("GATEWAY_INTERFACE", "CGI/1.1"),
    ("SERVER_SOFTWARE", "nginx/$nginx_version"),
    ("REMOTE_ADDR", "$remote_addr"),
    ("REMOTE_PORT", "$remote_port"),
    ("SERVER_ADDR", "$server_addr"),
    ("SERVER_PORT", "$server_port"),
    ("SERVER_NAME", "$server_name"),
)
TEMP_FOLDERS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def executable() -> str:
    # Debian installs it in /usr/sbin, which a normal user's PATH may lack.
    found = shutil.which(NAME) or shutil.which(NAME, path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise ToolMissingError(f"--front nginx: nginx not found on PATH; {INSTALL_HINT}")
    return found


@functools.cache
def version() -> str:
    """nginx's version, asked once per process (every measurement's context names it)."""
    done = subprocess.run([executable(), "-v"], capture_output=True, text=True, timeout=30)
    return first_version_number(done.stderr + done.stdout)


def upstream_block(bind: Bind, config: FrontConfig) -> list[str]:
    """The `upstream` block: the server's socket, keep-alive connections for HTTP (and for
    FastCGI unless turned off; uwsgi_pass closes its connection after each request), up to
    `config.keepalive` idle ones per nginx worker."""
    where = f"unix:{bind.path}" if bind.path is not None else bind.address()
    lines = [f"upstream {UPSTREAM} {{", f"    server {where} fail_timeout=0;"]
    if config.keeps_connections:
        # Reused connections to the server; HTTP needs HTTP/1.1 and an empty Connection
        # header, FastCGI the keep-conn flag (fastcgi_keep_conn). N idle ones are cached
        # per worker; past N the least recently used is closed (not a cap on connections).
        lines.append(f"    keepalive {config.keepalive};")
    lines.append("}")
    return lines


def location_block(config: FrontConfig) -> list[str]:
    """The `location /` block that passes every request to the upstream."""
    onoff = "on" if config.buffering else "off"
    if config.protocol is Protocol.UWSGI:
        body = [f"    uwsgi_pass {UPSTREAM};", f"    uwsgi_buffering {onoff};"]
        body += [f"    uwsgi_param {key:<16} {value};" for key, value in UWSGI_PARAMS]
    elif config.protocol is Protocol.FASTCGI:
        keep = "on" if config.keep_conn else "off"
        body = [
            f"    fastcgi_pass {UPSTREAM};",
            f"    fastcgi_keep_conn {keep};",
            f"    fastcgi_buffering {onoff};",
        ]
        body += [f"    fastcgi_param {key:<17} {value};" for key, value in FASTCGI_PARAMS]
    else:
        body = [
            f"    proxy_pass http://{UPSTREAM};",
            "    proxy_http_version 1.1;",
            '    proxy_set_header Connection "";',
            f"    proxy_buffering {onoff};",
            "    proxy_set_header Host $http_host;",
            "    proxy_set_header X-Real-IP $remote_addr;",
            "    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
            "    proxy_set_header X-Forwarded-Proto $scheme;",
            "    proxy_redirect off;",
        ]
    return ["location / {", *body, "}"]


def site_block(bind: Bind, config: FrontConfig, listen: str) -> list[str]:
    """upstream + a server that listens on `listen` with the location: what a user includes
    in nginx's `http {}` context."""
    return [
        *upstream_block(bind, config),
        "",
        "server {",
        f"    listen {listen};",
        *(f"    {line}" for line in location_block(config)),
        "}",
    ]


def main_conf(prefix: Path, site: list[str], workers: int) -> str:
    """A whole nginx.conf for a trial or a check: everything under `prefix`, logs to stderr,
    one worker per server CPU, no access log (its cost would be nginx's, not the server's)."""
    user = _user_line()
    temps = [f"    {name}_temp_path {prefix / name};" for name in TEMP_FOLDERS]
    lines = [
        *([user] if user else []),
        f"worker_processes {workers};",
        f"pid {prefix / 'nginx.pid'};",
        "error_log stderr warn;",
        f"events {{ worker_connections {WORKER_CONNECTIONS}; }}",
        "http {",
        "    access_log off;",
        *temps,
        *(f"    {line}" if line else "" for line in site),
        "}",
    ]
    return "\n".join(lines) + "\n"


def _user_line() -> str:
    """Run as root, nginx's workers switch to `nobody`, which may not open the server's unix
    socket or the prefix's temp folders: keep them as the user the tuner runs as."""
    if os.geteuid() != 0:
        return ""
    return f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"


def prepare_prefix(prefix: Path) -> None:
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / "logs").mkdir(exist_ok=True)  # nginx opens PREFIX/logs/error.log before parsing


def launch_spec(prefix: Path, conf_text: str) -> LaunchSpec:
    """nginx in the foreground from `prefix`; SIGTERM is its fast shutdown."""
    conf = prefix / "nginx.conf"
    return LaunchSpec(
        argv=(executable(), "-p", f"{prefix}/", "-c", str(conf), "-g", "daemon off;"),
        env={},
        cwd=str(prefix),
        stop_signal=signal.SIGTERM,
        stop_grace_s=5.0,
        signs=SIGNS,
        files={str(conf): conf_text},
    )


def check_argv(prefix: Path) -> list[str]:
    """`nginx -t` on the prefix's nginx.conf: parses it and opens what it names."""
    return [executable(), "-t", "-q", "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf")]
