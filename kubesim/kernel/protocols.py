"""The interfaces between kubesim's API server half and its Kueue half (kubesim/CONTRACT.md), as typing Protocols.

Neither half imports the other: kubesim.sim loads the Kueue half only when present (it is optional) and hands its
controllers, webhooks and visibility API to the server half through these protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from kubesim.kernel.store import Store


class Controller(Protocol):
    name: str

    def reconcile(self, store: Store) -> bool:
        """One pass; True when it wrote anything."""
        ...

    def next_deadline(self, store: Store) -> datetime | None:
        """The earliest future time it needs to act (timeouts, backoff, run times); None when nothing is pending."""
        ...


class Webhook(Protocol):
    def mutate(self, resource: str, operation: str, obj: dict, old: dict | None, store: Any) -> dict | None:
        """The object to store (obj mutated in place, or a new dict; None keeps obj)."""
        ...

    def validate(
        self, resource: str, operation: str, obj: dict, old: dict | None, store: Any
    ) -> Sequence[tuple[str, str] | tuple[str, str, str]]:
        """(field path, message) or (field path, message, StatusCause reason; FieldValueInvalid when absent) per
        problem; empty when the object is acceptable."""
        ...

    def webhook_name(self, resource: str) -> str:
        """The validating webhook's name for `resource` (vclusterqueue.kb.io, vjob.kb.io ...): a refusal answers 403
        `admission webhook "<name>" denied the request: <errors>`; empty when no validating webhook serves it."""
        ...


class KueueHalf(Protocol):
    """One simulator's Kueue half (kubesim.kueue.Kueue): its controllers, webhooks and the visibility API."""

    def controllers(self) -> list[Controller]: ...

    def admission_webhooks(self) -> list[Webhook]: ...

    def visibility(
        self,
        store: Store,
        *,
        cluster_queue: str | None = None,
        namespace: str | None = None,
        local_queue: str | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> dict: ...


class KueueConfigType(Protocol):
    """What kubesim.sim needs of the Kueue half's configuration class."""

    @classmethod
    def from_dict(cls, data: dict) -> Any: ...

    @classmethod
    def default(cls) -> Any: ...


class KueueModule(Protocol):
    """The Kueue half as a module (kubesim.kueue) or a stand-in with the same names."""

    KueueConfig: Any  # a KueueConfigType

    def Kueue(self, config: Any) -> KueueHalf: ...
