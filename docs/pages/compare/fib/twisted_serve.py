#!/usr/bin/env python3
# Tuned by tuner 0.1.0 on 2026-12-01 07:31 UTC
# study 'fib-compare-throughput-twisted', trial 9
# app fib:app; workload: GET /9000; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, twisted 26.10.0, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 6,235 / 6,236 / 6,238; p99 ms 21.18 / 22.40 / 23.62; PSS MB 34.0 / 34.3 / 34.6; x1.23 req/s vs default
#   server default  req/s 5,067 / 5,086 / 5,104; p99 ms 25.28 / 26.75 / 28.22; PSS MB 34.1 / 34.4 / 34.8
# verdict: trial 9 beats the default beyond the noise (throughput x1.23; trial 9 6,234.9-6,237.9 req/s vs default 5,067.0-5,104.4 req/s over 2 interleaved rounds)
# noise seen during the study: CPU probe 8.1-8.6 ms (7% range over 3 probes); repeats of one config varied 1% in req/s (median over 4 configs, max 3%)
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
# most threads in the WSGI pool that runs the app (one process)
THREADS = 13
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
