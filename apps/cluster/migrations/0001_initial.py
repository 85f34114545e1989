"""The Kueue mirror, moved here from usage with its rows (usage 0004 renamed the tables): state only, then the
content types follow."""

import django.db.models.deletion
from django.db import migrations, models


MODELS = ('clusterqueuestate', 'localqueuestate', 'cohortstate')


def move_content_types(apps, schema_editor, source='usage', target='cluster'):
    content_types = apps.get_model('contenttypes', 'ContentType')
    for model in MODELS:
        if not content_types.objects.filter(app_label=target, model=model).exists():
            content_types.objects.filter(app_label=source, model=model).update(app_label=target)


def unmove_content_types(apps, schema_editor):
    move_content_types(apps, schema_editor, source='cluster', target='usage')


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('org', '0003_nodepool_price_per_card_hour'),
        ('usage', '0004_move_mirror_to_cluster'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.CreateModel(
            name='ClusterQueueState',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=253, unique=True)),
                ('guaranteed', models.BooleanField(default=False)),
                ('cohort', models.CharField(blank=True, max_length=253)),
                ('nominal', models.DecimalField(decimal_places=3, default=0, max_digits=12)),
                ('pending_workloads', models.PositiveIntegerField(default=0)),
                ('reserving_workloads', models.PositiveIntegerField(default=0)),
                ('admitted_workloads', models.PositiveIntegerField(default=0)),
                ('reserved', models.DecimalField(decimal_places=3, default=0, max_digits=12)),
                ('reserved_borrowed', models.DecimalField(decimal_places=3, default=0, max_digits=12)),
                ('used', models.DecimalField(decimal_places=3, default=0, max_digits=12)),
                ('used_borrowed', models.DecimalField(decimal_places=3, default=0, max_digits=12)),
                ('weighted_share', models.BigIntegerField(blank=True, null=True)),
                ('active', models.BooleanField(default=True)),
                ('active_reason', models.CharField(blank=True, max_length=100)),
                ('active_message', models.TextField(blank=True)),
                ('observed_at', models.DateTimeField()),
                ('node_pool', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='org.nodepool')),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='org.project')),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='CohortState',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=253, unique=True)),
                ('parent', models.CharField(blank=True, max_length=253)),
                ('weighted_share', models.BigIntegerField(blank=True, null=True)),
                ('observed_at', models.DateTimeField()),
                ('department', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='org.department')),
                ('node_pool', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='org.nodepool')),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='org.project')),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='LocalQueueState',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace', models.CharField(max_length=63)),
                ('name', models.CharField(max_length=253)),
                ('cluster_queue', models.CharField(blank=True, max_length=253)),
                ('pending_workloads', models.PositiveIntegerField(default=0)),
                ('reserving_workloads', models.PositiveIntegerField(default=0)),
                ('admitted_workloads', models.PositiveIntegerField(default=0)),
                ('active', models.BooleanField(default=True)),
                ('active_reason', models.CharField(blank=True, max_length=100)),
                ('active_message', models.TextField(blank=True)),
                ('observed_at', models.DateTimeField()),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='org.project')),
            ],
            options={
                'ordering': ['namespace', 'name'],
                'constraints': [models.UniqueConstraint(fields=('namespace', 'name'), name='localqueuestate_unique')],
            },
        ),
        ]),
        migrations.RunPython(move_content_types, unmove_content_types),
    ]
