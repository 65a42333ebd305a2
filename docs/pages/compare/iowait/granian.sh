#!/bin/sh
# Tuned by tuner 0.1.0 on 2026-12-01 08:08 UTC
# study 'iowait-compare-throughput-granian', trial 0
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, granian 2.8.9, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 1,257 / 1,269 / 1,280; p99 ms 53.12 / 53.50 / 53.89; PSS MB 33.9 / 34.1 / 34.2
#   server default  req/s 1,257 / 1,269 / 1,280; p99 ms 53.12 / 53.50 / 53.89; PSS MB 33.9 / 34.1 / 34.2
#   2*cpus+1 rule   req/s 1,268 / 1,274 / 1,280; p99 ms 54.91 / 55.42 / 55.94; PSS MB 44.1 / 44.3 / 44.4; x1.00 req/s vs default
# verdict: 2*cpus+1 has the best median (throughput x1.00 the default's) but is not measurably better than the default: the ranges overlap (2*cpus+1 1,268.5-1,280.0 req/s vs default 1,257.5-1,280.0 req/s over 2 interleaved rounds); expect about the default's figures; a difference inside the noise is no difference, so the default is written
# noise seen during the study: CPU probe 8.4-9.0 ms (8% range over 3 probes); repeats of one config varied 7% in req/s (median over 5 configs, max 10%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install granian==2.8.9 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
#
# granian reads no config file: its settings are the GRANIAN_* variables below.
# The KEY=value lines work unchanged in a systemd EnvironmentFile= or a
# docker --env-file, with the last line as the command.
set -eu
set -a  # export every variable assigned below
# Where to listen. EDIT for your deployment: 127.0.0.1 accepts connections from
# this machine only (e.g. behind nginx).
GRANIAN_INTERFACE=wsgi
GRANIAN_HOST=127.0.0.1
GRANIAN_PORT=8000
# Tuned settings (a setting left at granian's own rule is not set).
# worker processes
GRANIAN_WORKERS=1
# Rust runtime threads per worker (network I/O, no Python)
GRANIAN_RUNTIME_THREADS=1
# st: one single-threaded runtime per runtime thread; mt: one multi-threaded runtime; auto = mt for WSGI
GRANIAN_RUNTIME_MODE=auto
# listen queue length (granian's minimum is 128)
GRANIAN_BACKLOG=1024
# keep HTTP/1.1 connections open between requests
GRANIAN_HTTP1_KEEP_ALIVE=true
# maximum buffer size of an HTTP/1 connection (bytes)
GRANIAN_HTTP1_BUFFER_SIZE=417792
# write an access log line per request
GRANIAN_LOG_ACCESS_ENABLED=false
set +a
# EDIT: the app's folder (the one it was tuned in). granian finds the app from
# its working folder.
cd /srv/tuner/apps
exec granian iowait:app
