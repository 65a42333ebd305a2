#!/usr/bin/env python3
# NOT FOR PRODUCTION: this runs werkzeug's development server (what `flask run`
# starts). It is a baseline to compare real servers against; deploy one of those.
# Tuned by tuner 0.1.0 on 2026-12-01 07:32 UTC
# study 'fib-compare-throughput-werkzeug', trial 8
# app fib:app; workload: GET /9000; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, werkzeug 3.1.8, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 2,009 / 3,212 / 4,416; p99 ms 32.45 / 38.30 / 44.16; PSS MB 21.1 / 21.1 / 21.2; x3.94 req/s vs default
#   server default  req/s 130 / 815 / 1,500; p99 ms 67.33 / 1002.16 / 1936.98; PSS MB 21.2 / 21.3 / 21.3
# verdict: trial 8 is the best usable config (the default could not be used)
# noise seen during the study: CPU probe 8.8-20.3 ms (86% range over 6 probes); repeats of one config varied 62% in req/s (median over 5 configs, max 168%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install werkzeug==3.1.8 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
# Run: python3 werkzeug_serve.py  (with pip install werkzeug).

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
# single: one request at a time (run_simple's default); threaded: a thread per connection (flask
# run's default); processes: a forked child per connection
MODE = 'single'
# forked children at once (mode=processes only)
PROCESSES = 1
# a log line per request on stderr
REQUEST_LOG = False
# listen queue length (capped by net.core.somaxconn)
BACKLOG = 128

import logging

from werkzeug.serving import BaseWSGIServer, run_simple

# Read when the socket starts listening, so set on the class before the server is made.
BaseWSGIServer.request_queue_size = BACKLOG
if not REQUEST_LOG:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
print(f"werkzeug serving on http://{HOST}:{PORT}", flush=True)
run_simple(
    HOST,
    PORT,
    app,
    threaded=MODE == "threaded",
    processes=PROCESSES if MODE == "processes" else 1,
)
