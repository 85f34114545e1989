"""Everything under /api/v1/."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("", include("apps.accounts.api.urls")),
    path("", include("apps.org.api.urls")),
    path("", include("apps.workloads.api.urls")),
    path("", include("apps.usage.api.urls")),
    path("", include("apps.cluster.pages.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its init script from a URL, not inline, for the Content-Security-Policy.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/swagger_ui.html"),
         name="api-docs"),
]
