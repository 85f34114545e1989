"""GPU-hour reports over the usage ledger: reads only, always scoped through apps.accounts.access.

Definitions (docs/architecture.md, The organisation in Kueue):

- **GPU-hours are physical card hours**: units x card fraction x hours. The fraction is the one copied onto each
  interval when it opened (a 3g.40gb MIG slice is 3/7 of a card, one of 8 time-sliced replicas 1/8), so later edits
  of a pool never rewrite history. Allocation, not utilisation: a held card counts whether or not it was busy.
- **The window is [start, end)**. Every interval is clipped to it; an open interval counts up to `now`, and the
  window itself ends at `now` when it reaches into the future.
- **Within deserved vs over quota** follows the organisation's quota, not the ClusterQueue a workload ran in: at each
  moment a project's held units H(t) on a pool (guaranteed and elastic queues together) are within deserved up to
  its deserved quota D(t) and over quota above it; non-preemptible work fills deserved first, preemptible work shares
  the rest of it in proportion to units (apps/usage/split.py has the rule and why). A preemptible job inside its
  project's deserved quota is not borrowing. The split is precomputed by the ledger writers as UsageSlice rows
  (stretches of an interval with a constant within-deserved share), so reports stay one aggregate query; within
  plus over quota is every interval's GPU-hours, and per-user, per-workload, per-project, per-department and
  per-pool rows add up to one another.
- **Deserved at each moment** comes from DeservedPeriod rows: written whenever a project quota changes (inside the
  quota change's transaction), so a change counts from then on and closed months keep the quota they had. For the
  *split*, a project's first quota on a pool also covers the time before it (work the cluster's clock dates a few
  seconds before the quota is still within it); quotas set before the periods existed count with the value they had
  then (the migration backfilled the quota rows of that day; older history is only in the audit log, AuditEvent
  rows `quota.*`).
- **Deserved GPU-hours** = deserved units x the pool's card fraction x the hours of the window (up to now) each
  quota was in force, from the moment it came into force (`DeservedPeriod.in_force_from`: a quota created today
  deserves nothing for the earlier days of the month), summed over the *project* quotas in the group: within-deserved
  usage draws from exactly that (a department's deserved units not handed to a project are only lent, never used
  directly). As the quota rules hold at every moment, a pool's deserved GPU-hours never exceed what its cards give
  in the window, unless it is over-subscribable. There is no deserved figure per user, nor when the report is
  narrowed to one user.
- **Utilisation** (with a Prometheus, `PROMETHEUS_URL`): the mean GPU utilisation of the allocated GPU-hours that
  were measured (used card hours / measured card hours) and the "allocated but idle" GPU-hours, measured below the
  idle policy's threshold, from the hourly UtilisationHour rows the worker adds up from Prometheus' samples (one
  more aggregate query; hours whose start lies in the window count). Without a Prometheus both are absent and the
  page says why.
- **Cost** (chargeback) = GPU-hours x the pool's price per card-hour *in force when they were used*
  (NodePoolPrice, the pool's price history): a slice that spans a price change is priced per part, so a new price
  never re-prices past hours or closed months. None when none of the group's usage was on a pool while it had a
  price; unpriced stretches add nothing. Where one price held a pool for a whole bucket the cost is its hours x that
  price; where it changed inside, the ledger aggregate also sums the card hours of each priced stretch (a few more
  columns of the same query, one more query for the price history).

The arithmetic runs in the database: one aggregate query over the slices, grouped by (group key, pool), with each
slice clipped by Greatest/Least, its duration turned into seconds (works on PostgreSQL and SQLite) and weighted by
its within-deserved share; one more over the deserved periods. The grouped rows (groups x pools at most) are folded
into report rows in Python; the number of queries does not depend on the number of intervals, projects or users.

The package: `window` (the period), `ledger` (the visible rows and the arithmetic), `showback` (the report and its
table), `card_holders` (who held the cards). Its callers read it through the names below.
"""

from .card_holders import HOLDER_COLUMNS, HolderFilters, held_split, holder_rows, holders, timeline
from .fairness import Fairness, FairnessRow, fairness
from .ledger import overlapping, visible_users
from .over_time import MAX_BUCKETS, Granularity, UseOverTime, bucket_count, series_table, use_over_time
from .showback import (
    Filters,
    Group,
    Report,
    ReportRow,
    chart,
    grouped_ledger,
    ratio_text,
    report_cells,
    report_header,
    report_table,
    usage_report,
)
from .window import (
    MAX_SPAN,
    OUT_OF_RANGE,
    Window,
    day_in_range,
    month_window,
    months_in,
    window_from,
    window_slug,
)

__all__ = [
    "HOLDER_COLUMNS", "MAX_BUCKETS", "MAX_SPAN", "OUT_OF_RANGE", "Fairness", "FairnessRow", "Filters", "Granularity",
    "Group", "HolderFilters", "Report", "ReportRow", "UseOverTime", "Window", "bucket_count", "chart", "day_in_range",
    "fairness", "grouped_ledger", "held_split", "holder_rows", "holders", "month_window", "months_in", "overlapping",
    "ratio_text", "report_cells", "report_header", "report_table", "series_table", "timeline", "usage_report",
    "use_over_time", "visible_users", "window_from", "window_slug",
]
