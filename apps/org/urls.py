from django.urls import path

from . import notification_pages, views

app_name = "org"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("pools/", views.pools, name="pools"),
    path("pools/new/", views.pool_create, name="pool_create"),
    path("pools/<slug:slug>/", views.pool, name="pool"),
    path("pools/<slug:slug>/edit/", views.pool_edit, name="pool_edit"),
    path("pools/<slug:slug>/delete/", views.pool_delete, name="pool_delete"),
    path("departments/", views.departments, name="departments"),
    path("departments/new/", views.department_create, name="department_create"),
    path("departments/<slug:slug>/edit/", views.department_edit, name="department_edit"),
    path("departments/<slug:slug>/delete/", views.department_delete, name="department_delete"),
    path("departments/<slug:slug>/quotas/", views.department_quotas, name="department_quotas"),
    path("departments/<slug:slug>/projects/new/", views.project_create, name="project_create"),
    path("projects/<slug:slug>/edit/", views.project_edit, name="project_edit"),
    path("projects/<slug:slug>/delete/", views.project_delete, name="project_delete"),
    path("projects/<slug:slug>/namespaces/", views.project_namespaces, name="project_namespaces"),
    path("projects/<slug:slug>/namespaces/<int:pk>/unmap/", views.project_namespace_unmap,
         name="project_namespace_unmap"),
    path("priority-classes/", views.priority_classes, name="priority_classes"),
    path("priority-classes/new/", views.priority_class_create, name="priority_class_create"),
    path("priority-classes/<slug:name>/edit/", views.priority_class_edit, name="priority_class_edit"),
    path("priority-classes/<slug:name>/delete/", views.priority_class_delete, name="priority_class_delete"),
    path("weights/", views.weights, name="weights"),
    path("audit/", views.audit, name="audit"),
    path("cluster-sync/", views.cluster_sync, name="cluster_sync"),
    path("data/", views.data, name="data"),
    path("data/sources/<int:pk>/delete/", views.data_source_delete, name="data_source_delete"),
    path("data/registries/<int:pk>/delete/", views.pull_secret_delete, name="pull_secret_delete"),
    path("notifications/", notification_pages.notification_channels, name="notification_channels"),
    path("notifications/new/", notification_pages.notification_channel_create, name="notification_channel_create"),
    path("notifications/<int:pk>/", notification_pages.notification_channel, name="notification_channel"),
    path("notifications/<int:pk>/edit/", notification_pages.notification_channel_edit,
         name="notification_channel_edit"),
    path("notifications/<int:pk>/delete/", notification_pages.notification_channel_delete,
         name="notification_channel_delete"),
    path("notifications/<int:pk>/test/", notification_pages.notification_channel_test,
         name="notification_channel_test"),
]
