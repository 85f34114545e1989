"""The audit log moves to the core app: its table is renamed, its rows stay (apps/core/migrations/0001)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('org', '0003_nodepool_price_per_card_hour'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.AlterModelTable(name='auditevent', table='core_auditevent')],
            state_operations=[migrations.DeleteModel(name='AuditEvent')],
        ),
    ]
