"""Usage pages (namespace "usage"): the quota dashboards here, the GPU-hour reports from urls_reports, and the cluster
mirror's queue and node pages (apps.cluster.pages), which keep the /usage/ paths and "usage:" names they were
published under."""

from django.urls import path

from apps.cluster.pages import urls as cluster_pages

from . import urls_reports, views

app_name = "usage"

urlpatterns = [
    path("quota/", views.quota, name="quota"),
    path("quota/history/", views.quota_history_page, name="quota_history"),
    *urls_reports.urlpatterns,
    *cluster_pages.urlpatterns,
]
