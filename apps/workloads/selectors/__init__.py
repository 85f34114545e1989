"""Reads of workloads, always scoped through the access module (a row the user may not see does not exist), one
module per concern. Callers import from here (`from apps.workloads import selectors`); the modules are:

- `lookups`: the rows a user may see (the list, a page's workload, a notebook to connect, credentials, templates);
- `submit`: the submit page's side panels and the priority class defaults;
- `policies`: the live work a proposed policy would refuse (the caller has checked the user may set it);
- `forecasts`: the stored start-time forecasts and the record the worker calibrates on;
- `queue`: live queue state (positions, explanations, the project queue, history, live markers);
- `utilisation`: the stored GPU utilisation and the workloads flagged idle;
- `notebooks`: the notebooks the culler asks about, and those idle;
- `tallies`: per project, pool and status, how many workloads and the units they ask for, kept by the database.
"""

from .forecasts import FORECAST_RECORD_SIZE, forecast_record, forecasts_computed_since, forecasts_for
from .lookups import (
    credentials_of,
    default_scope,
    holds_serving_units,
    inference_to_reach,
    notebook_to_connect,
    offers_scope_filter,
    preemptor_id,
    requested_hundredths,
    requested_units,
    serving_pools,
    serving_services,
    serving_units,
    submit_project,
    submit_project_known,
    submit_projects,
    templates,
    workload_for_page,
    workload_list,
    workload_rows,
    workloads_for,
)
from .notebooks import notebooks_gpu_idle, notebooks_idle, notebooks_running
from .policies import BREAKING_SHOWN, Breaking, BreakingPreview, workloads_breaking
from .queue import (
    ClusterEventLine,
    LiveMarker,
    PoolQuotaFigures,
    ProjectQueue,
    annotate_live,
    cluster_events_of,
    explanation_inputs,
    kai_queue_waiting,
    preemptions_seen_by,
    preemptors_visible,
    project_queue,
    project_queue_marker,
    queue_position_label,
    workload_history,
    workload_list_marker,
    workload_live_marker,
)
from .submit import (
    PolicyPanel,
    PoolPanel,
    default_priority_class,
    policy_panel,
    pool_panel,
    preemptible_by_class,
    priority_class_preemptible,
    queue_start_forecast,
    submit_panel,
    submit_pool,
)
from .tallies import Tally, tallies_by_pool, tallies_of, tally_rows, workload_tallies
from .utilisation import UtilisationChart, utilisation_available, workload_utilisation_chart, workloads_held_idle

__all__ = [
    "BREAKING_SHOWN",
    "FORECAST_RECORD_SIZE",
    "Breaking",
    "BreakingPreview",
    "ClusterEventLine",
    "LiveMarker",
    "PolicyPanel",
    "PoolPanel",
    "PoolQuotaFigures",
    "ProjectQueue",
    "Tally",
    "UtilisationChart",
    "annotate_live",
    "cluster_events_of",
    "credentials_of",
    "default_priority_class",
    "default_scope",
    "explanation_inputs",
    "forecast_record",
    "forecasts_computed_since",
    "forecasts_for",
    "holds_serving_units",
    "inference_to_reach",
    "kai_queue_waiting",
    "notebook_to_connect",
    "notebooks_gpu_idle",
    "notebooks_idle",
    "notebooks_running",
    "offers_scope_filter",
    "policy_panel",
    "pool_panel",
    "preemptible_by_class",
    "preemptions_seen_by",
    "preemptor_id",
    "preemptors_visible",
    "priority_class_preemptible",
    "project_queue",
    "project_queue_marker",
    "queue_position_label",
    "queue_start_forecast",
    "requested_hundredths",
    "requested_units",
    "serving_pools",
    "serving_services",
    "serving_units",
    "submit_panel",
    "submit_pool",
    "submit_project",
    "submit_project_known",
    "submit_projects",
    "tallies_by_pool",
    "tallies_of",
    "tally_rows",
    "templates",
    "utilisation_available",
    "workload_for_page",
    "workload_history",
    "workload_list",
    "workload_list_marker",
    "workload_live_marker",
    "workload_rows",
    "workload_tallies",
    "workload_utilisation_chart",
    "workloads_breaking",
    "workloads_for",
    "workloads_held_idle",
]
