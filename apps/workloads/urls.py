from django.urls import path

from . import policy_pages, views

app_name = "workloads"

urlpatterns = [
    path("", views.workload_list, name="list"),
    path("export.csv", views.workload_export, name="export"),
    path("stop/", views.bulk_stop, name="bulk_stop"),
    path("submit/", views.submit, {"kind": "training"}, name="submit_default"),
    path("submit/manifest/", views.submit_manifest, name="submit_manifest"),
    path("submit/inference/", views.submit_inference, name="submit_inference"),
    path("submit/<slug:kind>/", views.submit, name="submit"),
    path("templates/", views.templates, name="templates"),
    path("templates/new/", views.template_create, name="template_create"),
    path("templates/<int:pk>/edit/", views.template_edit, name="template_edit"),
    path("templates/<int:pk>/delete/", views.template_delete, name="template_delete"),
    path("policies/", policy_pages.policies, name="policies"),
    path("policies/new/", policy_pages.policy_create, name="policy_create"),
    path("policies/<int:pk>/edit/", policy_pages.policy_edit, name="policy_edit"),
    path("policies/<int:pk>/delete/", policy_pages.policy_delete, name="policy_delete"),
    path("held-idle/", views.held_idle, name="held_idle"),
    path("projects/<slug:slug>/queue/", views.project_queue, name="project_queue"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/stop/", views.stop, name="stop"),
    path("<int:pk>/keep-alive/", views.keep_alive, name="keep_alive"),
    path("<int:pk>/service/", views.inference_update, name="inference_update"),
    path("<int:pk>/connect/", views.connect, name="connect"),
    path("<int:pk>/notebook/<path:path>", views.notebook, name="notebook"),
    path("<int:pk>/endpoint/", views.endpoint, name="endpoint_root"),
    path("<int:pk>/endpoint/<path:path>", views.endpoint, name="endpoint"),
    path("credentials/", views.credentials, name="credentials"),
    path("credentials/<int:pk>/delete/", views.credential_delete, name="credential_delete"),
    path("credentials/<int:pk>/values/", views.credential_values, name="credential_values"),
]
