from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """The mirror of what the cluster says (Kueue queues and cohorts), written by the watcher. Imports core only."""

    name = "apps.cluster"
    label = "cluster"
    verbose_name = "Cluster mirror"
