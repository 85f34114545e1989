"""The accounts tests' real OpenID Connect provider (tests/oidc_provider)."""

from tests.oidc_provider.fixture import oidc_provider  # noqa: F401 - a fixture
