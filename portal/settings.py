"""Settings for every mode; the only module that reads the environment.

Modes (``PORTAL_MODE``):
- ``embedded`` (default): SQLite, an embedded broker, kubesim, demo logins allowed. What ``make run`` uses.
- ``production``: every secret must come from the environment; secure cookies, HSTS, SSL redirect;
  ``manage.py check --deploy`` is clean.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("PORTAL_RUN_DIR", BASE_DIR / ".run"))


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def _env_secret(name: str) -> str | None:
    """Read NAME, or the file named by NAME_FILE (Kubernetes-mounted secrets)."""
    if path := os.environ.get(f"{name}_FILE"):
        return Path(path).read_text().strip()
    return os.environ.get(name)


PORTAL_MODE = os.environ.get("PORTAL_MODE", "embedded")
if PORTAL_MODE not in {"embedded", "production"}:
    raise ImproperlyConfigured(f"PORTAL_MODE must be 'embedded' or 'production', not {PORTAL_MODE!r}")
PRODUCTION = PORTAL_MODE == "production"

DEBUG = _env_bool("DJANGO_DEBUG", False)
SECRET_KEY = _env_secret("SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set in production mode")
    SECRET_KEY = "embedded-mode-only-not-a-secret-" + "x" * 32

ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", [])

# Demo logins (password "demo") exist only where this is on.
DEMO_MODE = _env_bool("PORTAL_DEMO", not PRODUCTION)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "apps.core",
    "apps.cluster",
    "apps.accounts",
    "apps.org",
    "apps.workloads",
    "apps.usage",
    "worker",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.accounts.context_processors.navigation",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{RUN_DIR / 'portal.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "org:overview"
LOGOUT_REDIRECT_URL = "accounts:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", RUN_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

REDIS_URL = os.environ.get("REDIS_URL", "")

# Celery: Redis when REDIS_URL is set, otherwise an embedded broker on the local file system (make run on a bare
# machine). Tasks take ids, are idempotent and ignore results; the database holds every outcome, and every change
# asked of the cluster is an outbox row first (apps/core/intents.py), so a lost message delays work, never loses it.
# acks_late: a message is acknowledged when its task ends, so a worker killed mid-task leaves it to be delivered
# again once the visibility timeout passes (minutes: longer than the hard time limit plus the longest retry
# countdown, 60 s, or a slow task would run twice at once).
BROKER_DIR = RUN_DIR / "broker"
CELERY_BROKER_URL = REDIS_URL or "filesystem://"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {"visibility_timeout": 300}
    if REDIS_URL
    else {"data_folder_in": str(BROKER_DIR), "data_folder_out": str(BROKER_DIR), "store_processed": False,
          "control_folder": str(BROKER_DIR / "control")}
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "portal")
CELERY_TASK_SOFT_TIME_LIMIT = 120
CELERY_TASK_TIME_LIMIT = 180
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(RUN_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    # Declarative and cheap when nothing changed: repairs drift and anything a lost message missed.
    "kueue-sync": {"task": "worker.tasks.kueue_sync", "schedule": 60.0, "options": {"expires": 55}},
    # The outbox: sends again every submit, stop or reconcile not done by its deadline (a lost message, a killed
    # worker).
    "intents-sweep": {"task": "worker.tasks.intents_sweep", "schedule": 15.0, "options": {"expires": 14}},
    "notebooks-cull-idle": {"task": "worker.tasks.notebooks_cull_idle", "schedule": 60.0},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "apps.core.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Portal API",
    "DESCRIPTION": "Self-service GPU portal on Kubernetes and Kueue",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# E-mail (workload notifications): the console in the embedded mode, SMTP from the environment otherwise.
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = _env_secret("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
PORTAL_BASE_URL = os.environ.get("PORTAL_BASE_URL", "http://127.0.0.1:8000")

# The cluster: a kubeconfig path (make run writes kubesim's to .run/kubeconfig); empty means in-cluster credentials.
KUBECONFIG = os.environ.get("KUBECONFIG", "" if PRODUCTION else str(RUN_DIR / "kubeconfig"))

# Kueue object naming (DESIGN section 4): prefixes are configurable per installation.
KUEUE_ROOT_COHORT_PREFIX = os.environ.get("KUEUE_ROOT_COHORT_PREFIX", "portal-")
KUEUE_DEPARTMENT_COHORT_PREFIX = os.environ.get("KUEUE_DEPARTMENT_COHORT_PREFIX", "dept-")
KUEUE_PROJECT_PREFIX = os.environ.get("KUEUE_PROJECT_PREFIX", "proj-")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

if PRODUCTION:
    SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"
