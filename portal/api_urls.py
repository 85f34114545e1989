"""Everything under /api/v1/."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("", include("apps.accounts.api.urls")),
    path("", include("apps.org.api.urls")),
    path("", include("apps.workloads.api.urls")),
    path("", include("apps.usage.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
