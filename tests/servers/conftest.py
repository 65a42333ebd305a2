"""The contract suite's servers: every registered adapter, plus the tests' own wsgiref one.

The wsgiref adapter joins through TUNER_SERVERS, the way a third-party adapter would, so the
`tuner` subprocesses the suite starts see it too.
"""

from __future__ import annotations

import os

from tuner.servers import ENV_VAR

TEST_ADAPTER = "wsgiref=tests.servers.wsgiref_adapter:WsgirefAdapter"
if TEST_ADAPTER not in os.environ.get(ENV_VAR, ""):
    os.environ[ENV_VAR] = ",".join(filter(None, (os.environ.get(ENV_VAR), TEST_ADAPTER)))
