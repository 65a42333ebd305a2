"""Sample WSGI and ASGI apps to tune and test with, each importable as `apps.NAME:app`, and a
small Django project (djangoproject/) pointed at from its own folder."""
