from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.register("role-bindings", views.RoleBindingViewSet, basename="role-binding")
router.register("tokens", views.PersonalTokenViewSet, basename="token")

urlpatterns = [
    path("auth/token/", views.PasswordTokenView.as_view(), name="api-token"),
    path("me/", views.MeView.as_view(), name="api-me"),
    *router.urls,
]
