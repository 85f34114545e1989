from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="accounts/login.html", redirect_authenticated_user=True),
         name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("settings/", views.my_settings, name="settings"),
    path("role-bindings/", views.role_bindings, name="role_bindings"),
    path("role-bindings/new/", views.role_binding_create, name="role_binding_create"),
    path("role-bindings/<int:pk>/delete/", views.role_binding_delete, name="role_binding_delete"),
]
