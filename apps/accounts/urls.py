from django.contrib.auth import views as auth_views
from django.urls import path

from . import oidc, views

app_name = "accounts"

urlpatterns = [
    path("login/", views.PortalLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("oidc/authenticate/", oidc.PortalOIDCAuthenticateView.as_view(), name="oidc_authenticate"),
    path("oidc/callback/", oidc.PortalOIDCCallbackView.as_view(), name="oidc_callback"),
    path("settings/", views.my_settings, name="settings"),
    path("tokens/", views.my_tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.my_token_revoke, name="token_revoke"),
    path("role-bindings/", views.role_bindings, name="role_bindings"),
    path("role-bindings/new/", views.role_binding_create, name="role_binding_create"),
    path("role-bindings/<int:pk>/delete/", views.role_binding_delete, name="role_binding_delete"),
    path("group-rules/", views.group_rules, name="group_rules"),
    path("group-rules/new/", views.group_rule_create, name="group_rule_create"),
    path("group-rules/<int:pk>/edit/", views.group_rule_edit, name="group_rule_edit"),
    path("group-rules/<int:pk>/delete/", views.group_rule_delete, name="group_rule_delete"),
]
