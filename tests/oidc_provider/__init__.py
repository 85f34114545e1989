"""A real OpenID Connect provider for the tests: django-oauth-toolkit in its own small Django project, run as a
subprocess on a free 127.0.0.1 port (fixture.py). The portal signs in through it over HTTP, as it would through an
organisation's Keycloak or Entra ID."""
