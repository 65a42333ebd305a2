"""Settings for mysite, read from the environment as a deployed project reads them.

    DATABASE_URL          postgresql://USER:PASSWORD@HOST:PORT/NAME (required)
    DJANGO_SECRET_KEY     the secret key (a fixed sample key when unset: this is a sample)
    DJANGO_CONN_MAX_AGE   seconds a connection outlives its request (0: one per request)
    DJANGO_DB_POOL_SIZE   connections in the PostgreSQL backend's own pool per process
                          (0: no pool; a pool needs DJANGO_CONN_MAX_AGE 0)

The last two are the project's connection settings that `tuner tune` searches:
mysite/wsgi.tuner.toml and mysite/asgi.tuner.toml declare them.
"""

import os
import urllib.parse
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "sample-project-key-set-DJANGO_SECRET_KEY")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "catalog",
    "techempower",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "mysite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "mysite.wsgi.application"


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit():
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a whole number >= 0")
    return int(raw)


def _database(url: str) -> dict:
    """DATABASES["default"] from a postgresql:// URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql") or not parts.path.strip("/"):
        raise ImproperlyConfigured(
            f"DATABASE_URL={url!r}: expected postgresql://USER:PASSWORD@HOST:PORT/NAME"
        )
    max_age = _int_env("DJANGO_CONN_MAX_AGE", 0)
    pool = _int_env("DJANGO_DB_POOL_SIZE", 0)
    if pool and max_age:
        raise ImproperlyConfigured(
            f"DJANGO_DB_POOL_SIZE={pool} with DJANGO_CONN_MAX_AGE={max_age}: Django's pool "
            "needs CONN_MAX_AGE 0 (the pool keeps the connections)"
        )
    unquote = urllib.parse.unquote
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.strip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": max_age,
        # Django 5.1+: psycopg's pool inside the backend, min_size = max_size = the pool.
        "OPTIONS": {"pool": {"min_size": pool, "max_size": pool}} if pool else {},
    }


if not os.environ.get("DATABASE_URL", "").strip():
    raise ImproperlyConfigured(
        "set DATABASE_URL to a PostgreSQL URL, then create the tables and rows with "
        "`python manage.py migrate && python manage.py seed`"
    )
DATABASES = {"default": _database(os.environ["DATABASE_URL"].strip())}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# A request that fails logs its error to stderr, where the server's log (and the tuner's reading
# of it: "too many clients already") sees it; with DEBUG off Django would only mail admins.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
