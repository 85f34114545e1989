"""The audit log, moved here from org with its rows (org 0004 renamed the table): state only, then the index takes
its new name and the content type its new app."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


OLD_INDEX = 'org_auditev_object__5c0c8c_idx'


def _indexes(apps):
    model = apps.get_model('core', 'AuditEvent')
    old = models.Index(fields=['object_type', 'object_id'], name=OLD_INDEX)
    return model, old, model._meta.indexes[0]


def rename_index(apps, schema_editor):
    model, old, new = _indexes(apps)
    schema_editor.rename_index(model, old, new)


def unrename_index(apps, schema_editor):
    model, old, new = _indexes(apps)
    schema_editor.rename_index(model, new, old)


def move_content_type(apps, schema_editor, source='org', target='core'):
    content_types = apps.get_model('contenttypes', 'ContentType')
    if not content_types.objects.filter(app_label=target, model='auditevent').exists():
        content_types.objects.filter(app_label=source, model='auditevent').update(app_label=target)


def unmove_content_type(apps, schema_editor):
    move_content_type(apps, schema_editor, source='core', target='org')


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('org', '0004_move_auditevent_to_core'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.CreateModel(
            name='AuditEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('action', models.CharField(db_index=True, max_length=60)),
                ('object_type', models.CharField(max_length=60)),
                ('object_id', models.CharField(max_length=60)),
                ('object_repr', models.CharField(max_length=200)),
                ('before', models.JSONField(blank=True, null=True)),
                ('after', models.JSONField(blank=True, null=True)),
                ('actor', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('department', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='org.department')),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='org.project')),
            ],
            options={
                'ordering': ['-at', '-id'],
                'indexes': [models.Index(fields=['object_type', 'object_id'], name='core_audite_object__bbabc4_idx')],
            },
        )]),
        migrations.RunPython(rename_index, unrename_index),
        migrations.RunPython(move_content_type, unmove_content_type),
    ]
