from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "apps.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        """Connect what the workloads app hears from the apps below it (apps.org.signals explains the mechanism)."""
        from apps.org import signals as org_signals

        from .validation import live_work_scheduler_errors, running_non_preemptible_quota_errors

        org_signals.quota_size_proposed.connect(running_non_preemptible_quota_errors,
                                                dispatch_uid="workloads.running_non_preemptible_quota")
        org_signals.node_pool_scheduler_change_proposed.connect(live_work_scheduler_errors,
                                                                dispatch_uid="workloads.live_work_scheduler")
