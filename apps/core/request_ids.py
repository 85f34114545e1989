"""The request id that follows one piece of work through the web request, its Celery tasks and the Job's
annotations (kueue_names.REQUEST_ID_ANNOTATION), and stands in every log line on the way."""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar, Token

HEADER = "X-Request-ID"
TASK_HEADER = "portal_request_id"  # the Celery message header that carries it to the worker
_SAFE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_current: ContextVar[str] = ContextVar("portal_request_id", default="")


def current() -> str:
    """The id of the work in progress here; empty outside a request or task (beat, the watcher, a shell)."""
    return _current.get()


def accepted(value: str | None) -> str:
    """A caller's id when it is a plain token (no log or header injection), else a new one."""
    if value and _SAFE.fullmatch(value):
        return value
    return uuid.uuid4().hex


def bind(value: str) -> Token[str]:
    return _current.set(value)


def unbind(token: Token[str]) -> None:
    _current.reset(token)


def _tag(record: logging.LogRecord) -> None:
    request_id = current()
    record.request_id = request_id
    record.request_tag = f" [{request_id}]" if request_id else ""


def install_record_factory() -> None:
    """Every log record carries the id from its creation, whichever handler (or test capture) reads it, even where
    a library reconfigured the handlers (Celery's worker does). Idempotent."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "tags_request_id", False):
        return

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _tag(record)
        return record

    factory.tags_request_id = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class RequestIdFilter(logging.Filter):
    """Gives every log record a `request_id` (empty when there is none) and, for the plain format, `request_tag`
    (" [<id>]", or nothing)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):  # made before the factory was installed
            _tag(record)
        return True
