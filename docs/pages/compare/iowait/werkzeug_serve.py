#!/usr/bin/env python3
# NOT FOR PRODUCTION: this runs werkzeug's development server (what `flask run`
# starts). It is a baseline to compare real servers against; deploy one of those.
# Tuned by tuner 0.1.0 on 2026-12-01 08:07 UTC
# study 'iowait-compare-throughput-werkzeug', trial 1
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, werkzeug 3.1.8, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 560 / 912 / 1,263; p99 ms 55.42 / 458.82 / 862.21; PSS MB 18.4 / 19.0 / 19.7; x46.16 req/s vs default
#   server default  req/s 19 / 20 / 20; p99 ms 2498.56 / 2498.56 / 2498.56; PSS MB 16.7 / 17.0 / 17.3
# verdict: flask run beats the default beyond the noise (throughput x46.16; flask run 560.5-1,263.0 req/s vs default 19.5-20.0 req/s over 2 interleaved rounds)
# noise seen during the study: CPU probe 7.7-8.6 ms (12% range over 6 probes); repeats of one config varied 11% in req/s (median over 5 configs, max 102%)
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
# single: one request at a time (run_simple's default); threaded: a thread per connection (flask
# run's default); processes: a forked child per connection
MODE = 'threaded'
# forked children at once (mode=processes only)
PROCESSES = 1
# a log line per request on stderr
REQUEST_LOG = True
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
