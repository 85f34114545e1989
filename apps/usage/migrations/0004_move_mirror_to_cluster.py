"""The Kueue mirror moves to the cluster app: its tables are renamed, their rows stay
(apps/cluster/migrations/0001)."""

from django.db import migrations

MOVED = {
    'clusterqueuestate': 'cluster_clusterqueuestate',
    'localqueuestate': 'cluster_localqueuestate',
    'cohortstate': 'cluster_cohortstate',
}


class Migration(migrations.Migration):

    dependencies = [
        ('usage', '0003_usageinterval_ended_at'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.AlterModelTable(name=name, table=table) for name, table in MOVED.items()],
            state_operations=[migrations.DeleteModel(name=name) for name in MOVED],
        ),
    ]
