#!/bin/sh
# Tuned by tuner 0.1.0 on 2026-12-01 07:28 UTC
# study 'fib-compare-throughput-waitress', trial 3
# app fib:app; workload: GET /9000; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, waitress 3.0.2, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 10,967 / 11,080 / 11,193; p99 ms 9.44 / 9.92 / 10.40; PSS MB 21.8 / 21.8 / 21.9; x1.44 req/s vs default
#   server default  req/s 7,702 / 7,719 / 7,736; p99 ms 16.10 / 16.13 / 16.16; PSS MB 21.7 / 21.8 / 21.9
# verdict: trial 3 beats the default beyond the noise (throughput x1.44; trial 3 10,966.7-11,192.8 req/s vs default 7,701.8-7,736.4 req/s over 2 interleaved rounds)
# noise seen during the study: CPU probe 7.8-8.0 ms (3% range over 3 probes); repeats of one config varied 6% in req/s (median over 4 configs, max 10%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install waitress==3.0.2 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))
# Run: sh waitress-serve.sh  (with pip install waitress).
# Every tuned setting is on the command line below, defaults included:
#   threads = 2: threads that run the app (one process)
#   connection_limit = 100: open connections at most (the listener and a wake-up pipe count too); past it waitress stops accepting and new clients wait in the backlog
#   backlog = 1024: listen queue length (capped by net.core.somaxconn)
#   channel_timeout = 120: seconds an idle connection stays open (keep-alive)
#   cleanup_interval = 30: seconds between sweeps that close idle connections
#   asyncore_use_poll = False: poll() instead of select() in the I/O loop (select() stops at 1024 descriptors)
#   recv_bytes = 8192: bytes read from a socket per recv() call
#   send_bytes = 18000: bytes of output buffered before the app thread writes them (deprecated; 1 = at once)
#   outbuf_overflow = 1048576: bytes of pending output kept in memory before spilling to a temporary file
#   outbuf_high_watermark = 16777216: bytes of pending output past which the app's response iterator is paused
#   inbuf_overflow = 524288: bytes of a request body kept in memory before spilling to a temporary file
#   channel_request_lookahead = 5: requests read ahead on a busy connection (0 = none; more notices clients that left while their request runs)
# EDIT the app's folder (waitress-serve imports the app from its working
# folder) and --listen for your deployment: 127.0.0.1 accepts connections
# from this machine only (e.g. behind nginx).
cd /srv/tuner/apps || exit 1
exec waitress-serve \
    --listen=127.0.0.1:8000 \
    --threads=2 \
    --connection-limit=100 \
    --backlog=1024 \
    --channel-timeout=120 \
    --cleanup-interval=30 \
    --no-asyncore-use-poll \
    --recv-bytes=8192 \
    --send-bytes=18000 \
    --outbuf-overflow=1048576 \
    --outbuf-high-watermark=16777216 \
    --inbuf-overflow=524288 \
    --channel-request-lookahead=5 \
    fib:app
