"""The CLI's tests serve the portal for real (pytest-django's live server over HTTP) on the demo organisation, with
kubesim as the cluster and the real worker and watcher of tests/worker."""

import pytest

from tests.portal_cli.support import gpu
from tests.worker.conftest import celery_worker, cluster, kubesim, org, watcher  # noqa: F401 - fixtures


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A config directory of this test's own (XDG_CONFIG_HOME), and no credentials from the environment."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("GPU_PORTAL_URL", raising=False)
    monkeypatch.delenv("GPU_PORTAL_TOKEN", raising=False)
    return tmp_path


@pytest.fixture
def signed_in(home, live_server, org):  # noqa: F811 - the org fixture
    """alice signed in through `gpu login` (her token stored in this test's config directory)."""
    result = gpu("login", "--url", live_server.url, "--username", "alice", "--password-stdin", input="demo\n")
    assert result.exit_code == 0, result.output
    return live_server.url
