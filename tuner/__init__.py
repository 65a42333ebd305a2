"""tuner: finds the best gunicorn / uWSGI config for a WSGI app on this hardware, by measuring."""

__version__ = "0.1.0"
