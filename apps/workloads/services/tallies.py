"""Folding the workload tallies' changes into them, and rebuilding them from the rows (docs/architecture.md,
Figures kept rather than counted).

The database appends a change for every write that moves a workload between tallies (the triggers of the
`workload_tallies` migration), so writers never wait for each other on a tally; these two are the only Python that
writes the tallies."""

from __future__ import annotations

from collections import defaultdict

from django.db import connection, transaction
from django.db.models import Count, Sum

from apps.workloads.models import Workload, WorkloadTally, WorkloadTallyChange
from apps.workloads.selectors import requested_hundredths

# Adds to a tally (a new one starts from nothing): two folds at once add up, neither loses the other's changes.
_ADD = ("INSERT INTO workloads_workloadtally (project_id, node_pool_id, status, workloads, unit_hundredths, changes)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (project_id, node_pool_id, status) DO UPDATE SET"
        " workloads = workloads_workloadtally.workloads + excluded.workloads,"
        " unit_hundredths = workloads_workloadtally.unit_hundredths + excluded.unit_hundredths,"
        " changes = workloads_workloadtally.changes + excluded.changes")
_TAKE = ("DELETE FROM workloads_workloadtallychange"
         " RETURNING project_id, node_pool_id, status, workloads, unit_hundredths")
_HOLD = "LOCK TABLE workloads_workload IN SHARE ROW EXCLUSIVE MODE"


def workload_tallies_fold() -> int:
    """Add every committed change into its tally and delete it, in one transaction; returns how many changes.

    `DELETE ... RETURNING` takes exactly the changes it removes: one still uncommitted is neither seen nor removed
    and waits for the next fold, and a fold running at the same time gets the others. Beat runs it every few
    seconds, so a tally's changes stay few and reading them costs little."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_TAKE)
        sums: dict[tuple[int, int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
        for project_id, pool_id, status, workloads, hundredths in cursor.fetchall():
            total = sums[(project_id, pool_id, status)]
            total[0] += workloads
            total[1] += hundredths
            total[2] += 1
        if sums:
            cursor.executemany(_ADD, [(*key, *total) for key, total in sorted(sums.items())])
    return sum(total[2] for total in sums.values())


def workload_tallies_rebuild() -> int:
    """The tallies counted afresh from the rows (a repair: after a restore, or a change the triggers could not see);
    returns how many tallies there are. While it counts, writes of workloads wait (PostgreSQL: the workloads table is
    held against writes; SQLite has one writer), so no change is counted twice or lost."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(_HOLD)
        # Each tally's count of changes goes on growing (poll markers compare it), one more for the rebuild.
        changes: dict[tuple[int, int, str], int] = defaultdict(lambda: 1)
        for project_id, pool_id, status, folded in WorkloadTally.objects.values_list(
                "project_id", "node_pool_id", "status", "changes"):
            changes[(project_id, pool_id, status)] += folded
        for project_id, pool_id, status, pending in WorkloadTallyChange.objects.values_list(
                "project_id", "node_pool_id", "status").annotate(pending=Count("pk")).order_by():
            changes[(project_id, pool_id, status)] += pending
        WorkloadTallyChange.objects.all().delete()
        WorkloadTally.objects.all().delete()
        counted = Workload.objects.values_list("project_id", "node_pool_id", "status").annotate(
            count=Count("pk"), hundredths=Sum(requested_hundredths())).order_by()
        WorkloadTally.objects.bulk_create([
            WorkloadTally(project_id=project_id, node_pool_id=pool_id, status=status, workloads=count,
                          unit_hundredths=hundredths or 0, changes=changes[(project_id, pool_id, status)])
            for project_id, pool_id, status, count, hundredths in counted], batch_size=1000)
    return WorkloadTally.objects.count()
