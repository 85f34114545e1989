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

# Styled error pages with the navigation (the API keeps its JSON): apps/core/views.py.
handler400 = "apps.core.views.bad_request"
handler403 = "apps.core.views.permission_denied"
handler404 = "apps.core.views.page_not_found"
handler500 = "apps.core.views.server_error"
