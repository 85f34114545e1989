"""The one error a manifest check raises: every problem found, by submission field."""

from __future__ import annotations


class ManifestErrors(Exception):
    """Field -> messages ("manifest" for the object itself, each message starting with the field path)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(message for messages in errors.values() for message in messages))
        self.errors = errors
