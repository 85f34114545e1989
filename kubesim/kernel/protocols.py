"""The interfaces between kubesim's API server half and its Kueue half (kubesim/CONTRACT.md), as typing Protocols.

Neither half imports the other: kubesim.sim loads the Kueue half only when present (it is optional) and hands its
controllers, webhooks and visibility API to the server half through these protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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


class WebhookErrored(Exception):
    """Raised by a webhook's `mutate` or `validate` that cannot handle the request (controller-runtime's
    admission.Errored: an object its Go type cannot decode answers 400): the API server relays `code` and `message`
    under `webhook`'s name."""

    def __init__(self, webhook: str, code: int, message: str) -> None:
        super().__init__(message)
        self.webhook, self.code, self.message = webhook, code, message


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


@dataclass(frozen=True)
class PendingCounts:
    """Pending workloads as Kueue's queue manager counts them (its kueue_pending_workloads and
    kueue_local_queue_pending_workloads gauges): (active, inadmissible) per ClusterQueue, and per (namespace, name)
    of every LocalQueue the manager holds (those not stopped)."""

    cluster_queues: dict[str, tuple[int, int]] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)


class KueueHalf(Protocol):
    """One simulator's Kueue half (kubesim.kueue.Kueue): its controllers, webhooks, the visibility API and the
    queue counts behind Kueue's pending-workload metrics."""

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

    def pending_counts(self, store: Store) -> PendingCounts: ...


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
