"""When each deserved period really came into force (DeservedPeriod.in_force_from): later periods began when they say;
a project's first period on a pool (started_at = split.BEGINNING) began when its quota was created, read from the
audit log (the first `quota.create` of that project and pool), else the later of the project's and the pool's
creation, the earliest the quota can have existed."""

from django.db import migrations, models

from apps.usage import split

BATCH = 5000


def backfill(apps, schema_editor):
    DeservedPeriod = apps.get_model("usage", "DeservedPeriod")
    AuditEvent = apps.get_model("core", "AuditEvent")
    DeservedPeriod.objects.exclude(started_at=split.BEGINNING).update(in_force_from=models.F("started_at"))
    first = DeservedPeriod.objects.filter(started_at=split.BEGINNING)
    created = {}
    for after, moment in AuditEvent.objects.filter(action="quota.create", project__isnull=False).order_by(
            "at").values_list("after", "at").iterator(chunk_size=BATCH):
        key = ((after or {}).get("project_id"), (after or {}).get("node_pool_id"))
        created.setdefault(key, moment)
    changed = []
    for period in first.select_related("project", "node_pool").iterator(chunk_size=BATCH):
        moment = created.get((period.project_id, period.node_pool_id)) or max(period.project.created_at,
                                                                              period.node_pool.created_at)
        if period.ended_at is not None:
            moment = min(moment, period.ended_at)
        period.in_force_from = max(moment, split.BEGINNING)
        changed.append(period)
    DeservedPeriod.objects.bulk_update(changed, ["in_force_from"], batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0001_initial"),
        ("usage", "0009_pending_recompute"),
    ]

    operations = [
        # Filled with the beginning, then each row's own moment: no ALTER after the update (PostgreSQL refuses one
        # while the update's deferred constraint checks are pending).
        migrations.AddField(
            model_name="deservedperiod",
            name="in_force_from",
            field=models.DateTimeField(default=split.BEGINNING, help_text="When the quota came into force: deserved GPU-hours count from here (started_at is split.BEGINNING for a first period)."),
            preserve_default=False,
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.AddConstraint(
            model_name="deservedperiod",
            constraint=models.CheckConstraint(condition=models.Q(in_force_from__gte=models.F("started_at")),
                                              name="deservedperiod_in_force_after_start"),
        ),
    ]
