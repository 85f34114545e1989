from rest_framework.routers import SimpleRouter

from . import templates, views

router = SimpleRouter()
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("templates", templates.WorkloadTemplateViewSet, basename="workload-template")

urlpatterns = router.urls
