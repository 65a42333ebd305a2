"""A WSGI app that answers with two environment variables as the server imported it with:
the contract suite checks that a written file sets the app's own settings (TUNER_TEST_*)."""

import os

NAMES = ("TUNER_TEST_APP_SETTING", "TUNER_TEST_APP_WORDS")
BODY = "|".join(os.environ.get(name, "unset") for name in NAMES).encode()


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))])
    return [BODY]
