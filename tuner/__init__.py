"""tuner: finds the best WSGI server config for an app on this hardware, by measuring."""

__version__ = "0.1.0"
