"""Settings of the tests' OpenID Connect provider (never the portal's). Everything comes from the fixture's
environment: the port, the SQLite file, the RSA signing key and the control token."""

from __future__ import annotations

import os
from pathlib import Path

PORT = int(os.environ["OIDC_PROVIDER_PORT"])
ISSUER = f"http://127.0.0.1:{PORT}/o"

SECRET_KEY = "tests-oidc-provider-only-" + "y" * 40
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.oidc_provider.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
    "tests.oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # test users only
LOGIN_URL = "/login/"

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OIDC_PROVIDER_KEY_FILE"]).read_text(),
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect", "email": "E-mail", "profile": "Profile", "groups": "Groups"},
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.GroupsClaimValidator",
}
CONTROL_TOKEN = os.environ["OIDC_PROVIDER_CONTROL_TOKEN"]
CLIENT_ID = os.environ["OIDC_PROVIDER_CLIENT_ID"]
CLIENT_SECRET = os.environ["OIDC_PROVIDER_CLIENT_SECRET"]
REDIRECT_URIS = os.environ["OIDC_PROVIDER_REDIRECT_URIS"]

LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"console": {"class": "logging.StreamHandler"}},
           "root": {"handlers": ["console"], "level": "WARNING"}}
