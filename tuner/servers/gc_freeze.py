"""gc.freeze() before fork: a preloaded app's objects kept on the pages its workers share.

A server that imports the app in its master and then forks (gunicorn with preload_app, uWSGI
without lazy-apps) gives its workers the app's objects copy-on-write. CPython's cyclic
collector writes to the header of every object it tracks when it walks them, so the first
collections in each worker copy nearly every page that holds one, and the sharing fades as
the workers serve. The `gc` module's documentation (gc.freeze) gives the recipe: gc.disable()
early in the parent, so that no collection while the app loads frees holes that later
allocations fill (dirtying those pages); gc.freeze() right before fork(), which moves every
tracked object into a permanent generation no collection visits; gc.enable() early in each
child.

What users found (searched in the servers' trackers):
- benoitc/gunicorn#3178 (open): with --preload a large object was shared by sync workers but
  loaded again by each gevent worker; no fix in gunicorn. In the older #1640 (gc.freeze
  support, closed) a maintainer advised calling gc.freeze() from a server hook (on_starting
  or when_ready) with --preload.
- readthedocs/readthedocs.org#13180: preload_app plus gc.freeze() in gunicorn's post_fork
  hook (readthedocs/gunicorn_conf.py), because the first collection in each worker "writes to
  their GC headers, dirtying the copy-on-write pages and undoing the sharing that
  preload_app buys"; a reviewer noted that gunicorn's docs for preload say none of this.

What it costs: cyclic garbage made while the app loads is never collected (it is frozen with
the rest, in every worker's shared pages), nor are cycles among frozen objects that become
garbage later; with gunicorn the master itself never collects again (a HUP reload with
preload keeps the old app's cycles in it).
"""

from __future__ import annotations

# gunicorn.conf.py: `gc.disable()` runs when gunicorn reads the file, before the master
# imports the app (Arbiter.setup, preload_app). The freeze is in `pre_fork`, which the master
# runs right before each os.fork() (Arbiter.spawn_worker; gunicorn's docs: "Called just
# before a worker is forked"), as the gc docs ask, and again for every worker it starts later
# (recycled by max_requests, killed by timeout): `when_ready` runs once, before the first
# fork only. readthedocs froze in `post_fork`, in each worker: that works too, but the
# master's freeze happens once per fork where theirs happens once per worker after it.
GUNICORN_HOOKS = (
    "",
    "# gc_freeze: the objects of the app the master preloads stay on the pages the workers",
    "# share. The master never collects cycles (none while the app loads, so none of its",
    "# pages is freed and refilled), freezes every object before each fork (no collection in a",
    "# worker walks them again, which would copy their pages), and each worker collects again.",
    "import gc",
    "",
    "gc.disable()",
    "",
    "",
    "def pre_fork(server, worker):",
    "    gc.freeze()",
    "",
    "",
    "def post_fork(server, worker):",
    "    gc.enable()",
)


def uwsgi_loader(load_app: str) -> str:
    """uWSGI `eval` code (an app loader, in place of `module`) that runs `load_app` between
    the gc recipe's steps: it is what the master runs before it forks (without lazy-apps).

    uWSGI 2.0 has no Python hook before fork: its hooks (`hook-post-app`) run C actions,
    `import`/`shared-import` modules are imported before the app (plugins/python,
    uwsgi_python_init_apps), and `uwsgi.post_fork_hook` is a single slot that uwsgidecorators
    (imported by apps that use @postfork) also sets. So the collector is enabled again in the
    master right after the freeze, before the fork: the workers inherit it on, and only
    objects made after the app loaded are ever collected.
    """
    return f"import gc; gc.disable(); {load_app}; gc.freeze(); gc.enable()"
