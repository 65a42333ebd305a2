#!/bin/sh
# Tuned by tuner 0.1.0 on 2026-12-01 08:03 UTC
# study 'iowait-compare-throughput-waitress', trial 10
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, waitress 3.0.2, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 1,247 / 1,253 / 1,260; p99 ms 57.73 / 68.93 / 80.13; PSS MB 11.8 / 11.9 / 11.9; x15.67 req/s vs default
#   server default  req/s 80 / 80 / 80; p99 ms 808.96 / 813.06 / 817.15; PSS MB 10.7 / 10.7 / 10.7
# verdict: trial 10 beats the default beyond the noise (throughput x15.67; trial 10 1,247.0-1,260.0 req/s vs default 80.0-80.0 req/s over 2 interleaved rounds)
# noise seen during the study: CPU probe 9.1-15.8 ms (54% range over 3 probes); repeats of one config varied 0% in req/s (median over 4 configs, max 1%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install waitress==3.0.2 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
# Run: sh waitress-serve.sh  (with pip install waitress).
# Every tuned setting is on the command line below, defaults included:
#   threads = 63: threads that run the app (one process)
#   connection_limit = 1000: open connections at most (the listener and a wake-up pipe count too); past it waitress stops accepting and new clients wait in the backlog
#   backlog = 1024: listen queue length (capped by net.core.somaxconn)
#   channel_timeout = 120: seconds an idle connection stays open (keep-alive)
#   cleanup_interval = 30: seconds between sweeps that close idle connections
#   asyncore_use_poll = False: poll() instead of select() in the I/O loop (select() stops at 1024 descriptors)
#   recv_bytes = 8192: bytes read from a socket per recv() call
#   send_bytes = 1: bytes of output buffered before the app thread writes them (deprecated; 1 = at once)
#   outbuf_overflow = 1048576: bytes of pending output kept in memory before spilling to a temporary file
#   outbuf_high_watermark = 16777216: bytes of pending output past which the app's response iterator is paused
#   inbuf_overflow = 524288: bytes of a request body kept in memory before spilling to a temporary file
#   channel_request_lookahead = 0: requests read ahead on a busy connection (0 = none; more notices clients that left while their request runs)
# EDIT the app's folder (waitress-serve imports the app from its working
# folder) and --listen for your deployment: 127.0.0.1 accepts connections
# from this machine only (e.g. behind nginx).
cd /srv/tuner/apps || exit 1
exec waitress-serve \
    --listen=127.0.0.1:8000 \
    --threads=63 \
    --connection-limit=1000 \
    --backlog=1024 \
    --channel-timeout=120 \
    --cleanup-interval=30 \
    --no-asyncore-use-poll \
    --recv-bytes=8192 \
    --outbuf-overflow=1048576 \
    --outbuf-high-watermark=16777216 \
    --inbuf-overflow=524288 \
    --channel-request-lookahead=0 \
    iowait:app
