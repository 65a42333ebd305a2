#!/bin/sh
# Tuned by tuner 0.1.0 on 2026-12-01 07:34 UTC
# study 'fib-compare-throughput-granian', trial 4
# app fib:app; workload: GET /9000; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, granian 2.8.9, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 17,768 / 17,891 / 18,014; p99 ms 8.22 / 8.45 / 8.67; PSS MB 45.1 / 45.8 / 46.5; x1.33 req/s vs default
#   server default  req/s 13,031 / 13,431 / 13,830; p99 ms 12.90 / 20.50 / 28.10; PSS MB 57.9 / 64.9 / 71.9
#   2*cpus+1 rule   req/s 9,666 / 12,399 / 15,132; p99 ms 19.01 / 19.71 / 20.42; PSS MB 91.0 / 92.5 / 94.1; x0.92 req/s vs default
# verdict: trial 4 beats the default beyond the noise (throughput x1.33; trial 4 17,768.0-18,013.6 req/s vs default 13,031.3-13,830.3 req/s over 2 interleaved rounds)
# noise seen during the study: CPU probe 8.1-11.4 ms (39% range over 3 probes); repeats of one config varied 6% in req/s (median over 5 configs, max 44%)
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
# Python threads per worker that run the app; 0 = granian's rule, backpressure / 2 (512 with the default backlog)
GRANIAN_BLOCKING_THREADS=8
# Rust runtime threads per worker (network I/O, no Python)
GRANIAN_RUNTIME_THREADS=1
# st: one single-threaded runtime per runtime thread; mt: one multi-threaded runtime; auto = mt for WSGI
GRANIAN_RUNTIME_MODE=auto
# listen queue length (granian's minimum is 128)
GRANIAN_BACKLOG=128
# requests a worker runs at once, the rest wait in the listen queue; 0 = granian's rule, backlog / workers
GRANIAN_BACKPRESSURE=128
# keep HTTP/1.1 connections open between requests
GRANIAN_HTTP1_KEEP_ALIVE=true
# maximum buffer size of an HTTP/1 connection (bytes)
GRANIAN_HTTP1_BUFFER_SIZE=8192
# restart each worker after N seconds; 0 = never (granian's minimum is 60)
GRANIAN_WORKERS_LIFETIME=60
# write an access log line per request
GRANIAN_LOG_ACCESS_ENABLED=false
set +a
# EDIT: the app's folder (the one it was tuned in). granian finds the app from
# its working folder.
cd /srv/tuner/apps
exec granian fib:app
