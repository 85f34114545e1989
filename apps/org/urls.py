from django.urls import path

from . import views

app_name = "org"

urlpatterns = [
    path("", views.overview, name="overview"),
]
