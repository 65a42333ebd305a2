"""Sample WSGI apps to tune and test with; each is importable as `apps.NAME:app`."""
