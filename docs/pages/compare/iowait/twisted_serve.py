#!/usr/bin/env python3
# Tuned by tuner 0.1.0 on 2026-12-01 08:05 UTC
# study 'iowait-compare-throughput-twisted', trial 12
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, twisted 26.10.0, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 1,236 / 1,238 / 1,240; p99 ms 75.01 / 76.80 / 78.59; PSS MB 27.8 / 28.0 / 28.1; x3.10 req/s vs default
#   server default  req/s 400 / 400 / 400; p99 ms 196.10 / 198.66 / 201.22; PSS MB 26.6 / 26.7 / 26.9
# verdict: trial 12 beats the default beyond the noise (throughput x3.10; trial 12 1,236.5-1,240.0 req/s vs default 400.0-400.0 req/s over 2 interleaved rounds)
# noise seen during the study: CPU probe 7.8-9.1 ms (16% range over 3 probes); repeats of one config varied 0% in req/s (median over 4 configs, max 0%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install twisted==26.10.0 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
# Run: python3 twisted_serve.py  (with pip install twisted).

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
# most threads in the WSGI pool that runs the app (one process)
THREADS = 62
# threads the pool keeps when idle (capped at threads)
MIN_THREADS = 5
# listen queue length (capped by net.core.somaxconn)
BACKLOG = 50
# an access log line per request on stdout (twist web)
ACCESSLOG = False
# seconds a connection may stay idle before it is closed (Site.timeOut)
TIMEOUT = 60

from twisted.internet import reactor
from twisted.logger import globalLogBeginner, textFileLogObserver
from twisted.python.threadpool import ThreadPool
from twisted.web.server import Site
from twisted.web.wsgi import WSGIResource

globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stdout)])


class QuietSite(Site):
    def log(self, request):
        pass  # no access log line


pool = ThreadPool(
    minthreads=min(MIN_THREADS, THREADS),
    maxthreads=THREADS,
    name="wsgi",
)
reactor.callWhenRunning(pool.start)
reactor.addSystemEventTrigger("after", "shutdown", pool.stop)
site = (Site if ACCESSLOG else QuietSite)(WSGIResource(reactor, pool, app))
site.timeOut = TIMEOUT
reactor.listenTCP(PORT, site, backlog=BACKLOG, interface=HOST)
print(f"twisted serving on http://{HOST}:{PORT}", flush=True)
reactor.run()
