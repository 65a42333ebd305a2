#!/usr/bin/env python3
# Tuned by tuner 0.1.0 on 2026-12-01 08:04 UTC
# study 'iowait-compare-throughput-cheroot', trial 13
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, cheroot 11.1.2, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 1,120 / 1,120 / 1,120; p99 ms 94.46 / 95.49 / 96.51; PSS MB 16.4 / 16.6 / 16.9; x5.60 req/s vs default
#   server default  req/s 200 / 200 / 200; p99 ms 2498.56 / 2498.56 / 2498.56; PSS MB 15.2 / 15.5 / 15.8
# verdict: trial 13 beats the default beyond the noise (throughput x5.60; trial 13 1,119.9-1,120.0 req/s vs default 200.0-200.0 req/s over 2 interleaved rounds)
# noise seen during the study: CPU probe 7.7-7.9 ms (2% range over 3 probes); repeats of one config varied 0% in req/s (median over 4 configs, max 0%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install cheroot==11.1.2 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
# Run: python3 cheroot_serve.py  (with pip install cheroot).

import importlib
import os
import sys
import traceback

# EDIT for your deployment: the app's folder, and where to listen (127.0.0.1 accepts
# connections from this machine only, e.g. behind nginx).
APP_DIR = '/srv/tuner/apps'
HOST = '127.0.0.1'
PORT = 8000
APP = 'iowait:app'

sys.path.insert(0, APP_DIR)
os.chdir(APP_DIR)
try:
    module_name, _, callable_name = APP.partition(":")
    app = getattr(importlib.import_module(module_name), callable_name)
except Exception:
    traceback.print_exc()
    sys.exit(4)

# Tuned settings (every one listed, defaults included).
# worker threads that run requests (one process)
THREADS = 56
# upper bound of the pool (-1 = none); cheroot never grows the pool by itself, so only `threads`
# decides how many run
MAX_THREADS = -1
# listen backlog (socket.listen); the default 5 overflows as soon as more clients connect at
# once, and their SYNs are retried a second later
REQUEST_QUEUE_SIZE = 127
# idle keep-alive connections kept open at most; past it each response closes its connection (0
# = no limit)
KEEP_ALIVE_CONN_LIMIT = 100
# connections with a request waiting for a thread at most (-1 = no limit)
ACCEPTED_QUEUE_SIZE = 64
# seconds a connection may stay silent before it is closed
TIMEOUT = 10
# seconds between sweeps for expired idle connections
EXPIRATION_INTERVAL = 5.0
# TCP_NODELAY on accepted connections
NODELAY = True

from cheroot import wsgi

server = wsgi.Server(
    (HOST, PORT),
    app,
    numthreads=THREADS,
    max=MAX_THREADS,
    request_queue_size=REQUEST_QUEUE_SIZE,
    timeout=TIMEOUT,
    accepted_queue_size=ACCEPTED_QUEUE_SIZE,
)
# Only settable from Python: cheroot's command line has no flag for these.
server.keep_alive_conn_limit = KEEP_ALIVE_CONN_LIMIT or None  # 0 = no limit
server.expiration_interval = EXPIRATION_INTERVAL
server.nodelay = NODELAY
print(f"cheroot serving on http://{HOST}:{PORT}", flush=True)
server.safe_start()
