"""python -m tests.oidc_provider.serve: migrate the provider's database, register the portal as a client, serve on
127.0.0.1:$OIDC_PROVIDER_PORT until stopped (the fixture stops it by its pid)."""

from __future__ import annotations

import os

import django
from django.core.management import call_command

OTHER_REDIRECT = "http://127.0.0.1/another-app/callback/"


def main() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
    django.setup()
    from django.conf import settings
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    Application.objects.update_or_create(client_id=settings.CLIENT_ID, defaults={
        "name": "GPU Portal (tests)", "client_secret": settings.CLIENT_SECRET, "client_type": "confidential",
        "authorization_grant_type": "authorization-code", "redirect_uris": settings.REDIRECT_URIS,
        "skip_authorization": True, "algorithm": "RS256",
    })
    # Another relying party of the same provider: its ID tokens must not open the portal (audience check).
    Application.objects.update_or_create(client_id="another-app", defaults={
        "name": "Another app", "client_secret": settings.CLIENT_SECRET, "client_type": "confidential",
        "authorization_grant_type": "authorization-code", "redirect_uris": OTHER_REDIRECT,
        "skip_authorization": True, "algorithm": "RS256",
    })
    call_command("runserver", f"127.0.0.1:{settings.PORT}", use_reloader=False, use_threading=True,
                 skip_checks=True)


if __name__ == "__main__":
    main()
