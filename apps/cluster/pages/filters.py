"""The nodes list's filter (the API's; a pool's Nodes page names its pool in its path)."""

from __future__ import annotations

from apps.cluster.models import NodeState
from apps.core.filters import ReferenceFilter, ScopedFilterSet
from apps.org.models import NodePool


class NodeFilterSet(ScopedFilterSet):
    """Nodes: `node_pool`, the pool's id or slug (every pool may be named: pools say nothing of anyone's work)."""

    node_pool = ReferenceFilter(choices=lambda request: NodePool.objects.all(), help_text="Node pool id or slug.")

    class Meta(ScopedFilterSet.Meta):
        model = NodeState
        fields: list[str] = []
