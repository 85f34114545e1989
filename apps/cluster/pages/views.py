"""Queue and node pages (KueueViz's views, scoped by role) and, for admins, the cluster's work the portal cannot
count as a project's: thin, `queues` reads the mirror.

Each page polls every 15 s while its tab is visible; a poll is a conditional GET answered 304 from a few aggregates
when nothing in the mirror changed. One view serves a page and its live partial.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.accounts import access
from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.http import AuthenticatedRequest, conditional_poll, poll_etag

from . import queues as reads


def _require_viewer(request: AuthenticatedRequest) -> None:
    if not access.can_anywhere(request.user, Action.VIEW):
        raise PermissionDenied("You may not see queues anywhere.")


def _tab_context(tab: str, user: Actor) -> dict[str, Any]:
    if tab == "cluster-queues":
        return {"cluster_queues": reads.cluster_queues(user=user)}
    if tab == "local-queues":
        return {"local_queues": reads.local_queues(user=user)}
    if tab == "cohorts":
        return {"cohort_pools": reads.cohorts(user=user)}
    return {"flavors": reads.flavors(user=user)}


@login_required
@require_GET
def queues(request: AuthenticatedRequest, tab: str = "cluster-queues") -> HttpResponse:
    if tab not in reads.TABS:
        raise Http404("No such queue page.")
    _require_viewer(request)
    user = request.user
    etag = poll_etag(access.grants_fingerprint(user), bool(request.htmx), tab, reads.queues_marker())
    template = "cluster/partials/_queues_live.html" if request.htmx else "cluster/queues.html"
    return conditional_poll(
        request,
        etag,
        lambda: render(
            request,
            template,
            {
                "tab": tab,
                "tabs": reads.TABS,
                "tab_label": reads.TABS[tab],
                "everything": access.sees_everything(user),
                "may_view_unmapped": access.can_view_unmapped_work(user),
                **_tab_context(tab, user),
            },
        ),
    )


@login_required
@require_GET
def nodes(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    _require_viewer(request)
    user = request.user
    etag = poll_etag(access.grants_fingerprint(user), bool(request.htmx), slug, reads.queues_marker())

    def page() -> HttpResponse:
        found = reads.pool_nodes(user=user, slug=slug)
        if found is None:
            raise Http404("No such node pool.")
        template = "cluster/partials/_nodes_live.html" if request.htmx else "cluster/nodes.html"
        return render(request, template, {"found": found, "pools": reads.flavors(user=user)})

    return conditional_poll(request, etag, page)


UNMAPPED_PER_PAGE = 100


@login_required
@require_GET
def unmapped(request: AuthenticatedRequest) -> HttpResponse:
    """Admins: Kueue workloads the watcher could not map to a project, and GPU pods running outside the queue."""
    if not access.can_view_unmapped_work(request.user):
        raise Http404("No such page.")
    page = Paginator(reads.unmapped_work(), UNMAPPED_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "cluster/unmapped.html", {"page": page})
