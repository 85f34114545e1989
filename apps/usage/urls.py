"""Usage pages (namespace "usage"): the quota dashboard and its history, the GPU-hour reports (showback, use over
time and who held the cards), the budgets, and the cluster mirror's queue and node pages (apps.cluster.pages), which
keep the /usage/ paths and "usage:" names they were published under."""

from django.urls import path

from apps.cluster.pages import urls as cluster_pages

from .views import budgets, history, over_time, quota, reports

app_name = "usage"

urlpatterns = [
    path("quota/", quota.quota, name="quota"),
    path("quota/history/", history.quota_history_page, name="quota_history"),
    path("reports/", reports.usage_reports, name="reports"),
    path("reports.csv", reports.usage_reports_csv, name="reports_csv"),
    path("over-time/", over_time.use_over_time, name="over_time"),
    path("over-time.csv", over_time.use_over_time_csv, name="over_time_csv"),
    path("holders/", reports.usage_holders, name="holders"),
    path("holders.csv", reports.usage_holders_csv, name="holders_csv"),
    path("budgets/", budgets.budgets, name="budgets"),
    path("budgets/new/", budgets.budget_create, name="budget_create"),
    path("budgets/<int:pk>/edit/", budgets.budget_edit, name="budget_edit"),
    path("budgets/<int:pk>/delete/", budgets.budget_delete, name="budget_delete"),
    *cluster_pages.urlpatterns,
]
