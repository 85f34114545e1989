"""The workload tallies count a share of a card (`gpu_fraction`, work on a KAI pool) as that share, not as 0: their
units are kept in hundredths of a unit (`unit_hundredths`, exact integers on SQLite as on PostgreSQL), the triggers
count them so and also fire when a row's fraction changes, and the tallies are counted afresh from the rows (the
changes waiting to be folded were counted in whole units). Backwards: the triggers and whole units of 0025."""

from importlib import import_module

from django.db import migrations

previous = import_module("apps.workloads.migrations.0025_workload_tallies")

# A row's GPUs in hundredths of a unit, as `apps.workloads.selectors.requested_hundredths` counts them: the share of
# a card of a fractional pod (one pod: 0.5 -> 50), else 0025's whole units x 100.
HUNDREDTHS = ("CASE WHEN {row}.gpu_fraction IS NOT NULL THEN CAST(ROUND({row}.gpu_fraction * 100) AS INTEGER)"
              f" ELSE 100 * ({previous.UNITS}) END")
CHANGE = "INSERT INTO workloads_workloadtallychange (project_id, node_pool_id, status, workloads, unit_hundredths)"
TALLIED = (*previous.TALLIED, "gpu_fraction")


def _units(row: str, least: str) -> str:
    return HUNDREDTHS.format(row=row, least=least)


POSTGRESQL = [
    f"""CREATE FUNCTION workload_tally_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        {CHANGE} SELECT r.project_id, r.node_pool_id, r.status, count(*), sum({_units("r", "LEAST")})
        FROM inserted r GROUP BY r.project_id, r.node_pool_id, r.status;
        RETURN NULL;
    END $$""",
    f"""CREATE FUNCTION workload_tally_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        {CHANGE} SELECT r.project_id, r.node_pool_id, r.status, -count(*), -sum({_units("r", "LEAST")})
        FROM deleted r GROUP BY r.project_id, r.node_pool_id, r.status;
        RETURN NULL;
    END $$""",
    f"""CREATE FUNCTION workload_tally_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        {CHANGE} VALUES (OLD.project_id, OLD.node_pool_id, OLD.status, -1, -({_units("OLD", "LEAST")})),
        (NEW.project_id, NEW.node_pool_id, NEW.status, 1, {_units("NEW", "LEAST")});
        RETURN NULL;
    END $$""",
    previous.POSTGRESQL[3],  # the truncate function: it names no units
    previous.POSTGRESQL[4],
    previous.POSTGRESQL[5],
    f"CREATE TRIGGER workload_tally_update AFTER UPDATE OF {', '.join(TALLIED)} ON workloads_workload FOR EACH ROW"
    f" WHEN ({' OR '.join(f'OLD.{c} IS DISTINCT FROM NEW.{c}' for c in TALLIED)})"
    " EXECUTE FUNCTION workload_tally_updated()",
    previous.POSTGRESQL[7],
]
SQLITE = [
    f"""CREATE TRIGGER workload_tally_insert AFTER INSERT ON workloads_workload BEGIN
        {CHANGE} VALUES (NEW.project_id, NEW.node_pool_id, NEW.status, 1, {_units("NEW", "MIN")});
    END""",
    f"""CREATE TRIGGER workload_tally_delete AFTER DELETE ON workloads_workload BEGIN
        {CHANGE} VALUES (OLD.project_id, OLD.node_pool_id, OLD.status, -1, -({_units("OLD", "MIN")}));
    END""",
    f"""CREATE TRIGGER workload_tally_update AFTER UPDATE OF {', '.join(TALLIED)} ON workloads_workload
    WHEN {' OR '.join(f'OLD.{c} IS NOT NEW.{c}' for c in TALLIED)} BEGIN
        {CHANGE} VALUES (OLD.project_id, OLD.node_pool_id, OLD.status, -1, -({_units("OLD", "MIN")})),
        (NEW.project_id, NEW.node_pool_id, NEW.status, 1, {_units("NEW", "MIN")});
    END""",
]


def _hold(schema_editor) -> bool:
    """Writes of workloads wait until the migration's transaction ends (SQLite has one writer): no change is lost
    between the old triggers and the new, nor counted twice by the recount."""
    postgresql = schema_editor.connection.vendor == "postgresql"
    if postgresql:
        schema_editor.execute("LOCK TABLE workloads_workload IN SHARE ROW EXCLUSIVE MODE")
    return postgresql


def _recount(schema_editor, *, column: str, units: str) -> None:
    """Every tally counted afresh from the rows into `column` (`units`: a row's amount in SQL, {row} and {least} to
    fill); each tally's count of changes goes on growing (poll markers compare it), one more for the recount."""
    least = "LEAST" if schema_editor.connection.vendor == "postgresql" else "MIN"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT project_id, node_pool_id, status, changes FROM workloads_workloadtally")
        changes = {(project_id, pool_id, status): folded + 1 for project_id, pool_id, status, folded in cursor}
        cursor.execute("SELECT project_id, node_pool_id, status, count(*) FROM workloads_workloadtallychange"
                       " GROUP BY project_id, node_pool_id, status")
        for project_id, pool_id, status, pending in cursor.fetchall():
            key = (project_id, pool_id, status)
            changes[key] = changes.get(key, 1) + pending
        cursor.execute("DELETE FROM workloads_workloadtallychange")
        cursor.execute("DELETE FROM workloads_workloadtally")
        cursor.execute(f"INSERT INTO workloads_workloadtally (project_id, node_pool_id, status, workloads, {column},"
                       f" changes) SELECT w.project_id, w.node_pool_id, w.status, count(*),"
                       f" sum({units.format(row='w', least=least)}), 0 FROM workloads_workload w"
                       " GROUP BY w.project_id, w.node_pool_id, w.status")
        cursor.executemany("UPDATE workloads_workloadtally SET changes = %s"
                           " WHERE project_id = %s AND node_pool_id = %s AND status = %s",
                           [(count, *key) for key, count in sorted(changes.items())])


def whole_triggers_drop(apps, schema_editor):
    postgresql = _hold(schema_editor)
    for statement in previous.POSTGRESQL_DROP if postgresql else previous.SQLITE_DROP:
        schema_editor.execute(statement)


def whole_triggers_create(apps, schema_editor):
    postgresql = _hold(schema_editor)
    for statement in previous.POSTGRESQL if postgresql else previous.SQLITE:
        schema_editor.execute(statement)
    _recount(schema_editor, column="units", units=previous.UNITS)


def hundredths_triggers_create(apps, schema_editor):
    postgresql = _hold(schema_editor)
    for statement in POSTGRESQL if postgresql else SQLITE:
        schema_editor.execute(statement)
    _recount(schema_editor, column="unit_hundredths", units=HUNDREDTHS)


def hundredths_triggers_drop(apps, schema_editor):
    postgresql = _hold(schema_editor)
    for statement in previous.POSTGRESQL_DROP if postgresql else previous.SQLITE_DROP:  # the same names
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('workloads', '0025_workload_tallies'),
    ]

    operations = [
        migrations.RunPython(whole_triggers_drop, whole_triggers_create),
        migrations.RenameField(model_name='workloadtally', old_name='units', new_name='unit_hundredths'),
        migrations.RenameField(model_name='workloadtallychange', old_name='units', new_name='unit_hundredths'),
        migrations.RunPython(hundredths_triggers_create, hundredths_triggers_drop),
    ]
