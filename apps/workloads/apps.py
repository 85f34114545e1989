from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "apps.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from . import services  # noqa: F401 - registers the quota guard for running non-preemptible work
