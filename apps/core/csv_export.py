"""CSV downloads that a spreadsheet opens safely: streamed line by line, formula-like text neutralised."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator
from typing import Any

from django.http import StreamingHttpResponse


class _Echo:
    """A file-like object whose write returns the line, so csv.writer feeds a streaming response."""

    def write(self, value: str) -> str:
        return value


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"^[-+]?\d+(\.\d+)?$")


def csv_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as text, never runs: text starting like a formula (= + - @, tab, CR; a project
    named =HYPERLINK(...), say) gets a leading apostrophe (OWASP's advice). Plain numbers stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.match(value):
        return f"'{value}"
    return value


def csv_response(rows: Iterable[list[Any]], filename: str) -> StreamingHttpResponse:
    writer = csv.writer(_Echo())
    lines: Iterator[str] = (writer.writerow([csv_cell(value) for value in row]) for row in rows)
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response
