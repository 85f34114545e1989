"""`-o json|yaml|table`: the API's own data for scripts (json, yaml), a rich table for people."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

FORMATS = ("table", "json", "yaml")


def emit(data: Any, fmt: str, *, columns: Sequence[tuple[str, Callable[[Any], Any]]] = (),
         rows: Sequence[Any] | None = None, title: str | None = None) -> None:
    """Print `data` as JSON or YAML as the API gave it, or `rows` (default: `data`) as a table of `columns`
    (header, cell function); a mapping without columns prints as a two-column table of its fields."""
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, default=str))
        return
    if fmt == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip())
        return
    table = Table(title=title, show_edge=False, header_style="bold")
    if columns:
        for header, _ in columns:
            table.add_column(header, overflow="fold")
        for row in rows if rows is not None else data:
            table.add_row(*(_cell(value_of(row)) for _header, value_of in columns))
    else:
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in data.items():
            table.add_row(Text(str(key)), _cell(value))
    # Piped (a script's grep, a test): wide enough that rows stay one line each.
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def _cell(value: Any) -> Text:
    """A cell as plain text: rich would read "[...]" in a value (a log line, a message) as markup."""
    if value is None:
        return Text("-")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, list | dict):
        return Text(json.dumps(value, default=str))
    return Text(str(value))
