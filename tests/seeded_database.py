"""The test database's seeded state, copied once inside the database and put back after each transactional test.

A `db` test rolls back to the seeded demo organisation; a transactional test (real worker and watcher threads need
committed rows) cannot, and Django would empty every table after it, leaving the next test to seed the organisation
again through the services (about a second each, more on a busy machine). Instead the seeded rows are copied once,
table by table, into the database itself (a schema of its own on PostgreSQL, an attached file on SQLite), and after a
transactional test every table is emptied and refilled from the copy in one transaction (a few tens of
milliseconds): the next test, transactional or not, starts from exactly the rows every `db` test sees.
"""

from __future__ import annotations

from pathlib import Path

from django.db.backends.base.base import BaseDatabaseWrapper

SCHEMA = "seeded_snapshot"


class SeededDatabase:
    """The rows of every table of the test database at take() time, and restore() back to them."""

    def __init__(self, connection: BaseDatabaseWrapper, tables: list[str], filled: list[str],
                 highest: list[tuple[str, str, int]]) -> None:
        self.connection = connection
        self.tables = tables  # every table of the installed models
        self.filled = filled  # the ones with rows to put back
        self.highest = highest  # PostgreSQL: (table, column, highest id put back) per sequence-numbered column

    @classmethod
    def take(cls, connection: BaseDatabaseWrapper) -> SeededDatabase:
        tables = sorted(connection.introspection.django_table_names(only_existing=True, include_views=False))
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
                cursor.execute(f"CREATE SCHEMA {SCHEMA}")
            else:
                _snapshot_file(connection).unlink(missing_ok=True)
                _attach(connection)
            filled = []
            for table in tables:  # names of the installed models' tables, quoted: no outside input
                cursor.execute(f"CREATE TABLE {SCHEMA}.{qn(table)} AS SELECT * FROM {qn(table)}")  # noqa: S608
                cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {SCHEMA}.{qn(table)})")  # noqa: S608
                if cursor.fetchone()[0]:
                    filled.append(table)
            highest = []
            if connection.vendor == "postgresql":
                for table in filled:
                    for sequence in connection.introspection.get_sequences(cursor, table):
                        column = sequence["column"]
                        cursor.execute(f"SELECT max({qn(column)}) FROM {SCHEMA}.{qn(table)}")  # noqa: S608
                        highest.append((table, column, cursor.fetchone()[0]))
        return cls(connection, tables, filled, highest)

    def restore(self) -> None:
        """Every table back to its copied rows, in one transaction (the foreign keys are checked at its end)."""
        from django.contrib.contenttypes.models import ContentType
        from django.db import transaction

        qn = self.connection.ops.quote_name
        if self.connection.vendor == "sqlite":
            _attach(self.connection)
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cursor:
            if self.connection.vendor == "postgresql":
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            for table in self.tables:  # names of the installed models' tables, quoted: no outside input
                cursor.execute(f"DELETE FROM {qn(table)}")  # noqa: S608
            for table in self.filled:
                cursor.execute(f"INSERT INTO {qn(table)} SELECT * FROM {SCHEMA}.{qn(table)}")  # noqa: S608
            if self.highest:
                # Ids keep counting up from where they were (as after Django's flush), unless a test started a
                # sequence again (a migration test dropping a table): then from past the rows put back.
                values = ", ".join(["(%s, %s, %s)"] * len(self.highest))
                cursor.execute(
                    f"SELECT setval(sequence, top) FROM (VALUES {values}) AS put_back(name, id_column, top) "  # noqa: S608
                    "CROSS JOIN LATERAL pg_get_serial_sequence(name, id_column) AS sequence "
                    "WHERE coalesce(pg_sequence_last_value(sequence::regclass), 0) < top",
                    [value for row in self.highest for value in row])
        ContentType.objects.clear_cache()  # a test may have moved content types (the migration tests do)

    def drop(self) -> None:
        """Remove the copy (SQLite: its file; PostgreSQL's schema goes with the test database)."""
        if self.connection.vendor == "sqlite":
            with self.connection.cursor() as cursor:
                if _attached(self.connection):
                    cursor.execute(f"DETACH DATABASE {SCHEMA}")
            _snapshot_file(self.connection).unlink(missing_ok=True)


def _snapshot_file(connection: BaseDatabaseWrapper) -> Path:
    return Path(f"{connection.settings_dict['NAME']}.seeded")


def _attached(connection: BaseDatabaseWrapper) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA database_list")
        return any(row[1] == SCHEMA for row in cursor.fetchall())


def _attach(connection: BaseDatabaseWrapper) -> None:
    """SQLite: the copy lives in a file beside the test database, attached to this connection when it is not yet."""
    if not _attached(connection):
        with connection.cursor() as cursor:
            cursor.execute(f"ATTACH DATABASE %s AS {SCHEMA}", [str(_snapshot_file(connection))])
