"""Usage pages (namespace "usage"): the quota dashboard and its history, the GPU-hour reports (showback and who held
the cards), and the cluster mirror's queue and node pages (apps.cluster.pages), which keep the /usage/ paths and
"usage:" names they were published under."""

from django.urls import path

from apps.cluster.pages import urls as cluster_pages

from .views import history, quota, reports

app_name = "usage"

urlpatterns = [
    path("quota/", quota.quota, name="quota"),
    path("quota/history/", history.quota_history_page, name="quota_history"),
    path("reports/", reports.usage_reports, name="reports"),
    path("reports.csv", reports.usage_reports_csv, name="reports_csv"),
    path("holders/", reports.usage_holders, name="holders"),
    path("holders.csv", reports.usage_holders_csv, name="holders_csv"),
    *cluster_pages.urlpatterns,
]
