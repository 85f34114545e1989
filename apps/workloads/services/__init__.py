"""Writes to workloads, one module per concern. Users submit and stop; the worker and the watcher move the status
along. Callers import from here (`from apps.workloads import services`); the modules are:

- `transitions`: the one door of every status change (`_transition`) and the outbox rows it closes;
- `submissions`: submit (once per key), the live check, stop, bulk stop, keep a notebook alive;
- `manifests`: submit a Kubernetes manifest of any kind the portal observes;
- `inference`: inference services on serving pools: submit, scale and roll out within the project's reservation;
- `credentials`: users' secrets in a project;
- `templates`: admins' presets for the submission forms;
- `claims`: what the worker does: claim a submission, mark it submitted or refused, record a stop;
- `notebooks`: the activity notebook servers report, and the cull of idle notebooks (found by the selectors);
- `notifications`: e-mail to owners about the changes they opted in to;
- `outside`: what the watcher does with work submitted outside the portal: mirror each Kueue Workload as a row;
- `cluster_events`: what the watcher does with the Kubernetes Events of the workloads' objects: keep them;
- `observe`: what the watcher does: the state machine on the cluster's observations, queue positions, Jobs gone;
- `forecasts`: storing the worker's start-time forecasts;
- `utilisation`: GPU utilisation samples, idle flags and the admin's idle rule;
- `tallies`: folding the workload tallies' changes into them, and rebuilding them from the rows.
"""

from .claims import (
    workload_claim_submit,
    workload_gang_repair_request,
    workload_mark_deployed,
    workload_mark_rejected,
    workload_mark_stopped,
    workload_mark_submit_failed,
    workload_mark_submitted,
    workload_release_claim,
    workload_stop_finish,
)
from .cluster_events import names_another_workload, workload_cluster_events_record
from .credentials import (
    CREDENTIAL_DEADLINE,
    CREDENTIAL_INTENT,
    CREDENTIAL_TASK,
    MAX_CREDENTIAL_KEYS,
    MAX_CREDENTIAL_VALUE,
    credential_create,
    credential_delete,
    credential_values_replace,
)
from .forecasts import FORECAST_FIELDS, workload_forecasts_store
from .inference import (
    INFERENCE_PATCH_INTENT,
    INFERENCE_PATCH_TASK,
    inference_check,
    inference_observe,
    inference_submit,
    inference_submit_once,
    inference_update,
    serving_units_in_use,
)
from .manifests import workload_manifest_validate, workload_submit_manifest_once
from .notebooks import notebook_cull, notebook_cull_gpu_idle, notebook_server_activity_record
from .notifications import NOTIFIABLE, NOTIFY_TASK
from .observe import (
    WATCHER_IGNORES,
    workload_observe,
    workload_positions_set,
    workloads_gone,
    workloads_observe,
    workloads_unmapped,
)
from .outside import workload_mirror_outside, workloads_mirror_outside
from .submissions import (
    BULK_STOP_LIMIT,
    SubmissionKeyReused,
    workload_check,
    workload_stop,
    workload_submit,
    workload_submit_once,
    workload_touch,
    workload_validate,
    workloads_stop,
)
from .tallies import workload_tallies_fold, workload_tallies_rebuild
from .templates import workload_template_create, workload_template_delete, workload_template_update
from .transitions import (
    GANG_REPAIR_INTENT,
    GANG_REPAIR_TASK,
    STOP_DEADLINE,
    STOP_INTENT,
    STOP_TASK,
    SUBMIT_CLAIM_TIMEOUT,
    SUBMIT_DEADLINE,
    SUBMIT_INTENT,
    SUBMIT_TASK,
)
from .utilisation import GPU_IDLE_REASON, IDLE_NOTIFY_TASK, idle_policy_update, workload_utilisation_record

__all__ = [
    "BULK_STOP_LIMIT",
    "CREDENTIAL_DEADLINE",
    "CREDENTIAL_INTENT",
    "CREDENTIAL_TASK",
    "FORECAST_FIELDS",
    "GANG_REPAIR_INTENT",
    "GANG_REPAIR_TASK",
    "GPU_IDLE_REASON",
    "IDLE_NOTIFY_TASK",
    "INFERENCE_PATCH_INTENT",
    "INFERENCE_PATCH_TASK",
    "MAX_CREDENTIAL_KEYS",
    "MAX_CREDENTIAL_VALUE",
    "NOTIFIABLE",
    "NOTIFY_TASK",
    "STOP_DEADLINE",
    "STOP_INTENT",
    "STOP_TASK",
    "SUBMIT_CLAIM_TIMEOUT",
    "SUBMIT_DEADLINE",
    "SUBMIT_INTENT",
    "SUBMIT_TASK",
    "WATCHER_IGNORES",
    "SubmissionKeyReused",
    "credential_create",
    "credential_delete",
    "credential_values_replace",
    "idle_policy_update",
    "inference_check",
    "inference_observe",
    "inference_submit",
    "inference_submit_once",
    "inference_update",
    "names_another_workload",
    "notebook_cull",
    "notebook_cull_gpu_idle",
    "notebook_server_activity_record",
    "serving_units_in_use",
    "workload_check",
    "workload_claim_submit",
    "workload_cluster_events_record",
    "workload_forecasts_store",
    "workload_gang_repair_request",
    "workload_manifest_validate",
    "workload_mark_deployed",
    "workload_mark_rejected",
    "workload_mark_stopped",
    "workload_mark_submit_failed",
    "workload_mark_submitted",
    "workload_mirror_outside",
    "workload_observe",
    "workload_positions_set",
    "workload_release_claim",
    "workload_stop",
    "workload_stop_finish",
    "workload_submit",
    "workload_submit_manifest_once",
    "workload_submit_once",
    "workload_tallies_fold",
    "workload_tallies_rebuild",
    "workload_template_create",
    "workload_template_delete",
    "workload_template_update",
    "workload_touch",
    "workload_utilisation_record",
    "workload_validate",
    "workloads_gone",
    "workloads_mirror_outside",
    "workloads_observe",
    "workloads_stop",
    "workloads_unmapped",
]
