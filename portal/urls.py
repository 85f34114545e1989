from django.contrib import admin
from django.contrib.staticfiles.storage import staticfiles_storage
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView

urlpatterns = [
    path("", include("apps.org.urls")),
    path("accounts/", include("apps.accounts.urls")),
    path("workloads/", include("apps.workloads.urls")),
    path("usage/", include("apps.usage.urls")),
    path("api/v1/", include("portal.api_urls")),
    path("django-admin/", admin.site.urls),
    # Pages without a <link rel="icon"> (Django's admin) make browsers ask for /favicon.ico: the portal's icon.
    path("favicon.ico", RedirectView.as_view(url=lazy(staticfiles_storage.url, str)("favicon.svg"), permanent=True)),
]

# Styled error pages with the navigation (the API keeps its JSON): apps/core/views.py.
handler400 = "apps.core.views.bad_request"
handler403 = "apps.core.views.permission_denied"
handler404 = "apps.core.views.page_not_found"
handler500 = "apps.core.views.server_error"
