"""Settings for every mode; the only module that reads the environment.

Modes (``PORTAL_MODE``):
- ``embedded`` (default): SQLite, an embedded broker, kubesim, demo logins allowed. What ``make run`` uses.
- ``production``: every secret must come from the environment; secure cookies, HSTS, SSL redirect;
  ``manage.py check --deploy`` is clean.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
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


def _env_int(name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, not {number}")
    return number


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
    "axes",
    "csp",
    "mozilla_django_oidc",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_filters",
    "django_prometheus",
    "apps.core",
    "apps.cluster",
    "apps.accounts",
    "apps.org",
    "apps.workloads",
    "apps.usage",
    "worker",
]

MIDDLEWARE = [
    # Probes and metrics first: /healthz, /readyz and /metrics skip host checks, redirects and sessions
    # (portal/observability.py).
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "portal.observability.ProbeMiddleware",
    "portal.observability.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "apps.accounts.middleware.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "apps.accounts.middleware.SessionIdleTimeoutMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # ETag and 304 on every API read (apps/core/api_http.py).
    "apps.core.api_http.ConditionalApiReadMiddleware",
    # Last: turns a lockout flagged during authentication into the lockout page or JSON answer.
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "portal.urls"
# Django's form renderer, selects written in Python rather than a template per option (apps/core/form_rendering.py).
FORM_RENDERER = "apps.core.form_rendering.PortalFormRenderer"
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
# Connections are checked before reuse (a PostgreSQL restart costs one retry, not a 500). Each thread has its own
# connection: kept for a minute in the single-threaded processes (Celery's prefork children, beat); in the web, whose
# gunicorn workers run many threads (gunicorn.conf.py), DATABASE_POOL_SIZE > 0 (set there) shares a pool of at most
# that many per worker process instead, so connections follow the requests that use the database, not the threads
# (docs/architecture.md, Serving the portal).
DATABASE_POOL_SIZE = _env_int("DATABASE_POOL_SIZE", 0)
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Write-ahead log: readers (pages, the watcher's reads) no longer wait for a writer nor block it, and a commit
    # appends instead of rewriting pages (the mode stays with the file; setting it again is a no-op). In that mode
    # synchronous=NORMAL syncs the log at checkpoints, not at every commit: the database stays consistent, a power
    # cut may lose the last commits (the outbox sends their tasks' work again) - the embedded mode's trade. The
    # backend is Django's with each process's write transactions queued in the process (portal/sqlite/base.py).
    DATABASES["default"]["ENGINE"] = "portal.sqlite"
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif DATABASE_POOL_SIZE:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, DATABASE_POOL_SIZE), "max_size": DATABASE_POOL_SIZE,
        "timeout": _env_int("DATABASE_POOL_TIMEOUT", 20, minimum=1)}
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

# The first installation admin (`manage.py bootstrap_admin`; its flags win over these).
PORTAL_ADMIN_USERNAME = os.environ.get("PORTAL_ADMIN_USERNAME", "")
PORTAL_ADMIN_EMAIL = os.environ.get("PORTAL_ADMIN_EMAIL", "")
PORTAL_ADMIN_PASSWORD = _env_secret("PORTAL_ADMIN_PASSWORD") or ""

# --- Sign-in (README "Sign-in and security") ----------------------------------------------------------------------
# Passwords kept by the portal: optional, off by default in production (single sign-on instead); the embedded mode
# keeps them for the demo logins. Demo accounts (the seeded usernames with the demo password) are refused in
# production mode whatever this says.
LOCAL_LOGIN = _env_bool("PORTAL_LOCAL_LOGIN", not PRODUCTION)

# The first backend refuses locked-out credentials (django-axes); the portal's own backends follow.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "apps.accounts.backends.PasswordBackend",
    "apps.accounts.oidc.PortalOIDCBackend",
]

# OpenID Connect single sign-on (mozilla-django-oidc): on when a client id is configured.
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = _env_secret("OIDC_CLIENT_SECRET") or ""
OIDC_OP_ISSUER = os.environ.get("OIDC_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_USERINFO_ENDPOINT", "")  # optional: the ID token's claims come first
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = os.environ.get("OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.environ.get("OIDC_SCOPES", "openid email profile")
OIDC_USERNAME_CLAIM = os.environ.get("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "groups")
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "your organisation")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = _env_int("OIDC_TIMEOUT", 10, minimum=1)
# Seconds the identity provider's clock may differ from the portal's when the ID token's iat and exp are checked (a
# provider a few seconds ahead would otherwise fail every sign-in); capped, since it also lengthens a token's life.
OIDC_CLOCK_LEEWAY = _env_int("OIDC_CLOCK_LEEWAY", 60, minimum=0, maximum=300)
OIDC_CALLBACK_CLASS = "apps.accounts.oidc.PortalOIDCCallbackView"
OIDC_AUTHENTICATE_CLASS = "apps.accounts.oidc.PortalOIDCAuthenticateView"
OIDC_AUTHENTICATION_CALLBACK_URL = "accounts:oidc_callback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
if OIDC_ENABLED:
    _missing = [name for name, value in (
        ("OIDC_ISSUER", OIDC_OP_ISSUER), ("OIDC_AUTHORIZATION_ENDPOINT", OIDC_OP_AUTHORIZATION_ENDPOINT),
        ("OIDC_TOKEN_ENDPOINT", OIDC_OP_TOKEN_ENDPOINT), ("OIDC_JWKS_ENDPOINT", OIDC_OP_JWKS_ENDPOINT),
        ("OIDC_CLIENT_SECRET", OIDC_RP_CLIENT_SECRET),
    ) if not value]
    if _missing:
        raise ImproperlyConfigured(f"OIDC_CLIENT_ID is set, so these must be too: {', '.join(_missing)}")

# Login throttling (django-axes): this many failures for one username from one address lock that pair out for the
# cool-off period; a successful sign-in before then resets the count. Admins unlock in the Django admin ("Access
# attempts") or with `manage.py axes_reset_username NAME`.
AXES_FAILURE_LIMIT = _env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=_env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "apps.accounts.lockout.lockout_response"
AXES_WHITELIST_CALLABLE = "apps.accounts.lockout.not_a_password_attempt"
# Reverse proxies in front of the portal that append to X-Forwarded-For: 0 trusts only the connection's address.
LOGIN_PROXY_COUNT = _env_int("LOGIN_PROXY_COUNT", 0)
AXES_CLIENT_IP_CALLABLE = "apps.accounts.lockout.client_ip"
AXES_VERBOSE = False

# Sessions: an idle timeout (sliding: any request you make resets it; background polling does not) and an absolute
# maximum age after which you sign in again whatever you did.
SESSION_IDLE_TIMEOUT = _env_int("SESSION_IDLE_TIMEOUT", 30 * 60, minimum=60)
SESSION_MAX_AGE = _env_int("SESSION_MAX_AGE", 12 * 60 * 60, minimum=60)
SESSION_COOKIE_AGE = SESSION_MAX_AGE
SESSION_IDLE_TOUCH_INTERVAL = 60  # seconds between two writes of "last seen" to the session store

# Personal access tokens for the API: default and longest lifetime, in days.
API_TOKEN_DEFAULT_DAYS = _env_int("API_TOKEN_DEFAULT_DAYS", 30, minimum=1)
API_TOKEN_MAX_DAYS = _env_int("API_TOKEN_MAX_DAYS", 365, minimum=1)
if API_TOKEN_DEFAULT_DAYS > API_TOKEN_MAX_DAYS:
    raise ImproperlyConfigured("API_TOKEN_DEFAULT_DAYS must not exceed API_TOKEN_MAX_DAYS")
API_TOKEN_TOUCH_INTERVAL = 60  # seconds between two writes of a token's "last used"

# Content-Security-Policy (django-csp): our own static scripts and styles only, no inline code, no eval.
_oidc_origin = "/".join(OIDC_OP_AUTHORIZATION_ENDPOINT.split("/")[:3]) if OIDC_ENABLED else ""
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF, *([_oidc_origin] if _oidc_origin else [])],
    },
}
# Browser features the portal never uses, denied to it and anything it embeds.
PERMISSIONS_POLICY: dict[str, list[str]] = {
    feature: [] for feature in (
        "accelerometer", "autoplay", "camera", "display-capture", "encrypted-media", "fullscreen", "geolocation",
        "gyroscope", "hid", "idle-detection", "magnetometer", "microphone", "midi", "payment", "picture-in-picture",
        "publickey-credentials-get", "screen-wake-lock", "serial", "usb", "xr-spatial-tracking",
    )
}

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
CELERY_BROKER_TRANSPORT = None if REDIS_URL else "portal.broker:Transport"  # kombu's, each message written whole
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {"visibility_timeout": 300}
    if REDIS_URL
    # The folder broker is polled: every `polling_interval` seconds when idle (kombu's default, 1 s, made each task
    # of a burst wait up to a second behind the one before it).
    else {"data_folder_in": str(BROKER_DIR), "data_folder_out": str(BROKER_DIR), "store_processed": False,
          "control_folder": str(BROKER_DIR / "control"), "polling_interval": 0.05}
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Redis pushes: a worker takes one message per free slot. The folder broker is read in a blocking loop that applies the
# acknowledgements of finished tasks only between two polls of the folder (Celery's loop for transports that cannot
# wake it; portal/broker.py keeps those turns short while the window is full): there the worker takes up to 16
# messages a thread at once, so a burst does not wait a loop turn per message (the outbox sends again whatever a
# killed worker held).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1 if REDIS_URL else 16
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "portal")
# Tasks that talk to receivers outside the cluster (webhooks, Slack, Teams, the mail server) have a queue of their own,
# consumed by workers of their own: a receiver that is down or slow then fills those slots, never the ones that turn
# submissions and stops into cluster objects (portal.celery.route_task; docs/architecture.md, Notification channels).
NOTIFICATIONS_QUEUE = os.environ.get("CELERY_NOTIFICATIONS_QUEUE", "notifications")
CELERY_TASK_ROUTES = ("portal.celery.route_task",)
CELERY_TASK_SOFT_TIME_LIMIT = 120
CELERY_TASK_TIME_LIMIT = 180
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False  # the worker logs through LOGGING below (JSON, request ids)
CELERY_BEAT_SCHEDULE_FILENAME = str(RUN_DIR / "celerybeat-schedule")
# Beat sends only while it holds its Lease (LEADER_ELECTION below) and touches BEAT_HEARTBEAT_FILE at every tick, at
# least every 5 s: the file its liveness probe reads (worker/beat.py).
CELERY_BEAT_SCHEDULER = "worker.beat:LeaderScheduler"
CELERY_BEAT_MAX_LOOP_INTERVAL = 5
BEAT_HEARTBEAT_FILE = RUN_DIR / "beat-heartbeat"
CELERY_BEAT_SCHEDULE = {
    # Declarative and cheap when nothing changed: repairs drift and anything a lost message missed.
    "kueue-sync": {"task": "worker.tasks.kueue_sync", "schedule": 60.0, "options": {"expires": 55}},
    # The outbox: sends again every submit, stop or reconcile not done by its deadline (a lost message, a killed
    # worker).
    "intents-sweep": {"task": "worker.tasks.intents_sweep", "schedule": 15.0, "options": {"expires": 14}},
    # The workload tallies the pages read (apps/workloads/services/tallies.py): their changes folded in.
    "workload-tallies-fold": {"task": "worker.tasks.workload_tallies_fold", "schedule": 10.0,
                              "options": {"expires": 9}},
    "notebooks-cull-idle": {"task": "worker.tasks.notebooks_cull_idle", "schedule": 60.0},
    # Start-time forecasts go stale as time passes even when nothing moves (worker/forecast.py).
    "forecasts-refresh": {"task": "worker.tasks.forecasts_refresh", "schedule": 60.0, "options": {"expires": 55}},
    # GPU utilisation from Prometheus (does nothing without PROMETHEUS_URL): stored for pages, showback and idling.
    "utilisation-refresh": {"task": "worker.tasks.utilisation_refresh", "schedule": 60.0, "options": {"expires": 55}},
    # Budgets: thresholds crossed notify once per period; exceeded hold_preemptible budgets hold, rollovers release.
    "budgets-evaluate": {"task": "worker.tasks.budgets_evaluate", "schedule": 60.0, "options": {"expires": 55}},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Tokens first, so a bad, expired or revoked token answers 401 with a challenge.
        "apps.accounts.authentication.PersonalTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PARSER_CLASSES": [
        "apps.core.api_lists.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "apps.core.api_lists.StrictMultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "apps.core.api_lists.Pagination",
    "DEFAULT_FILTER_BACKENDS": ["apps.core.api_lists.FilterSetBackend"],
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
    # Workloads are of every kind (the cluster's too); submissions and templates of the portal's three forms.
    "ENUM_NAME_OVERRIDES": {"WorkloadKindEnum": "apps.workloads.models.Kind",
                            "PortalKindEnum": "apps.workloads.models.PORTAL_KIND_CHOICES",
                            "WorkloadStatusEnum": "apps.workloads.models.Status",
                            "NotificationDeliveryStatusEnum": "apps.org.models.NotificationDelivery.Status"},
    # Every operation documents its errors in the one error shape (apps/core/api_schema.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "apps.core.api_schema.require_versions", "apps.core.api_schema.document_errors"],
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
# A mail server that accepts the connection and then says nothing holds a notifications slot this long, not forever.
EMAIL_TIMEOUT = _env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
# Links in e-mails: PORTAL_BASE_URL, else where `make run` serves the portal (PORTAL_HOST and PORTAL_PORT, as the
# launcher reads them; a wildcard address is reached on the loopback).
_SERVED_HOST = os.environ.get("PORTAL_HOST", "").strip() or "127.0.0.1"
PORTAL_BASE_URL = os.environ.get("PORTAL_BASE_URL", "").strip().rstrip("/") or (
    f"http://{'127.0.0.1' if _SERVED_HOST in ('0.0.0.0', '::') else _SERVED_HOST}:"  # noqa: S104 - a comparison
    f"{os.environ.get('PORTAL_PORT', '').strip() or '8000'}")

# Notification channels (docs/architecture.md, Notification channels): whether webhooks may point at loopback,
# private and link-local addresses. Off in production (a URL a user gives must not reach what only the worker can);
# on in the embedded demo, whose receivers run on the same machine. Requests time out after this many seconds.
NOTIFICATIONS_ALLOW_PRIVATE = _env_bool("NOTIFICATIONS_ALLOW_PRIVATE", not PRODUCTION)
NOTIFICATIONS_TIMEOUT = _env_int("NOTIFICATIONS_TIMEOUT", 5, minimum=1)

# GPU utilisation: the Prometheus that scrapes NVIDIA's DCGM exporter (README "GPU utilisation"). Empty: pages say
# utilisation is not available. Only the worker queries it (timeout per query, seconds), never a page's request.
PROMETHEUS_URL = os.environ.get("PROMETHEUS_URL", "").strip().rstrip("/")
PROMETHEUS_TIMEOUT = _env_int("PROMETHEUS_TIMEOUT", 5, minimum=1)
UTILISATION_STEP_SECONDS = _env_int("UTILISATION_STEP_SECONDS", 60, minimum=1)  # resolution of the stored samples

# Chargeback (README "Cost and chargeback"): the currency the pools' prices are entered in, named beside every cost
# (e.g. EUR, USD, CHF). Empty: costs are plain numbers in whatever currency the admins priced the pools in.
USAGE_CURRENCY = os.environ.get("USAGE_CURRENCY", "").strip()
if len(USAGE_CURRENCY) > 8 or not USAGE_CURRENCY.isprintable():
    raise ImproperlyConfigured(f"USAGE_CURRENCY is a short name such as EUR or USD, not {USAGE_CURRENCY!r}")

# The cluster: a kubeconfig path (make run writes kubesim's to .run/kubeconfig); empty means in-cluster credentials.
KUBECONFIG = os.environ.get("KUBECONFIG", "" if PRODUCTION else str(RUN_DIR / "kubeconfig"))

# Notebooks (README "Notebooks, data and credentials"): how Connect reaches a running notebook. "proxy" (the default,
# and what the embedded kubesim serves): the portal relays the owner's requests through the API server's service
# proxy. "ingress" / "httproute": one Ingress (networking.k8s.io/v1) or Gateway API HTTPRoute per notebook at
# <job>.<NOTEBOOK_BASE_DOMAIN>; Connect redirects there with the notebook's token.
# The Pod Security Standards profile every pod template of a submitted manifest must meet: baseline or restricted.
MANIFEST_POD_SECURITY = os.environ.get("MANIFEST_POD_SECURITY", "baseline")
if MANIFEST_POD_SECURITY not in {"baseline", "restricted"}:
    raise ImproperlyConfigured("MANIFEST_POD_SECURITY must be baseline or restricted")
NOTEBOOK_EXPOSE = os.environ.get("NOTEBOOK_EXPOSE", "proxy")
if NOTEBOOK_EXPOSE not in {"proxy", "ingress", "httproute"}:
    raise ImproperlyConfigured("NOTEBOOK_EXPOSE must be proxy, ingress or httproute")
NOTEBOOK_BASE_DOMAIN = os.environ.get("NOTEBOOK_BASE_DOMAIN", "")
if NOTEBOOK_EXPOSE != "proxy" and not NOTEBOOK_BASE_DOMAIN:
    raise ImproperlyConfigured("NOTEBOOK_BASE_DOMAIN must be set when NOTEBOOK_EXPOSE is ingress or httproute")
NOTEBOOK_INGRESS_CLASS = os.environ.get("NOTEBOOK_INGRESS_CLASS", "")
NOTEBOOK_TLS_SECRET = os.environ.get("NOTEBOOK_TLS_SECRET", "")  # a wildcard certificate for the base domain
NOTEBOOK_GATEWAY = os.environ.get("NOTEBOOK_GATEWAY", "")  # "<namespace>/<name>" of the Gateway HTTPRoutes attach to
# Inference services (docs/architecture.md, Inference services): how their endpoints are reached. "proxy" (the
# default): the portal relays its project's members' requests through the API server's service proxy. "ingress" /
# "httproute": the worker publishes each service at <job>.<INFERENCE_BASE_DOMAIN> with an Ingress or an HTTPRoute
# (the notebooks' ingress class and Gateway), owned by its Deployment; the portal checks no membership there.
INFERENCE_EXPOSE = os.environ.get("INFERENCE_EXPOSE", "proxy")
if INFERENCE_EXPOSE not in {"proxy", "ingress", "httproute"}:
    raise ImproperlyConfigured("INFERENCE_EXPOSE must be proxy, ingress or httproute")
INFERENCE_BASE_DOMAIN = os.environ.get("INFERENCE_BASE_DOMAIN", "") or NOTEBOOK_BASE_DOMAIN
if INFERENCE_EXPOSE != "proxy" and not INFERENCE_BASE_DOMAIN:
    raise ImproperlyConfigured("INFERENCE_BASE_DOMAIN (or NOTEBOOK_BASE_DOMAIN) must be set when INFERENCE_EXPOSE is "
                               "ingress or httproute")
# A wildcard certificate for the inference domain; empty: the notebooks' where both use one domain.
INFERENCE_TLS_SECRET = os.environ.get("INFERENCE_TLS_SECRET", "") or (
    NOTEBOOK_TLS_SECRET if INFERENCE_BASE_DOMAIN == NOTEBOOK_BASE_DOMAIN else "")
# Credentials on their way to the cluster are encrypted at rest with this Fernet key (urlsafe base64 of 32 bytes);
# empty: one derived from SECRET_KEY.
CREDENTIALS_KEY = _env_secret("CREDENTIALS_KEY") or ""

# Kueue object naming (docs/architecture.md, The organisation in Kueue): prefixes are configurable per installation.
KUEUE_ROOT_COHORT_PREFIX = os.environ.get("KUEUE_ROOT_COHORT_PREFIX", "portal-")
KUEUE_DEPARTMENT_COHORT_PREFIX = os.environ.get("KUEUE_DEPARTMENT_COHORT_PREFIX", "dept-")
KUEUE_PROJECT_PREFIX = os.environ.get("KUEUE_PROJECT_PREFIX", "proj-")
# Project namespaces are the portal's own: they start with KUEUE_PROJECT_PREFIX or are on this admin-approved list
# (comma-separated); never kube-*, default or the portal's own namespace (apps/org/validators.py).
PORTAL_EXTRA_PROJECT_NAMESPACES = _env_list("PORTAL_EXTRA_PROJECT_NAMESPACES", [])
PORTAL_NAMESPACE = os.environ.get("PORTAL_NAMESPACE") or os.environ.get("POD_NAMESPACE", "")

# --- Health, metrics and logs (README "Health, metrics and logs"; portal/observability.py) ---------------------------
# /readyz fails the cluster check when the watcher has not reached the API server for this long (it tries every
# WATCHER_HEARTBEAT_SECONDS).
WATCHER_HEARTBEAT_SECONDS = _env_int("WATCHER_HEARTBEAT_SECONDS", 10, minimum=1)
READYZ_CLUSTER_MAX_AGE = _env_int("READYZ_CLUSTER_MAX_AGE", 60, minimum=1)
# A loop of the watcher that made no progress for its own period plus this long is stalled: the heartbeat says so
# instead of "seen" (/readyz goes red) and the watcher's /healthz and /readyz answer 503.
WATCHER_STALL_SECONDS = _env_int("WATCHER_STALL_SECONDS", 120, minimum=1)

# --- High availability (README "High availability"; worker/leader.py) -------------------------------------------------
# With LEADER_ELECTION on, the watcher and beat run as several replicas and only the holder of their Lease
# (coordination.k8s.io/v1, in PORTAL_NAMESPACE) acts, as client-go's leader election: a holder that could not renew for
# the renew deadline steps down; another takes over once the lease duration passed without a renewal. Off: one watcher
# and one beat, as `make run` and docker compose start them.
LEADER_ELECTION = _env_bool("LEADER_ELECTION", False)
LEADER_ELECTION_LEASE_SECONDS = _env_int("LEADER_ELECTION_LEASE_SECONDS", 15, minimum=1)
LEADER_ELECTION_RENEW_DEADLINE_SECONDS = _env_int("LEADER_ELECTION_RENEW_DEADLINE_SECONDS", 10, minimum=1)
LEADER_ELECTION_RETRY_SECONDS = _env_int("LEADER_ELECTION_RETRY_SECONDS", 2, minimum=1)
if LEADER_ELECTION and not PORTAL_NAMESPACE:
    raise ImproperlyConfigured("LEADER_ELECTION needs the namespace that holds the Leases: set PORTAL_NAMESPACE "
                               "(or POD_NAMESPACE)")
if not (LEADER_ELECTION_LEASE_SECONDS > LEADER_ELECTION_RENEW_DEADLINE_SECONDS
        > LEADER_ELECTION_RETRY_SECONDS * 1.2):
    raise ImproperlyConfigured("leader election needs LEADER_ELECTION_LEASE_SECONDS > "
                               "LEADER_ELECTION_RENEW_DEADLINE_SECONDS > 1.2 x LEADER_ELECTION_RETRY_SECONDS")
# The web's /metrics answers these networks (CIDRs: the cluster's pod network, say) or a bearer token.
METRICS_ALLOWED_NETWORKS = _env_list("METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", "::1/128"])
METRICS_TOKEN = _env_secret("METRICS_TOKEN") or ""
# The worker's and watcher's own metrics ports (0: none; the embedded mode runs several on one machine).
WORKER_METRICS_PORT = _env_int("WORKER_METRICS_PORT", 9101 if PRODUCTION else 0)
WATCHER_METRICS_PORT = _env_int("WATCHER_METRICS_PORT", 9102 if PRODUCTION else 0)

# Logs: one JSON object a line in production (LOG_FORMAT=plain for people), each with the request id.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "json" if PRODUCTION else "plain")
if LOG_FORMAT not in {"json", "plain"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be 'json' or 'plain', not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "apps.core.request_ids.RequestIdFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s%(request_tag)s: %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["request_id"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # django-axes logs every sign-in at INFO; its lockouts and repeated failures come at WARNING.
        "axes": {"level": os.environ.get("AXES_LOG_LEVEL", "WARNING")},
        # One line per request (portal/observability.py); gunicorn's access log says the same without the id.
        "portal.request": {"level": os.environ.get("REQUEST_LOG_LEVEL", "INFO")},
    },
}

if PRODUCTION:
    SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", True)
    # The probes' and Prometheus' plain-HTTP paths (answered before the redirect anyway: ProbeMiddleware).
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"
