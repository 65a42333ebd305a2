#!/bin/sh
# Tuned by tuner 0.1.0 on 2026-12-01 08:12 UTC
# study 'iowait-compare-throughput-mod_wsgi', trial 12
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, mod_wsgi 6.1.1, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 1,147 / 1,151 / 1,155; p99 ms 612.35 / 653.31 / 694.27; PSS MB 42.2 / 42.5 / 42.7; x11.51 req/s vs default
#   server default  req/s 100 / 100 / 100; p99 ms 2498.56 / 2498.56 / 2498.56; PSS MB 15.9 / 16.3 / 16.7
#   2*cpus+1 rule   req/s 300 / 300 / 300; p99 ms 1724.42 / 2111.49 / 2498.56; PSS MB 35.1 / 35.3 / 35.5; x3.00 req/s vs default
# verdict: trial 12 is the best usable config (the default could not be used)
# noise seen during the study: CPU probe 7.9-8.4 ms (7% range over 3 probes); repeats of one config varied 1% in req/s (median over 5 configs, max 56%)
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
  --entry-point iowait \
  --callable-object app \
  --working-directory /srv/tuner/apps \
  --python-path /srv/tuner/apps \
  --host 127.0.0.1 \
  --port 8000 \
  --log-to-terminal \
  --processes 3 \
  --threads 54 \
  --server-mpm worker \
  --server-backlog 500 \
  --daemon-backlog 500 \
  --keep-alive-timeout 15 \
  --maximum-requests 0 \
  --queue-timeout 5 "$@"
