"""Backfill the within-deserved split of the existing ledger: one deserved period per project quota (today's value,
from the beginning: quota history was not versioned before this), then the slices of every project's intervals on
every pool, computed by apps.usage.split (a pure function, stable for migrations)."""

from django.db import migrations

from apps.usage import split

BATCH = 5000


def backfill(apps, schema_editor):
    Quota = apps.get_model("org", "Quota")
    DeservedPeriod = apps.get_model("usage", "DeservedPeriod")
    UsageInterval = apps.get_model("usage", "UsageInterval")
    UsageSlice = apps.get_model("usage", "UsageSlice")
    DeservedPeriod.objects.bulk_create([
        DeservedPeriod(project_id=project_id, department_id=department_id, node_pool_id=pool_id, deserved=deserved,
                       started_at=split.BEGINNING)
        for project_id, department_id, pool_id, deserved in Quota.objects.filter(project__isnull=False).values_list(
            "project_id", "project__department_id", "node_pool_id", "deserved")
    ], batch_size=BATCH)
    periods = {}
    for project_id, pool_id, started_at, deserved in DeservedPeriod.objects.values_list(
            "project_id", "node_pool_id", "started_at", "deserved"):
        periods.setdefault((project_id, pool_id), []).append((started_at, deserved))
    timelines = UsageInterval.objects.values_list("project_id", "node_pool_id").distinct().order_by()
    for project_id, pool_id in list(timelines):
        rows = {row[0]: row for row in UsageInterval.objects.filter(project_id=project_id, node_pool_id=pool_id)
                .values_list("pk", "started_at", "ended_at", "units", "queue", "department_id", "user_id",
                             "card_fraction_numerator", "card_fraction_denominator").iterator(chunk_size=BATCH)}
        held = [split.Held(pk, start, end, units, queue == "guaranteed")
                for pk, start, end, units, queue, *_ in rows.values()]
        pieces = split.split(held, periods.get((project_id, pool_id), []), split.BEGINNING)
        UsageSlice.objects.bulk_create([
            UsageSlice(interval_id=piece.interval_id, project_id=project_id, node_pool_id=pool_id,
                       department_id=rows[piece.interval_id][5], user_id=rows[piece.interval_id][6],
                       units=rows[piece.interval_id][3], card_fraction_numerator=rows[piece.interval_id][7],
                       card_fraction_denominator=rows[piece.interval_id][8], share_numerator=piece.numerator,
                       share_denominator=piece.denominator, started_at=piece.start, ended_at=piece.end)
            for piece in pieces], batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ("usage", "0005_usage_split_by_deserved"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
    ]
