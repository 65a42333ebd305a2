#!/usr/bin/env python3
# Tuned by tuner 0.1.0 on 2026-12-01 08:10 UTC
# study 'iowait-compare-throughput-bjoern', trial 1
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, bjoern 3.2.2, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 47 / 55 / 63; p99 ms 1208.32 / 1282.05 / 1355.78; PSS MB 14.2 / 14.2 / 14.2; xinf req/s vs default
#   server default  req/s 0 / 0 / 0; p99 ms 2499.91 / 2499.95 / 2499.99; PSS MB 9.2 / 9.2 / 9.2
#   2*cpus+1 rule   req/s 47 / 55 / 63; p99 ms 1208.32 / 1282.05 / 1355.78; PSS MB 14.2 / 14.2 / 14.2; xinf req/s vs default
# verdict: 2*cpus+1 is the best usable config (the default could not be used); chosen among 4 configs the noise cannot separate on req/s (trial 2, trial 16, trial 15), as the cheapest: PSS 14.2 vs 14.4 MB for trial 16
# noise seen during the study: CPU probe 7.8-8.6 ms (10% range over 6 probes); repeats of one config varied 19% in req/s (median over 5 configs, max 32%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install bjoern==3.2.2 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
#
# bjoern has no config file and forks nothing itself: this launcher imports the
# app once and runs PROCESSES bjoern processes; SIGTERM or SIGINT stops them all.
# Needs only bjoern (pip install bjoern; it builds against libev).

# Where to listen. EDIT for your deployment (IPv4 only): 127.0.0.1 accepts
# connections from this machine only (e.g. behind nginx).
HOST = '127.0.0.1'
PORT = 8000
# EDIT: the app's folder (the one it was tuned in) and the app in it.
APP_DIR = '/srv/tuner/apps'
APP = 'iowait:app'
# Tuned settings.
# bjoern processes (1 = bjoern alone, no launcher process in front)
PROCESSES = 3
# shared: one socket bound before forking, every process accepts from it; reuseport: each process binds its own SO_REUSEPORT socket and the kernel spreads connections over them
LISTEN = 'shared'
# listen queue length (capped by net.core.somaxconn)
BACKLOG = 1024

import ctypes
import importlib
import os
import signal
import sys
import traceback

import bjoern

PR_SET_PDEATHSIG = 1


def load_app():
    sys.path.insert(0, APP_DIR)
    os.chdir(APP_DIR)
    module, _, name = APP.partition(":")
    return getattr(importlib.import_module(module), name)


def listen(app):
    bjoern.listen(app, HOST, PORT, reuse_port=LISTEN == "reuseport", listen_backlog=BACKLOG)


def serve(parent):
    """Run bjoern in this process until SIGTERM or SIGINT; with a parent, die with it."""
    # bjoern's C loop does not return to Python to run a Python signal handler: the
    # kernel's default action (terminate) it is. bjoern stops on SIGINT by itself.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if parent is not None:
        # The kernel SIGKILLs this process when the launcher dies, even by SIGKILL (Linux).
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)
    try:
        bjoern.run()
    except KeyboardInterrupt:
        pass


def child(app, parent, own_socket):
    code = 1
    try:
        if own_socket:
            listen(app)  # a socket of its own: the kernel spreads connections over them
        serve(parent)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main():
    app = load_app()
    if PROCESSES == 1:
        listen(app)
        serve(None)
        return 0
    own_socket = LISTEN == "reuseport"
    if not own_socket:
        listen(app)  # before forking: every process accepts from this one socket
    children = set()

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    try:
        for _ in range(PROCESSES):
            pid = os.fork()
            if pid == 0:
                child(app, os.getppid(), own_socket)
            children.add(pid)
        pid, status = os.wait()  # returns only when a bjoern process stopped by itself
        children.discard(pid)
        print(f"bjoern process {pid} stopped (wait status {status}); stopping all", flush=True)
        code = 1
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return code


if __name__ == "__main__":
    sys.exit(main())
