from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("apps.org.urls")),
    path("accounts/", include("apps.accounts.urls")),
    path("workloads/", include("apps.workloads.urls")),
    path("usage/", include("apps.usage.urls")),
    path("api/v1/", include("portal.api_urls")),
    path("django-admin/", admin.site.urls),
]

handler404 = "apps.core.views.not_found"
