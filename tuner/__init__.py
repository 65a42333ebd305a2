"""tuner: tunes a Python web server's config (WSGI or ASGI) on this hardware, by measuring."""

__version__ = "0.1.0"
