"""The within/over-deserved split of a share of a card on a KAI pool counts that share of a unit (apps.usage.split,
`quota_units`); slices written before counted each such interval as a whole unit. Every project's timeline on a pool
that holds such intervals is marked for a recompute from its first one (a PendingRecompute row, as the watcher's
deferred writes leave): the watcher's ledger loop, or the first report that reads the slices, recomputes it with the
code of the day and rewrites the UsageDay rows from that day on. Nothing is recomputed here: a migration must not run
services that change over time, and the marks are all the recompute needs."""

from django.db import migrations
from django.db.models import Min


def mark(apps, schema_editor):
    UsageInterval = apps.get_model("usage", "UsageInterval")
    PendingRecompute = apps.get_model("usage", "PendingRecompute")
    PendingRecompute.objects.bulk_create([
        PendingRecompute(project_id=row["project_id"], node_pool_id=row["node_pool_id"], since=row["since"])
        for row in UsageInterval.objects.filter(workload__gpu_fraction__isnull=False).values(
            "project_id", "node_pool_id").annotate(since=Min("started_at")).order_by("project_id", "node_pool_id")])


class Migration(migrations.Migration):

    dependencies = [
        ('usage', '0011_usage_day'),
        ('workloads', '0021_workload_gpu_fraction'),  # the intervals' workloads' fraction
    ]

    operations = [
        migrations.RunPython(mark, migrations.RunPython.noop, elidable=True),
    ]
