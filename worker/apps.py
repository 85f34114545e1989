from django.apps import AppConfig


class WorkerConfig(AppConfig):
    """Registered so the worker's management commands (sync_kueue, watch_cluster) are found."""

    name = "worker"
    label = "worker"
