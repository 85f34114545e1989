"""Queue and node pages, included by apps/usage/urls.py (namespace "usage")."""

from django.urls import path

from . import views_queues

urlpatterns = [
    path("queues/", views_queues.queues, name="queues"),
    path("queues/<slug:tab>/", views_queues.queues, name="queues_tab"),
    path("nodes/<slug:slug>/", views_queues.nodes, name="nodes"),
]
