# Tuned by tuner 0.1.0 on 2026-12-01 07:25 UTC
# study 'fib-compare-throughput-gunicorn', trial 0
# app fib:app; workload: GET /9000; 64 connections, closed loop, keep-alive; 0.5 s warm-up + 2 s per run
# machine: AMD EPYC; server pinned to 1 CPU(s) [0], load on [1]
# versions: tuner 0.1.0, gunicorn 27.0.1, python 3.11.7
#
# measured side by side in interleaved rounds (min / median / max):
#   this config     req/s 3,843 / 4,572 / 5,301; p99 ms 20.03 / 25.28 / 30.53; PSS MB 32.1 / 32.2 / 32.2
#   server default  req/s 3,843 / 4,572 / 5,301; p99 ms 20.03 / 25.28 / 30.53; PSS MB 32.1 / 32.2 / 32.2
#   2*cpus+1 rule   req/s 3,139 / 3,721 / 4,303; p99 ms 35.20 / 35.33 / 35.46; PSS MB 62.2 / 62.6 / 63.0; x0.81 req/s vs default
# verdict: trial 14 has the best median (throughput x1.18 the default's) but is not measurably better than the default: the ranges overlap (trial 14 4,989.4-5,783.8 req/s vs default 3,843.4-5,300.9 req/s over 2 interleaved rounds); expect about the default's figures; a difference inside the noise is no difference, so the default is written
# noise seen during the study: CPU probe 9.1-9.4 ms (3% range over 3 probes); repeats of one config varied 25% in req/s (median over 5 configs, max 32%)
#
# Re-tune when the app, the hardware or the traffic changes.
#
# needs: pip install gunicorn==27.0.1 gunicorn_h1c==0.6.10 flask
# (not booted in a clean virtual environment (--no-clean-venv-check))

# Where the app is and where to listen. EDIT chdir (the app's folder on the
# machine it was tuned on) and bind for your deployment: 127.0.0.1 accepts
# connections from this machine only (e.g. behind nginx).
wsgi_app = 'fib:app'
chdir = '/srv/tuner/apps'
bind = ['127.0.0.1:8000']
control_socket_disable = True

# Tuned settings (every one listed, defaults included).
workers = 1  # worker processes
worker_class = 'sync'  # sync: one request at a time per worker; gthread: a thread pool per worker; gevent: greenlets, one per connection (time.sleep and sockets monkey-patched)
threads = 1  # threads per worker (gthread only)
worker_connections = 1000  # max simultaneous clients per worker (gevent and gthread)
keepalive = 2  # seconds to keep an idle keep-alive connection open (the sync worker never keeps connections alive)
max_requests = 0  # restart a worker after N requests; 0 = never
max_requests_jitter = 0  # random 0..N added to max_requests per worker so they do not restart together
backlog = 2048  # listen queue length
accesslog = None  # write an access log line per request (to stdout)
timeout = 30  # seconds a silent worker lives before it is killed and restarted; 0 = never
http_parser = 'auto'  # python: gunicorn's pure-Python HTTP parser; fast: the gunicorn_h1c C parser (picohttpparser); auto: fast where gunicorn_h1c is installed, else python
reuse_port = False  # SO_REUSEPORT: each worker opens its own listening socket and the kernel spreads new connections over them (instead of workers racing on one shared socket)
protocol = 'http'  # http: clients speak HTTP to gunicorn; uwsgi: uWSGI's binary protocol, for nginx's uwsgi_pass in front (not tuned: the tuner has no such front yet)
preload_app = False  # import the app in the master before forking workers (shares memory, faster boot)
