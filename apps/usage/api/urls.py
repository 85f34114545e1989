from django.urls import path

from apps.usage.api_reports import UsageReportCsvView, UsageReportView

from . import views

urlpatterns = [
    path("usage/quota/", views.QuotaUsageView.as_view(), name="usage-quota"),
    path("usage/", UsageReportView.as_view(), name="usage-report"),
    path("usage/csv/", UsageReportCsvView.as_view(), name="usage-report-csv"),
]
