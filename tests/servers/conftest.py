"""The contract suite's servers: every registered adapter, plus the tests' own wsgiref (WSGI)
and miniasgi (ASGI) ones.

The tests' adapters join through TUNER_SERVERS, the way a third-party adapter would, so the
`tuner` subprocesses the suite starts see them too.
"""

from __future__ import annotations

import os

from tuner.servers import ENV_VAR

TEST_ADAPTERS = (
    "wsgiref=tests.servers.wsgiref_adapter:WsgirefAdapter",
    "miniasgi=tests.servers.miniasgi_adapter:MiniAsgiAdapter",
)
for test_adapter in TEST_ADAPTERS:
    if test_adapter not in os.environ.get(ENV_VAR, ""):
        os.environ[ENV_VAR] = ",".join(filter(None, (os.environ.get(ENV_VAR), test_adapter)))
