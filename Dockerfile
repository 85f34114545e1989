# syntax=docker/dockerfile:1
# GPU Portal's image: one image for web, worker, notifier, beat and watcher (docker-compose.yml, deploy/).
# Build: docker build -t gpu-portal:0.1.0 .

# --- builder: wheels of every dependency (compilers live here only) -------------------------------------------------
FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md LICENSE NOTICE ./
COPY portal portal
COPY apps apps
COPY worker worker
COPY kubesim kubesim
# The project's own wheel is dropped: the final image runs the source from /app (templates and static sit beside it).
RUN pip wheel --wheel-dir /wheels . && rm -f /wheels/gpu_portal-*.whl

# --- final: the runtime only, as a fixed non-root user ---------------------------------------------------------------
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    PORTAL_MODE=production \
    PORTAL_RUN_DIR=/tmp/portal \
    STATIC_ROOT=/app/staticfiles \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus
RUN groupadd --system --gid 10001 portal \
    && useradd --system --uid 10001 --gid portal --no-create-home --home-dir /app --shell /usr/sbin/nologin portal
COPY --from=builder /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels /wheels/*.whl && rm -rf /wheels
WORKDIR /app
COPY manage.py pyproject.toml gunicorn.conf.py ./
COPY portal portal
COPY apps apps
COPY worker worker
COPY kubesim kubesim
COPY templates templates
COPY static static
# Static files at build time (WhiteNoise serves them); the key only exists for this one command.
RUN SECRET_KEY=collectstatic-only-not-a-secret ALLOWED_HOSTS=build.invalid python manage.py collectstatic --noinput \
    && mkdir -p /kube && chown portal:portal /kube
USER 10001:10001
EXPOSE 8000 9101 9102
ENTRYPOINT ["python", "-m", "portal.container", "run"]
# gunicorn.conf.py (read from /app) says how: worker class, processes, threads, timeouts, the database pool.
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000"]
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s \
    CMD ["python", "-m", "portal.container", "check", "http://127.0.0.1:8000/healthz"]
