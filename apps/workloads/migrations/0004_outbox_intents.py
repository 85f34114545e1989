"""Rows already waiting on the cluster get their outbox intents (apps.core.intents), due at once: submissions still
`submitting` and stops still `stopping` (before the outbox, a stop the broker lost was never sent again)."""

from django.db import migrations
from django.utils import timezone

KINDS = {
    "submitting": ("workload.submit", "worker.tasks.workload_submit"),
    "stopping": ("workload.stop", "worker.tasks.workload_stop"),
}


def record(apps, schema_editor):
    workload_model = apps.get_model("workloads", "Workload")
    intent_model = apps.get_model("core", "Intent")
    now = timezone.now()
    for status, (kind, task) in KINDS.items():
        waiting = workload_model.objects.filter(status=status).values_list("pk", flat=True)
        open_ = set(intent_model.objects.filter(kind=kind, done_at__isnull=True).values_list("target_id", flat=True))
        intent_model.objects.bulk_create([
            intent_model(kind=kind, task=task, target_id=pk, created_at=now, next_attempt_at=now)
            for pk in waiting if pk not in open_
        ], batch_size=500)


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0002_intent"),
        ("workloads", "0003_log_tail"),
    ]

    operations = [
        migrations.RunPython(record, migrations.RunPython.noop),
    ]
