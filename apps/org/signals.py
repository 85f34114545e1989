"""What the org app announces to the apps above it, and the one way a lower app's change reaches a higher app.

The stack (core and the cluster mirror < accounts < org < workloads < usage < worker) lets an app import only the apps
below it. When a change in a lower app must reach a higher one in the same process (a quota's deserved units feed
the usage ledger; the workloads app may refuse a quota that its running work relies on), the lower app declares a
Django `Signal` here, in its own `signals.py`, with a docstring of its keyword arguments and of what its receivers
may return; its services SEND it explicitly, inside their transaction, so reading the service shows every effect
(a receiver's rows commit or roll back with the change); and the higher app CONNECTS its receiver only in its
`AppConfig.ready()`, with a `dispatch_uid`. Nothing else: no model signals (`post_save`, `post_delete`), no
registries filled at import time. The same holds for `apps.workloads.signals`.

Work for the worker goes the other way round: the apps name its Celery tasks by string (`*_TASK` constants, sent
after commit through `apps.core.tasks` or an outbox intent) and never import `worker`; a test resolves every such
name against the tasks the worker registers.
"""

from django.dispatch import Signal

quota_deserved_changed = Signal()
"""A quota's deserved units changed, sent by the quota services right after the row is written (same transaction):
on create (whatever its value), when an update changes `deserved`, and on the quota's own deletion (then 0).
Deleting its project, department or pool sends nothing (those deletions take the ledger rows with them, or are
refused while the quota exists).

kwargs: `quota` (the Quota as saved, or as it was when deleted; its project and node pool are loaded),
`deserved` (int, the units in force from now on). Receivers return nothing."""

quota_size_proposed = Signal()
"""A quota's size is about to be saved (created, its sizes changed, or deleted: then proposed with deserved 0), sent
by the quota services and the quota table before they save, and by the table's live check.

kwargs: `quota` (the Quota with the proposed values, unsaved; its node pool and owner loaded). Each receiver returns
its refusals, field name -> list of messages (`django.core.exceptions.NON_FIELD_ERRORS` for the quota as a whole),
or an empty mapping or None when it has none: the services collect them all and refuse the change with every
message, field by field, and save nothing."""

node_pool_scheduler_change_proposed = Signal()
"""A node pool's scheduler (Kueue or KAI) is about to change, sent by the node pool update service before it saves.

kwargs: `node_pool` (the NodePool with the proposed scheduler, unsaved). Each receiver returns its refusals as
`quota_size_proposed`'s do (field name -> messages, or nothing): the service refuses the change with every message
and saves nothing. Work live on the pool was queued by the scheduler it had, which would lose it."""
