"""WSGI config for mysite: `application` is what a WSGI server (gunicorn, uWSGI) serves.

tuner tune mysite.wsgi:application --server gunicorn
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")

application = get_wsgi_application()
