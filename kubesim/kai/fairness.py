"""KAI's division of a node pool's GPUs between queues (its proportion plugin, as its fairness docs describe it): each
queue is first given its deserved quota (as much of it as it requests), then what is left goes to the queues still
wanting more, highest queue priority first, split by overQuotaWeight within a priority, never past a queue's limit;
the same division repeats down the queue tree with each parent's share. The result is each queue's fair share."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubesim.kai.names import DEFAULT_QUEUE_PRIORITY

EPSILON = 1e-9
UNLIMITED = -1.0


@dataclass
class QueueNode:
    """One Queue's GPU settings (quota -1: all it requests is deserved; limit -1: no limit; limit 0: nothing beyond
    its quota) and its children."""

    name: str
    parent: str = ""
    priority: int = DEFAULT_QUEUE_PRIORITY
    quota: float = 0.0
    limit: float = 0.0
    weight: float = 1.0
    children: list[QueueNode] = field(default_factory=list)

    @property
    def cap(self) -> float:
        """The most this queue may hold (inf: no limit)."""
        if self.limit == UNLIMITED or (self.limit == 0 and self.quota == UNLIMITED):
            return float("inf")
        return self.quota if self.limit == 0 else max(self.limit, 0.0)


def queue_node(queue: dict) -> QueueNode:
    """A Queue object's GPU settings."""
    spec = queue.get("spec") or {}
    gpu = (spec.get("resources") or {}).get("gpu") or {}
    return QueueNode(
        name=queue["metadata"]["name"],
        parent=spec.get("parentQueue") or "",
        priority=int(spec.get("priority", DEFAULT_QUEUE_PRIORITY)),
        quota=float(gpu.get("quota", 0)),
        limit=float(gpu.get("limit", 0)),
        weight=float(gpu.get("overQuotaWeight", 1)),
    )


def forest(nodes: list[QueueNode]) -> list[QueueNode]:
    """Link the queues into trees; the roots (a queue whose parent is missing is a root, as an orphan is) by name."""
    by_name = {n.name: n for n in nodes}
    for n in nodes:
        n.children = []
    roots = []
    for n in sorted(nodes, key=lambda q: q.name):
        parent = by_name.get(n.parent)
        if parent is None or parent is n:
            roots.append(n)
        else:
            parent.children.append(n)
    return roots


def requests(roots: list[QueueNode], leaf_requests: dict[str, float]) -> dict[str, float]:
    """What each queue asks for: a leaf what its workloads request, a parent the sum of its children's; each capped by
    the queue's limit."""
    out: dict[str, float] = {}

    def walk(q: QueueNode) -> float:
        asked = sum(walk(c) for c in q.children) if q.children else leaf_requests.get(q.name, 0.0)
        out[q.name] = min(asked, q.cap)
        return out[q.name]

    for root in roots:
        walk(root)
    return out


def fair_shares(roots: list[QueueNode], asked: dict[str, float], capacity: float) -> dict[str, float]:
    """Each queue's fair share of `capacity` GPUs given what each asks for (requests())."""
    shares: dict[str, float] = {}
    _divide(roots, capacity, asked, shares)
    return shares


def _divide(siblings: list[QueueNode], amount: float, asked: dict[str, float], shares: dict[str, float]) -> None:
    share = {}
    left = amount
    for q in sorted(siblings, key=lambda q: (-q.priority, q.name)):  # deserved quota first, always
        deserved = asked[q.name] if q.quota == UNLIMITED else min(q.quota, asked[q.name])
        share[q.name] = min(deserved, max(left, 0.0))
        left -= share[q.name]
    for priority in sorted({q.priority for q in siblings}, reverse=True):  # then the surplus, bucket by bucket
        bucket = [q for q in siblings if q.priority == priority]
        while left > EPSILON:
            wanting = [q for q in bucket if asked[q.name] - share[q.name] > EPSILON and q.weight > 0]
            total = sum(q.weight for q in wanting)
            if not wanting or total <= 0:
                break
            given = 0.0
            for q in wanting:
                add = min(left * q.weight / total, asked[q.name] - share[q.name])
                share[q.name] += add
                given += add
            left -= given
            if given <= EPSILON:
                break
    for q in siblings:
        shares[q.name] = share[q.name]
        if q.children:
            _divide(q.children, share[q.name], asked, shares)
