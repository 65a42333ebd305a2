# Tuned by tuner 0.1.0 on 2026-12-01 07:59 UTC
# study 'iowait-compare-throughput-gunicorn', trial 12
# app iowait:app; workload: GET /; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, gunicorn 27.0.1, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 1,248 / 1,256 / 1,264; p99 ms 51.84 / 52.35 / 52.86; PSS MB 42.9 / 43.2 / 43.5; x62.80 req/s vs default
#   server default  req/s 20 / 20 / 20; p99 ms 2498.56 / 2498.56 / 2498.56; PSS MB 21.0 / 21.0 / 21.0
#   2*cpus+1 rule   req/s 60 / 60 / 60; p99 ms 1118.21 / 1120.57 / 1122.92; PSS MB 29.2 / 29.2 / 29.2; x3.00 req/s vs default
# verdict: trial 12, default logging beats the default beyond the noise (throughput x62.80; trial 12, default logging 1,247.9-1,264.0 req/s vs default 20.0-20.0 req/s over 2 interleaved rounds); chosen among 3 configs the noise cannot separate on req/s (trial 12, trial 13), as the cheapest: PSS 43.2 vs 45.2 MB for trial 13
# noise seen during the study: CPU probe 7.9-9.0 ms (13% range over 3 probes); repeats of one config varied 1% in req/s (median over 6 configs, max 28%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install gunicorn==27.0.1 gunicorn_h1c==0.6.10 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))

# Where the app is and where to listen. EDIT chdir (the app's folder on the
# machine it was tuned on) and bind for your deployment: 127.0.0.1 accepts
# connections from this machine only (e.g. behind nginx).
wsgi_app = 'iowait:app'
chdir = '/srv/tuner/apps'
bind = ['127.0.0.1:8000']
control_socket_disable = True

# Tuned settings (every one listed, defaults included).
workers = 5  # worker processes
worker_class = 'gthread'  # sync: one request at a time per worker; gthread: a thread pool per worker; gevent: greenlets, one per connection (time.sleep and sockets monkey-patched)
threads = 30  # threads per worker (gthread only)
worker_connections = 1000  # max simultaneous clients per worker (gevent and gthread)
keepalive = 5  # seconds to keep an idle keep-alive connection open (the sync worker never keeps connections alive)
max_requests = 1000  # restart a worker after N requests; 0 = never
max_requests_jitter = 200  # random 0..N added to max_requests per worker so they do not restart together
backlog = 2048  # listen queue length
accesslog = None  # write an access log line per request (to stdout)
timeout = 30  # seconds a silent worker lives before it is killed and restarted; 0 = never
http_parser = 'auto'  # python: gunicorn's pure-Python HTTP parser; fast: the gunicorn_h1c C parser (picohttpparser); auto: fast where gunicorn_h1c is installed, else python
reuse_port = False  # SO_REUSEPORT: each worker opens its own listening socket and the kernel spreads new connections over them (instead of workers racing on one shared socket)
protocol = 'http'  # http: clients speak HTTP to gunicorn; uwsgi: uWSGI's binary protocol, for nginx's uwsgi_pass in front (not tuned: the tuner has no such front yet)
preload_app = False  # import the app in the master before forking workers (shares memory, faster boot)
