"""Flavor assignment (Kueue's flavorassigner): pick a flavor per resource group for each PodSet and a mode.

Flavors are tried in the ClusterQueue's order; a flavor whose node labels or taints do not suit the pods is skipped;
quota is checked through the cohort tree; flavorFungibility decides whether to stop at a flavor that needs borrowing
or preemption. Messages are Kueue's, since users read them in the QuotaReserved condition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from kubesim.kernel.quantity import format_amount
from kubesim.kueue import constants as C
from kubesim.kueue.scheduler.model import ClusterQueueNode, PodSetInfo, Snapshot, WorkloadInfo
from kubesim.kueue.scheduler.quota import (
    CohortNode,
    FlavorResource,
    QuotaNode,
    available,
    local_available,
    potential_available,
)

# FlavorAssignmentMode, ordered worst to best
NO_FIT, PREEMPT, FIT = 0, 1, 3
# granular preemption modes, ordered worst to best
G_NO_FIT, G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, G_FIT = 0, 1, 2, 3, 4
_TO_MODE = {G_NO_FIT: NO_FIT, G_NO_CANDIDATES: PREEMPT, G_PREEMPT: PREEMPT, G_RECLAIM: PREEMPT, G_FIT: FIT}
_SEVERITY = {
    "": 0,
    "TopologyPlacementFailed": 1,
    C.REASON_WAITING_FOR_QUOTA: 2,
    C.REASON_EXCEEDS_MAX_QUOTA: 3,
    C.REASON_NO_MATCHING_FLAVOR: 4,
}
MAX_LEVEL = 2**31

# oracle(cq, workload, fr, quantity) -> (granular preemption mode, borrowing level after preemption)
Oracle = Callable[[ClusterQueueNode, WorkloadInfo, FlavorResource, int], tuple[int, int]]


_MAX_INT64 = 2**63 - 1
_DECIMAL_SUFFIXES = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def quantity_string(resource: str, amount: int) -> str:
    """An amount as Kueue's messages print it: a resource.Quantity in canonical form (CPU from millis, memory and
    storage binary, the rest decimal: the largest suffix that keeps the number whole, `1k` for 1000), with Kueue's
    int64 amounts saturating at MaxInt64."""
    amount = min(amount, _MAX_INT64)
    binary = resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")
    if binary and abs(amount) >= 1024:
        return format_amount("memory", amount)
    exponent = -3 if resource == "cpu" else 0
    while amount and amount % 1000 == 0 and exponent < 18:
        amount //= 1000
        exponent += 3
    if amount == 0:
        return "0"
    return f"{amount}{_DECIMAL_SUFFIXES[exponent]}"


def most_severe(a: str, b: str) -> str:
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


class Granular(NamedTuple):
    pmode: int
    level: int


WORST = Granular(G_NO_FIT, MAX_LEVEL)
BEST = Granular(G_FIT, 0)


def is_preferred(a: Granular, b: Granular, preference: str) -> bool:
    """Whether mode a beats mode b under the ClusterQueue's flavorFungibility.preference."""
    if a.pmode == G_NO_FIT:
        return False
    if b.pmode == G_NO_FIT:
        return True
    a_none, b_none = a.pmode == G_NO_CANDIDATES, b.pmode == G_NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if preference == "PreemptionOverBorrowing":
        if a.level != b.level:
            return a.level < b.level
        return a.pmode > b.pmode
    if a.pmode != b.pmode:
        return a.pmode > b.pmode
    return a.level < b.level


@dataclass
class FlavorAssignment:
    name: str
    mode: int
    borrow: int
    tried: int = -1  # index of the last flavor of its resource group the search looked at; -1 once it reached the end


@dataclass
class PodSetAssignment:
    name: str
    count: int
    requests: dict[str, int]  # totals for count pods
    flavors: dict[str, FlavorAssignment] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    attempts: list[tuple[str, int, str]] = field(default_factory=list)  # (flavor, granular mode, no-fit reason)

    def fit(self) -> bool:
        return not self.reasons

    def mode(self) -> int:
        if self.fit():
            return FIT
        if not self.flavors:
            return NO_FIT
        return min(fa.mode for fa in self.flavors.values())

    def message(self) -> str:
        return ", ".join(sorted(self.reasons))


@dataclass
class Assignment:
    podsets: list[PodSetAssignment] = field(default_factory=list)
    borrowing: int = 0
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    no_fit_reason: str = ""

    def mode(self) -> int:
        if not self.podsets:
            return NO_FIT
        return min(ps.mode() for ps in self.podsets)

    def message(self) -> str:
        parts = [f"couldn't assign flavors to pod set {ps.name}: {ps.message()}" for ps in self.podsets if not ps.fit()]
        return "; ".join(parts)

    def last_tried(self) -> list[dict[str, int]]:
        """Per pod set, the index of the flavor each resource's search stopped at (-1: it looked at every flavor)."""
        return [{r: fa.tried for r, fa in ps.flavors.items()} for ps in self.podsets]

    def pending_flavors(self) -> bool:
        """Whether some search stopped before the last flavor of its resource group (flavorFungibility said stop)."""
        return any(t != -1 for tried in self.last_tried() for t in tried.values())

    def flavor_names(self) -> dict[str, dict[str, str]]:
        """Per pod set, the flavor each resource was given."""
        return {ps.name: {r: fa.name for r, fa in ps.flavors.items()} for ps in self.podsets}

    def to_api(self) -> list[dict]:
        """status.admission.podSetAssignments."""
        out = []
        for ps in self.podsets:
            flavors = {r: fa.name for r, fa in sorted(ps.flavors.items())}
            out.append(
                {
                    "name": ps.name,
                    "flavors": flavors,
                    "resourceUsage": {r: format_amount(r, v) for r, v in sorted(ps.requests.items()) if r in flavors},
                    "count": ps.count,
                }
            )
        return out

    def frs_needing_preemption(self) -> set[FlavorResource]:
        return {(fa.name, r) for ps in self.podsets for r, fa in ps.flavors.items() if fa.mode == PREEMPT}

    def resolve_no_fit_reason(self, cq: ClusterQueueNode) -> None:
        if self.mode() != NO_FIT:
            return
        overall = ""
        for ps in self.podsets:
            if ps.mode() != NO_FIT:
                continue
            if not ps.attempts:
                overall = most_severe(overall, C.REASON_NO_MATCHING_FLAVOR)
                continue
            per_group: dict[int, str] = {}
            for i, (flavor, gmode, reason) in enumerate(ps.attempts):
                if _TO_MODE[gmode] != NO_FIT:
                    continue
                groups = [j for j, rg in enumerate(cq.resource_groups) if flavor in rg.flavors] or [-1 - i]
                for g in groups:
                    if g not in per_group or _SEVERITY.get(reason, 0) < _SEVERITY.get(per_group[g], 0):
                        per_group[g] = reason
            ps_reason = ""
            for reason in per_group.values():
                ps_reason = most_severe(ps_reason, reason)
            overall = most_severe(overall, ps_reason)
        self.no_fit_reason = overall


def node_height(node: CohortNode) -> int:
    if node.height is not None:
        return node.height
    height = min(len(node.child_cohorts) + len(node.child_cqs), 1)
    for child in node.child_cohorts:
        height = max(height, node_height(child) + 1)
    node.height = height
    return height


def _borrowing_with(node: QuotaNode, fr: FlavorResource, val: int) -> bool:
    if isinstance(node, ClusterQueueNode):
        return node.borrowing_with(fr, val)
    return node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + val


def lowest_subtree_that_fits(cq: ClusterQueueNode, fr: FlavorResource, val: int) -> tuple[int, bool]:
    """Borrowing level (height of the lowest subtree whose quota covers val) and whether reclaim is possible."""
    if not cq.borrowing_with(fr, val) or cq.parent is None:
        return 0, cq.parent is not None
    remaining = val - local_available(cq, fr)
    for node in cq.path_to_root():
        if not _borrowing_with(node, fr, remaining):
            return node_height(node), node.parent is not None
        remaining -= local_available(node, fr)
    return node_height(cq.parent.root()), False


def _taint_str(t: dict) -> str:
    """A taint as Kueue's message prints it: Go's default formatting of the corev1.Taint struct (key, value, effect,
    timeAdded), e.g. "{key val NoSchedule <nil>}"."""
    return f"{{{t.get('key') or ''} {t.get('value') or ''} {t.get('effect') or ''} <nil>}}"


def _tolerates(tol: dict, taint: dict) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return not tol.get("key") or tol["key"] == taint.get("key")
    return tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or "")


def _requirement_matches(expr: dict, labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            a, b = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def flavor_mismatch(flavor_name: str, flavor: dict | None, ps: PodSetInfo) -> str:
    """Why this flavor cannot host the pods (missing, untolerated taint, node labels), or ''."""
    if flavor is None:
        return f"flavor {flavor_name} not found"
    spec = flavor.get("spec") or {}
    labels = dict(spec.get("nodeLabels") or {})
    tolerations = list(ps.tolerations) + list(spec.get("tolerations") or [])
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return f"untolerated taint {_taint_str(taint)} in flavor {flavor_name}"
    for k, v in ps.node_selector.items():
        if k in labels and labels[k] != v:
            return f"flavor {flavor_name} doesn't match node affinity"
    if ps.affinity_terms is not None:
        terms: list[list[dict]] = []
        for term in ps.affinity_terms:
            exprs = [e for e in term if e.get("key") in labels]
            if not exprs:
                terms = []
                break
            terms.append(exprs)
        if terms and not any(all(_requirement_matches(e, labels) for e in t) for t in terms):
            return f"flavor {flavor_name} doesn't match node affinity"
    return ""


def _should_try_next(mode: Granular, cq: ClusterQueueNode) -> bool:
    if mode.pmode in (G_NO_FIT, G_NO_CANDIDATES):
        return True
    if mode.pmode in (G_PREEMPT, G_RECLAIM) and cq.fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return mode.level != 0 and cq.fungibility.when_can_borrow == "TryNextFlavor"


class FlavorAssigner:
    """Assigns flavors for one workload in one ClusterQueue against the current snapshot."""

    def __init__(
        self,
        wl: WorkloadInfo,
        cq: ClusterQueueNode,
        snapshot: Snapshot,
        oracle: Oracle,
        resume: list[dict[str, int]] | None = None,
        pinned: dict[str, dict[str, str]] | None = None,
    ) -> None:
        """resume: the flavors an earlier cycle's search stopped at (`Assignment.last_tried`); each resource group's
        search then starts after them (Kueue's preserved flavor scan progress).

        pinned: per pod set, per resource, the only flavor the search may take (`Assignment.flavor_names` of the
        assignment made at nomination). A search made again later in the cycle keeps to the flavors nominated then:
        every other flavor is passed over, with a reason saying so."""
        self.wl, self.cq, self.snapshot, self.oracle = wl, cq, snapshot, oracle
        self.resume = resume or []
        self.pinned = pinned
        self.ignore_undeclared = snapshot.config.quota_check_strategy == "IgnoreUndeclared"
        self.fair_sharing = snapshot.config.fair_sharing

    def assign(self, counts: list[int] | None = None) -> Assignment:
        assignment = Assignment()
        for i, ps in enumerate(self.wl.podsets):
            count = counts[i] if counts else ps.count
            requests = {r: v * count for r, v in ps.requests.items()}
            if self.cq.rg_for("pods") is not None:
                requests["pods"] = count
            psa = PodSetAssignment(name=ps.name, count=count, requests=requests)
            group: dict[str, FlavorAssignment] = {}
            reasons: list[str] = []
            for res in sorted(requests):
                if self.cq.rg_for(res) is None and (requests[res] == 0 or self.ignore_undeclared):
                    continue
                if res in group:
                    continue
                start = self.resume[i].get(res, -1) + 1 if i < len(self.resume) else 0
                flavors, ps_reasons, failed = self._find_flavor(ps, psa, requests, res, assignment.usage, start)
                if failed:  # the pod set gets no flavors at all
                    group, reasons = {}, ps_reasons
                    break
                group.update(flavors)
                reasons.extend(ps_reasons)
            psa.flavors = group
            psa.reasons = reasons
            assignment.podsets.append(psa)
            for r, fa in psa.flavors.items():
                fr = (fa.name, r)
                assignment.usage[fr] = assignment.usage.get(fr, 0) + requests[r]
                assignment.borrowing = max(assignment.borrowing, fa.borrow)
            if group is None:
                assignment.resolve_no_fit_reason(self.cq)
                return assignment
        if assignment.mode() == NO_FIT:
            assignment.resolve_no_fit_reason(self.cq)
        return assignment

    def _find_flavor(
        self,
        ps: PodSetInfo,
        psa: PodSetAssignment,
        requests: dict[str, int],
        res: str,
        usage: dict[FlavorResource, int],
        start: int = 0,
    ) -> tuple[dict[str, FlavorAssignment], list[str], bool]:
        """Flavor for res's resource group, searched from the flavor at index start: (assignments, reasons, failed).
        The assignments record where the search stopped (`FlavorAssignment.tried`)."""
        rg = self.cq.rg_for(res)
        if rg is None:
            return {}, [f"resource {res} unavailable in ClusterQueue"], True
        reasons: list[str] = []
        rg_requests = {r: v for r, v in sorted(requests.items()) if r in rg.covered}
        best: dict[str, FlavorAssignment] | None = None
        best_mode = WORST
        preference = self.cq.fungibility.preference
        attempted = -1
        for index in range(start, len(rg.flavors)):
            fname = rg.flavors[index]
            attempted = index
            if self.pinned is not None and self.pinned.get(ps.name, {}).get(res) != fname:
                reasons.append(f"skipping flavor {fname} as it is not found in the nomination mapping for resource "
                               f"{res}")
                continue
            mismatch = flavor_mismatch(fname, self.snapshot.flavors.get(fname), ps)
            if mismatch:
                reasons.append(mismatch)
                psa.attempts.append((fname, G_NO_FIT, C.REASON_NO_MATCHING_FLAVOR))
                continue
            assignments: dict[str, FlavorAssignment] = {}
            rep = BEST
            no_fit_reason = ""
            for rname, val in rg_requests.items():
                fr = (fname, rname)
                pmode, borrow, msg, reason = self._fits_quota(fr, usage.get(fr, 0), val)
                if msg:
                    reasons.append(msg)
                    no_fit_reason = most_severe(no_fit_reason, reason)
                mode = Granular(pmode, borrow)
                if is_preferred(rep, mode, preference):
                    rep = mode
                if rep.pmode == G_NO_FIT:
                    continue
                assignments[rname] = FlavorAssignment(fname, _TO_MODE[pmode], borrow)
            psa.attempts.append((fname, rep.pmode, no_fit_reason))
            if not _should_try_next(rep, self.cq):
                best, best_mode = assignments, rep
                break
            if is_preferred(rep, best_mode, preference):
                best, best_mode = assignments, rep
        tried = -1 if attempted == len(rg.flavors) - 1 else attempted
        for fa in (best or {}).values():
            fa.tried = tried
        if best_mode.pmode == G_FIT:
            return best or {}, [], False
        if not best:
            return {}, reasons, True
        return best, reasons, False

    def _fits_quota(self, fr: FlavorResource, assumed: int, request: int) -> tuple[int, int, str, str]:
        """(granular mode, borrowing level, message, no-fit reason) for request on top of assumed usage."""
        cq = self.cq
        avail = max(0, available(cq, fr))
        max_capacity = potential_available(cq, fr)
        val = assumed + request
        res, flavor = fr[1], fr[0]
        if val > max_capacity:
            msg = (
                f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests "
                f"({quantity_string(res, assumed)}) + current podset request ({quantity_string(res, request)}) "
                f"> maximum capacity ({quantity_string(res, max_capacity)})"
            )
            return G_NO_FIT, 0, msg, C.REASON_EXCEEDS_MAX_QUOTA
        borrow, may_reclaim = lowest_subtree_that_fits(cq, fr, val)
        if val <= avail:
            return G_FIT, borrow, "", ""
        msg = f"insufficient unused quota for {res} in flavor {flavor}, {quantity_string(res, val - avail)} more needed"
        if cq.quota_for(fr).nominal >= val or may_reclaim or self._can_preempt_while_borrowing():
            pmode, borrow_after = self.oracle(cq, self.wl, fr, val)
            return pmode, borrow_after, msg, "" if pmode != G_NO_FIT else C.REASON_WAITING_FOR_QUOTA
        return G_NO_FIT, borrow, msg, C.REASON_WAITING_FOR_QUOTA

    def _can_preempt_while_borrowing(self) -> bool:
        p = self.cq.preemption
        return p.borrow_within_cohort != C.NEVER or (self.fair_sharing and p.reclaim_within_cohort != C.NEVER)
