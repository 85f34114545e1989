"""Quota tree of ClusterQueues and Cohorts, with Kueue's hierarchical accounting (resource_node.go semantics).

Every node holds, per (flavor, resource): its own quota, a subtree quota (own nominal plus what children lend), and
usage (for a Cohort: the children's usage beyond what they keep locally). Lending limits keep part of a node's
subtree quota local; borrowing limits cap what a node may take from its parent.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True)
class Quota:
    """One resource's quota in one flavor: None limits mean unlimited (borrowing) or everything lendable."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(eq=False)
class QuotaNode:
    """Shared part of ClusterQueues and Cohorts: quotas, subtree quota, usage and the fair-sharing weight."""

    name: str
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    weight: float = 1.0
    parent: CohortNode | None = None
    subtree_quota: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    # memos of `potential_available` and `local_quota` (quotas only, which a built tree keeps: update_tree clears
    # them) and of `available` (with the usage_version it was computed at)
    potential: dict[FlavorResource, int] = field(default_factory=dict, init=False, repr=False)
    local: dict[FlavorResource, int] = field(default_factory=dict, init=False, repr=False)
    free: dict[FlavorResource, tuple[int, int]] = field(default_factory=dict, init=False, repr=False)

    is_cohort = False

    def path_to_root(self) -> Iterator[CohortNode]:
        """Ancestors from the parent up to the root."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node: QuotaNode = self
        while node.parent is not None:
            node = node.parent
        return node


@dataclass(eq=False)
class CohortNode(QuotaNode):
    """A Cohort (explicit object or implied by a reference); its quota adds to what its children lend."""

    child_cohorts: list[CohortNode] = field(default_factory=list)
    child_cqs: list = field(default_factory=list)  # list[ClusterQueueNode]
    exists: bool = True
    height: int | None = field(default=None, init=False)  # memo of flavors.node_height: a built tree keeps its shape
    lendable_totals: dict[str, int] | None = field(default=None, init=False)  # memo of `lendable` (quotas only)
    cqs_below: tuple | None = field(default=None, init=False, repr=False)  # memo of subtree_cluster_queues

    is_cohort = True

    def root(self) -> CohortNode:
        """The root cohort of this cohort's tree."""
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree_cluster_queues(self) -> tuple:
        """Every ClusterQueue below the cohort, depth first (kept: a built tree keeps its shape)."""
        if self.cqs_below is None:
            self.cqs_below = (*(cq for c in self.child_cohorts for cq in c.subtree_cluster_queues()), *self.child_cqs)
        return self.cqs_below


def local_quota(node: QuotaNode, fr: FlavorResource) -> int:
    """Capacity kept inside the subtree because of a lending limit (never visible to the parent)."""
    known = node.local.get(fr)
    if known is None:
        q = node.quotas.get(fr)
        known = max(0, node.subtree_quota.get(fr, 0) - q.lending_limit) if q and q.lending_limit is not None else 0
        node.local[fr] = known
    return known


def local_available(node: QuotaNode, fr: FlavorResource) -> int:
    return max(0, local_quota(node, fr) - node.usage.get(fr, 0))


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """Unused capacity reachable from node, honouring borrowing limits up the tree (may be negative)."""
    known = node.free.get(fr)
    if known is not None and known[0] == _usage_changes:
        return known[1]
    if node.parent is None:
        result = node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    else:
        parent_available = available(node.parent, fr)
        q = node.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            lq = local_quota(node, fr)
            stored_in_parent = node.subtree_quota.get(fr, 0) - lq
            used_in_parent = max(0, node.usage.get(fr, 0) - lq)
            parent_available = min(stored_in_parent - used_in_parent + q.borrowing_limit, parent_available)
        result = local_available(node, fr) + parent_available
    node.free[fr] = (_usage_changes, result)
    return result


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most node could ever use with nothing else running (bounded by borrowing limits)."""
    known = node.potential.get(fr)
    if known is not None:
        return known
    if node.parent is None:
        avail = node.subtree_quota.get(fr, 0)
    else:
        avail = local_quota(node, fr) + potential_available(node.parent, fr)
        q = node.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            avail = min(node.subtree_quota.get(fr, 0) + q.borrowing_limit, avail)
    node.potential[fr] = avail
    return avail


_usage_changes = 0


def usage_version() -> int:
    """A number that changes whenever `add_usage` or `remove_usage` changes any node's usage: what is derived from
    usage may be kept while it stays the same."""
    return _usage_changes


def add_usage(node: QuotaNode, fr: FlavorResource, val: int) -> None:
    """Add usage and bubble the part beyond the node's local quota to its parent."""
    global _usage_changes
    _usage_changes += 1
    local_avail = local_available(node, fr)
    node.usage[fr] = node.usage.get(fr, 0) + val
    if node.parent is not None and val > local_avail:
        add_usage(node.parent, fr, val - local_avail)


def remove_usage(node: QuotaNode, fr: FlavorResource, val: int) -> None:
    global _usage_changes
    _usage_changes += 1
    stored_in_parent = node.usage.get(fr, 0) - local_quota(node, fr)
    node.usage[fr] = node.usage.get(fr, 0) - val
    if stored_in_parent <= 0 or node.parent is None:
        return
    remove_usage(node.parent, fr, min(val, stored_in_parent))


def fits_in_quota(node: QuotaNode, requests: dict[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
    """Whether requests fit in node's subtree quota, and what remains for the parent after local capacity."""
    fits = True
    remaining: dict[FlavorResource, int] = {}
    for fr, v in requests.items():
        if node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + v:
            fits = False
        remaining[fr] = max(0, v - local_available(node, fr))
    return fits, remaining


def within_nominal(node: QuotaNode, frs: set[FlavorResource]) -> bool:
    return all(node.subtree_quota.get(fr, 0) >= node.usage.get(fr, 0) for fr in frs)


def update_tree(root: CohortNode) -> None:
    """Recompute subtree quotas and cohort usage bottom-up (ClusterQueue usage must already be set)."""
    root.subtree_quota = {fr: q.nominal for fr, q in root.quotas.items()}
    root.usage = {}
    root.lendable_totals = root.cqs_below = None
    root.potential, root.local, root.free = {}, {}, {}
    children: list[QuotaNode] = []
    for c in root.child_cohorts:
        update_tree(c)
        children.append(c)
    for cq in root.child_cqs:
        cq.subtree_quota = {fr: q.nominal for fr, q in cq.quotas.items()}
        cq.potential, cq.local, cq.free = {}, {}, {}
        children.append(cq)
    for child in children:
        for fr, sq in child.subtree_quota.items():
            root.subtree_quota[fr] = root.subtree_quota.get(fr, 0) + sq - local_quota(child, fr)
        for fr, u in child.usage.items():
            delta = max(0, u - local_quota(child, fr))
            if delta:
                root.usage[fr] = root.usage.get(fr, 0) + delta


@dataclass(frozen=True)
class DRS:
    """Dominant resource share of a node towards its parent, per mille of what the tree could lend it."""

    weight: float = 1.0
    ratio: float = 0.0
    dominant: str = ""
    borrowing: bool = False
    borrowed: frozenset[FlavorResource] = frozenset()

    def is_zero(self) -> bool:
        return self.ratio == 0

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero()

    def precise(self) -> float:
        if self.is_zero():
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def weighted_share(self) -> int:
        """The rounded value ClusterQueue and Cohort status report (MaxInt64 for a borrowing zero weight)."""
        if self.zero_weight_borrows():
            return 2**63 - 1
        return math.ceil(self.precise())

    def borrowing_on(self, requested: dict[FlavorResource, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)


def compare_drs(a: DRS, b: DRS) -> int:
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.zero_weight_borrows():
        return 1
    if b.zero_weight_borrows():
        return -1
    pa, pb = a.precise(), b.precise()
    return (pa > pb) - (pa < pb)


def lendable(cohort: CohortNode) -> dict[str, int]:
    """Per resource name, what the whole tree could lend to a child of this cohort: the potentially available
    capacity of every (flavor, resource) the tree knows, summed over flavors. It depends on quotas only, which a
    built tree keeps, so it is kept on the cohort until `update_tree` rebuilds it."""
    if cohort.lendable_totals is not None:
        return cohort.lendable_totals
    totals: dict[str, int] = {}
    for flavor, resource in cohort.root().subtree_quota:
        totals[resource] = totals.get(resource, 0) + potential_available(cohort, (flavor, resource))
    cohort.lendable_totals = totals
    return totals


def over_quota(node: QuotaNode, extra: dict[FlavorResource, int]) -> dict[FlavorResource, int]:
    """What node uses beyond its subtree quota, per (flavor, resource) it has quota for, with extra requests added."""
    excess = {}
    for fr, quota in node.subtree_quota.items():
        amount = node.usage.get(fr, 0) + extra.get(fr, 0) - quota
        if amount > 0:
            excess[fr] = amount
    return excess


def dominant_resource_share(node: QuotaNode, extra: dict[FlavorResource, int] | None = None) -> DRS:
    """Kueue's dominant resource share of node (optionally with a workload's requests added): for each resource,
    what node borrows (over all flavors) as a per-mille share of what its parent's tree could lend; the largest
    share wins, ties going to the alphabetically first resource. A root, or a node within its quota, shares 0."""
    if node.parent is None:
        return DRS(weight=node.weight)
    excess = over_quota(node, extra or {})
    if not excess:
        return DRS(weight=node.weight)
    borrowed_per_resource: dict[str, int] = {}
    for (_, resource), amount in excess.items():
        borrowed_per_resource[resource] = borrowed_per_resource.get(resource, 0) + amount
    capacity = lendable(node.parent)
    shares = {
        resource: amount * 1000.0 / capacity[resource]
        for resource, amount in borrowed_per_resource.items()
        if capacity.get(resource, 0) > 0
    }
    dominant = max(sorted(shares), key=shares.__getitem__, default="")
    return DRS(
        weight=node.weight,
        ratio=shares.get(dominant, 0.0),
        dominant=dominant,
        borrowing=True,
        borrowed=frozenset(excess),
    )
