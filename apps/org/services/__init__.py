"""Writes to the organisation, one module per concern. Each service checks access, enforces the quota rules, saves
in one transaction and writes its audit row in that same transaction, so a refused change leaves nothing behind.
Callers import from here (`from apps.org import services`); the modules are:

- `node_pools`, `departments`, `projects`, `priority_classes`: the organisation's rows, one module each;
- `quotas`: one quota at a time (the rules that span rows, each field's bounds by role, the quota guards);
  what they announce to the apps above is in `apps.org.signals`;
- `quota_table`: many cells of one department's quota table at once;
- `budgets`: GPU-hour and cost budgets, the cap of a department's over its projects', and the sweep's writes
  (threshold crossings, holds);
- `policies`: what work in a scope may ask for, one policy per scope, each narrowing the scope above's;
- `kueue_sync`: the org -> Kueue reconcile's bookkeeping, asked for by every committed change;
- `project_data`: a project's data sources and image pull secrets;
- `project_namespaces`: the existing namespaces admins map to a project;
- `serving`: the reservations of serving pools' cards for projects' inference services;
- `notifications`: notification channels and the deliveries (outbox rows) that carry events to them;
- `common`: the access refusal and the collected field errors the others share.
"""

from .budgets import (
    BUDGET_FIELDS,
    budget_cap_errors,
    budget_create,
    budget_crossing_record,
    budget_delete,
    budget_hold_release,
    budget_hold_set,
    budget_update,
)
from .common import DENIED
from .departments import DEPARTMENT_FIELDS, department_create, department_delete, department_update
from .kueue_sync import (
    KUEUE_SYNC_DEADLINE,
    KUEUE_SYNC_INTENT,
    KUEUE_SYNC_RUNS_KEPT,
    KUEUE_SYNC_STALE_AFTER,
    KUEUE_SYNC_TASK,
    kueue_sync_claim,
    kueue_sync_finish,
    kueue_sync_request,
    kueue_sync_request_by,
)
from .node_pools import NODE_POOL_FIELDS, node_pool_create, node_pool_delete, node_pool_update
from .notifications import (
    NOTIFICATION_DELIVER_TASK,
    NOTIFICATION_GIVE_UP,
    NOTIFICATION_INTENT,
    NOTIFICATION_MAX_ATTEMPTS,
    channel_hook,
    notification_channel_create,
    notification_channel_delete,
    notification_channel_reached,
    notification_channel_test,
    notification_channel_turn,
    notification_channel_update,
    notification_delivery_attempted,
    notification_retry_at,
    notifications_emit,
)
from .policies import POLICY_FIELDS, policy_create, policy_delete, policy_update
from .priority_classes import (
    PRIORITY_CLASS_FIELDS,
    priority_class_create,
    priority_class_delete,
    priority_class_update,
)
from .project_data import (
    PULL_SECRET_INTENT,
    PULL_SECRET_TASK,
    SECRET_SYNC_DEADLINE,
    data_source_create,
    data_source_delete,
    pull_secret_create,
    pull_secret_delete,
)
from .project_namespaces import DENIED_MAPPING, project_namespace_map, project_namespace_unmap
from .projects import PROJECT_FIELDS, project_create, project_delete, project_update
from .quota_table import QuotaTableError, quota_table_check, quota_table_save
from .quotas import SIZE_FIELDS, quota_create, quota_delete, quota_rule_errors, quota_set, quota_update
from .serving import (
    SERVING_RESERVATION_FIELDS,
    serving_reservation_create,
    serving_reservation_delete,
    serving_reservation_update,
)

__all__ = [
    "BUDGET_FIELDS",
    "DENIED",
    "DENIED_MAPPING",
    "DEPARTMENT_FIELDS",
    "KUEUE_SYNC_DEADLINE",
    "KUEUE_SYNC_INTENT",
    "KUEUE_SYNC_RUNS_KEPT",
    "KUEUE_SYNC_STALE_AFTER",
    "KUEUE_SYNC_TASK",
    "NODE_POOL_FIELDS",
    "NOTIFICATION_DELIVER_TASK",
    "NOTIFICATION_GIVE_UP",
    "NOTIFICATION_INTENT",
    "NOTIFICATION_MAX_ATTEMPTS",
    "POLICY_FIELDS",
    "PRIORITY_CLASS_FIELDS",
    "PROJECT_FIELDS",
    "PULL_SECRET_INTENT",
    "PULL_SECRET_TASK",
    "SECRET_SYNC_DEADLINE",
    "SERVING_RESERVATION_FIELDS",
    "SIZE_FIELDS",
    "QuotaTableError",
    "budget_cap_errors",
    "budget_create",
    "budget_crossing_record",
    "budget_delete",
    "budget_hold_release",
    "budget_hold_set",
    "budget_update",
    "channel_hook",
    "data_source_create",
    "data_source_delete",
    "department_create",
    "department_delete",
    "department_update",
    "kueue_sync_claim",
    "kueue_sync_finish",
    "kueue_sync_request",
    "kueue_sync_request_by",
    "node_pool_create",
    "node_pool_delete",
    "node_pool_update",
    "notification_channel_create",
    "notification_channel_delete",
    "notification_channel_reached",
    "notification_channel_test",
    "notification_channel_turn",
    "notification_channel_update",
    "notification_delivery_attempted",
    "notification_retry_at",
    "notifications_emit",
    "policy_create",
    "policy_delete",
    "policy_update",
    "priority_class_create",
    "priority_class_delete",
    "priority_class_update",
    "project_create",
    "project_delete",
    "project_namespace_map",
    "project_namespace_unmap",
    "project_update",
    "pull_secret_create",
    "pull_secret_delete",
    "quota_create",
    "quota_delete",
    "quota_rule_errors",
    "quota_set",
    "quota_table_check",
    "quota_table_save",
    "quota_update",
    "serving_reservation_create",
    "serving_reservation_delete",
    "serving_reservation_update",
]
