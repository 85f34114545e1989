from django.urls import path

from .holders import CardHoldersView
from .over_time import UseOverTimeView
from .quota import QuotaUsageView
from .reports import UsageReportCsvView, UsageReportView

urlpatterns = [
    path("usage/quota/", QuotaUsageView.as_view(), name="usage-quota"),
    path("usage/", UsageReportView.as_view(), name="usage-report"),
    path("usage/csv/", UsageReportCsvView.as_view(), name="usage-report-csv"),
    path("usage/holders/", CardHoldersView.as_view(), name="usage-holders"),
    path("usage/over-time/", UseOverTimeView.as_view(), name="usage-over-time"),
]
