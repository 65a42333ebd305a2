"""ASGI config for mysite: `application` is what an ASGI server (uvicorn, hypercorn) serves.

tuner tune mysite.asgi:application --server uvicorn
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")

application = get_asgi_application()
