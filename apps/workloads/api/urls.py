from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.register("workloads", views.WorkloadViewSet, basename="workload")

urlpatterns = router.urls
