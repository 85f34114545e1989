from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.register("cluster-queues", views.ClusterQueueViewSet, basename="cluster-queue")
router.register("local-queues", views.LocalQueueViewSet, basename="local-queue")
router.register("cohorts", views.CohortViewSet, basename="cohort")
router.register("flavors", views.FlavorViewSet, basename="flavor")
router.register("nodes", views.NodeViewSet, basename="node")

urlpatterns = router.urls
