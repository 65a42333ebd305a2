#!/usr/bin/env python3
# Tuned by tuner 0.1.0 on 2026-12-01 07:29 UTC
# study 'fib-compare-throughput-cheroot', trial 7
# app fib:app; workload: GET /9000; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, cheroot 11.1.2, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 8,008 / 8,148 / 8,287; p99 ms 24.13 / 24.45 / 24.77; PSS MB 23.0 / 23.2 / 23.3; x1.28 req/s vs default
#   server default  req/s 6,181 / 6,384 / 6,587; p99 ms 8.80 / 10.27 / 11.74; PSS MB 23.4 / 23.8 / 24.2
# verdict: trial 7 is the best usable config (the default could not be used)
# noise seen during the study: CPU probe 8.2-11.0 ms (32% range over 3 probes); repeats of one config varied 3% in req/s (median over 4 configs, max 6%)
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
APP = 'fib:app'

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
THREADS = 6
# upper bound of the pool (-1 = none); cheroot never grows the pool by itself, so only `threads`
# decides how many run
MAX_THREADS = -1
# listen backlog (socket.listen); the default 5 overflows as soon as more clients connect at
# once, and their SYNs are retried a second later
REQUEST_QUEUE_SIZE = 1024
# idle keep-alive connections kept open at most; past it each response closes its connection (0
# = no limit)
KEEP_ALIVE_CONN_LIMIT = 0
# connections with a request waiting for a thread at most (-1 = no limit)
ACCEPTED_QUEUE_SIZE = 64
# seconds a connection may stay silent before it is closed
TIMEOUT = 10
# seconds between sweeps for expired idle connections
EXPIRATION_INTERVAL = 0.5
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
