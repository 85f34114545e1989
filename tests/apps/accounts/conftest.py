"""The accounts tests' OpenID Connect providers: the portal's own test provider (tests/oidc_provider) and a certified,
independent one (tests/oidc_certified)."""

from tests.oidc_certified.fixture import certified_oidc  # noqa: F401 - a fixture
from tests.oidc_provider.fixture import oidc_provider  # noqa: F401 - a fixture
