from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("login/", auth_views.LoginView.as_view(template_name="oidc_provider/login.html"), name="login"),
    path("control/users/", views.control_user),
    path("control/redirects/", views.control_redirect),
]
