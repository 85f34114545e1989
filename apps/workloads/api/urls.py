from django.urls import path
from rest_framework.routers import SimpleRouter

from . import credentials, inference, templates, utilisation, views

router = SimpleRouter()
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("inference-services", inference.InferenceServiceViewSet, basename="inference-service")
router.register("templates", templates.WorkloadTemplateViewSet, basename="workload-template")
router.register("credentials", credentials.CredentialViewSet, basename="credential")
router.register("held-idle", utilisation.HeldIdleViewSet, basename="held-idle")

urlpatterns = [
    path("idle-policy/", utilisation.IdlePolicyView.as_view(), name="idle-policy"),
    *router.urls,
]
