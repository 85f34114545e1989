"""Tokens of DRF's rest_framework.authtoken (stored in clear) become personal access tokens (stored as digests).

Clients keep their tokens: each old key becomes a token named "Token from before personal tokens" with the default
lifetime from today; the clear keys are then deleted from the old table.
"""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone


def convert(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    token_model = apps.get_model("accounts", "PersonalAccessToken")
    expires_at = timezone.now() + timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id FROM authtoken_token")
        rows = cursor.fetchall()
    for key, user_id in rows:
        digest = hashlib.sha256(key.encode()).hexdigest()
        token_model.objects.get_or_create(digest=digest, defaults={
            "user_id": user_id, "name": "Token from before personal tokens", "prefix": key[:8],
            "expires_at": expires_at,
        })
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM authtoken_token")


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0003_signin"),
    ]

    operations = [
        migrations.RunPython(convert, migrations.RunPython.noop),
    ]
