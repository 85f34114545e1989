"""Usage pages (namespace "usage"): the quota dashboards here, the GPU-hour reports from urls_reports."""

from django.urls import path

from . import urls_queues, urls_reports, views

app_name = "usage"

urlpatterns = [
    path("quota/", views.quota, name="quota"),
    path("quota/history/", views.quota_history_page, name="quota_history"),
    *urls_reports.urlpatterns,
    *urls_queues.urlpatterns,
]
