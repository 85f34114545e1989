"""The CLI's tests serve the portal for real (pytest-django's live server over HTTP) on the demo organisation, with
kubesim as the cluster and the real worker and watcher of tests/worker."""

from tests.worker.conftest import celery_worker, cluster, kubesim, org, watcher  # noqa: F401 - fixtures
