from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter()
router.register("node-pools", views.NodePoolViewSet, basename="node-pool")
router.register("departments", views.DepartmentViewSet, basename="department")
router.register("projects", views.ProjectViewSet, basename="project")
router.register("project-namespaces", views.ProjectNamespaceViewSet, basename="project-namespace")
router.register("quotas", views.QuotaViewSet, basename="quota")
router.register("budgets", views.BudgetViewSet, basename="budget")
router.register("policies", views.PolicyViewSet, basename="policy")


router.register("notification-channels", views.NotificationChannelViewSet, basename="notification-channel")
router.register("serving-reservations", views.ServingReservationViewSet, basename="serving-reservation")
router.register("priority-classes", views.PriorityClassViewSet, basename="priority-class")
router.register("audit-events", views.AuditEventViewSet, basename="audit-event")
router.register("data-sources", views.DataSourceViewSet, basename="data-source")
router.register("pull-secrets", views.PullSecretViewSet, basename="pull-secret")

urlpatterns = [
    path("departments/<str:department>/quotas/", views.DepartmentQuotaTableView.as_view(), name="department-quotas"),
    *router.urls,
]
