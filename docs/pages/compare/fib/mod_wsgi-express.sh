#!/bin/sh
# Tuned by tuner 0.1.0 on 2026-12-01 07:37 UTC
# study 'fib-compare-throughput-mod_wsgi', trial 7
# app fib:app; workload: GET /9000; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, mod_wsgi 6.1.1, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 3,722 / 3,847 / 3,971; p99 ms 23.49 / 30.62 / 37.76; PSS MB 32.7 / 32.7 / 32.7; x1.15 req/s vs default
#   server default  req/s 2,967 / 3,341 / 3,714; p99 ms 41.09 / 266.82 / 492.54; PSS MB 29.8 / 30.1 / 30.5
#   2*cpus+1 rule   req/s 2,210 / 2,925 / 3,640; p99 ms 69.38 / 267.65 / 465.92; PSS MB 74.3 / 74.7 / 75.0; x0.88 req/s vs default
# verdict: trial 7 is the best usable config (the default could not be used)
# noise seen during the study: CPU probe 7.8-242.4 ms (2715% range over 3 probes); repeats of one config varied 6% in req/s (median over 5 configs, max 49%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install mod_wsgi==6.1.1 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
#
# mod_wsgi-express writes an Apache config (in /tmp/mod_wsgi-HOST:PORT:UID unless
# --server-root says otherwise) and runs Apache in the foreground; SIGTERM stops it.
# EDIT --host/--port for your deployment (127.0.0.1 accepts connections from this
# machine only, e.g. behind nginx) and --working-directory/--python-path: the
# app's folder.
set -eu
# Started as root, Apache must switch its children to another user, one that can
# read the app and the Python installation.
if [ "$(id -u)" = 0 ]; then
  set -- --user "${MOD_WSGI_RUN_USER:-www-data}" --group "${MOD_WSGI_RUN_GROUP:-www-data}"
fi
# The app, the address, then the tuned settings (processes=1 and max_clients=0
# are mod_wsgi-express's defaults and left out).
exec mod_wsgi-express start-server \
  --application-type module \
  --entry-point fib \
  --callable-object app \
  --working-directory /srv/tuner/apps \
  --python-path /srv/tuner/apps \
  --host 127.0.0.1 \
  --port 8000 \
  --log-to-terminal \
  --threads 2 \
  --max-clients 256 \
  --server-mpm worker \
  --server-backlog 500 \
  --daemon-backlog 100 \
  --keep-alive-timeout 15 \
  --maximum-requests 10000 \
  --queue-timeout 5 "$@"
