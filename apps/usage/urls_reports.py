"""Pages of the GPU-hour reports, included by apps/usage/urls.py (namespace "usage")."""

from django.urls import path

from . import views_reports

urlpatterns = [
    path("reports/", views_reports.usage_reports, name="reports"),
    path("reports.csv", views_reports.usage_reports_csv, name="reports_csv"),
    path("holders/", views_reports.usage_holders, name="holders"),
    path("holders.csv", views_reports.usage_holders_csv, name="holders_csv"),
]
