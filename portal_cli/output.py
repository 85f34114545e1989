"""`-o table|wide|json|yaml`: the API's own data for scripts (json, yaml), a rich table for people (wide: with more
columns, where a command has them)."""

from __future__ import annotations

import io
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

FORMATS = ("table", "wide", "json", "yaml")
Columns = Sequence[tuple[str, Callable[[Any], Any]]]


def render(data: Any, fmt: str, *, columns: Columns = (), wide: Columns = (), rows: Sequence[Any] | None = None,
           title: str | None = None) -> str:
    """`data` as JSON or YAML as the API gave it, or `rows` (default: `data`) as a table of `columns` (header, cell
    function), plus the `wide` ones with `-o wide`; a mapping without columns is a two-column table of its fields.
    Ends with a newline."""
    if fmt == "json":
        return json.dumps(data, indent=2, default=str) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip() + "\n"
    table = Table(title=title, show_edge=False, header_style="bold")
    shown = [*columns, *wide] if fmt == "wide" else list(columns)
    if shown:
        for header, _ in shown:
            table.add_column(header, overflow="fold")
        for row in rows if rows is not None else data:
            table.add_row(*(_cell(value_of(row)) for _header, value_of in shown))
    else:
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in data.items():
            table.add_row(Text(str(key)), _cell(value))
    buffer = io.StringIO()
    # Piped (a script's grep, a test): wide enough that rows stay one line each (-o wide: however many columns).
    terminal = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if terminal else (1000 if fmt == "wide" else 200)
    Console(file=buffer, width=width, force_terminal=terminal,
            color_system="auto" if terminal else None).print(table)
    return buffer.getvalue()


def emit(data: Any, fmt: str, **options: Any) -> None:
    """Print what `render` makes of `data`."""
    click.echo(render(data, fmt, **options), nl=False)


def _cell(value: Any) -> Text:
    """A cell as plain text: rich would read "[...]" in a value (a log line, a message) as markup."""
    if value is None:
        return Text("-")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, list | dict):
        return Text(json.dumps(value, default=str))
    return Text(str(value))
