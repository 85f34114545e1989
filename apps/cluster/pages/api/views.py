"""The queue and node API: what the queue and node pages show (KueueViz's views over the watcher's mirror), scoped
as they are (apps/cluster/pages/queues.py says who sees what). Read-only: the portal writes Kueue's objects through
the organisation, never here."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts import access
from apps.accounts.access import Action
from apps.cluster.models import ClusterQueueState, CohortState, LocalQueueState, NodeState
from apps.core.api import AuthenticatedAPIRequest, StrictIdLookupMixin
from apps.org.models import NodePool

from .. import queues as reads
from ..filters import NodeFilterSet
from .serializers import (
    ClusterQueueSerializer,
    CohortSerializer,
    FlavorSerializer,
    LocalQueueSerializer,
    NodeSerializer,
)

DENIED = "You may not see queues anywhere."


class QueueViewerMixin:
    """Those who may view nothing anywhere get 403, as on the pages; everyone else their scope's rows."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if not access.can_anywhere(request.user, Action.VIEW):
            self.permission_denied(request, message=DENIED)  # type: ignore[attr-defined]

    def fake(self) -> bool:
        """drf-spectacular builds the schema with an anonymous request."""
        return bool(getattr(self, "swagger_fake_view", False))


class PageRowsViewSet(QueueViewerMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """A list whose rows a page's selector computes rather than a queryset: the API shows what the tab shows,
    paginated like every list, with no filters of its own."""

    request: AuthenticatedAPIRequest
    filter_backends: list[type] = []

    def rows(self) -> list[Any]:
        raise NotImplementedError

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.rows())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ClusterQueueViewSet(QueueViewerMixin, StrictIdLookupMixin, viewsets.ReadOnlyModelViewSet):
    """The ClusterQueues of the projects you may see (queues of no project: admins only), by pool then name, with
    Kueue's counts and usage in GPU units: the Queues page's first tab."""

    request: AuthenticatedAPIRequest
    serializer_class = ClusterQueueSerializer

    def get_queryset(self) -> QuerySet[ClusterQueueState]:
        if self.fake():
            return ClusterQueueState.objects.none()
        return reads.cluster_queues_for(self.request.user)

    def paginate_queryset(self, queryset: Any) -> list[Any] | None:
        """A page of rows, a KAI queue row's pending counted as the page shows it (`reads.with_kai_waiting`)."""
        page = super().paginate_queryset(queryset)
        return None if page is None else reads.with_kai_waiting(list(page))

    def get_object(self) -> ClusterQueueState:
        return reads.with_kai_waiting([super().get_object()])[0]


class LocalQueueViewSet(QueueViewerMixin, StrictIdLookupMixin, viewsets.ReadOnlyModelViewSet):
    """The LocalQueues of the projects you may see, by namespace then name, with Kueue's counts."""

    request: AuthenticatedAPIRequest
    serializer_class = LocalQueueSerializer

    def get_queryset(self) -> QuerySet[LocalQueueState]:
        if self.fake():
            return LocalQueueState.objects.none()
        return reads.local_queues_for(self.request.user)


@extend_schema_view(list=extend_schema(description=(
    "Every pool's cohort tree in tree order (parents before children): project cohorts of the projects you may see, "
    "department cohorts of your departments and of your projects' departments, and the pools' root cohorts only "
    "for those who see everything. A cohort's figures are its whole subtree's, seen or not.")))
class CohortViewSet(PageRowsViewSet):
    """Kueue's Cohorts as the Queues page's cohort tab shows them."""

    serializer_class = CohortSerializer
    queryset = CohortState.objects.none()  # for the schema only: rows come from the page's selector

    def rows(self) -> list[Any]:
        return [row for _pool, cohorts in reads.cohorts(user=self.request.user) for row in cohorts]


@extend_schema_view(list=extend_schema(description=(
    "One ResourceFlavor per node pool, by name: resource, cut, node labels and taints, the nodes the watcher saw and "
    "their allocatable units; the pool-wide in use, borrowed, pending and admitted only for those who see "
    "everything (null otherwise).")))
class FlavorViewSet(PageRowsViewSet):
    """The node pools as Kueue's ResourceFlavors, as the Queues page's flavor tab shows them."""

    serializer_class = FlavorSerializer
    queryset = NodePool.objects.none()  # for the schema only: rows come from the page's selector

    def rows(self) -> list[Any]:
        return reads.flavors(user=self.request.user)


class NodeViewSet(QueueViewerMixin, StrictIdLookupMixin, viewsets.ReadOnlyModelViewSet):
    """The nodes of the pools, by pool then name: their cards, cut, allocatable units, state and taints (a pool's
    Nodes page; `node_pool` picks one pool). Everyone who may view anything sees them: a node says nothing of anyone's
    work."""

    request: AuthenticatedAPIRequest
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet

    def get_queryset(self) -> QuerySet[NodeState]:
        if self.fake():
            return NodeState.objects.none()
        return reads.nodes_in_pools()
