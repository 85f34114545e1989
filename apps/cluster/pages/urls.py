"""Queue and node pages. apps/usage/urls.py serves them under /usage/ in its namespace ("usage"), the paths and
names they were published under."""

from django.urls import path

from . import views

urlpatterns = [
    path("queues/", views.queues, name="queues"),
    path("queues/<slug:tab>/", views.queues, name="queues_tab"),
    path("nodes/<slug:slug>/", views.nodes, name="nodes"),
    path("unmapped/", views.unmapped, name="unmapped"),
]
