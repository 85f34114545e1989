import pytest

from kubesim.testing import serve
from worker.gateway import Gateway, reset_gateway


@pytest.fixture(scope="module")
def kubesim():
    """A kubesim on a free port for this test module, manual clock."""
    with serve(clock="manual") as served:
        yield served


@pytest.fixture
def cluster(kubesim):
    """A clean cluster and the worker's gateway pointed at it."""
    kubesim.reset()
    gw = Gateway(kubesim.api_client())
    reset_gateway(gw)
    yield gw
    reset_gateway(None)
