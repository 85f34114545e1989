from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "apps.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        """Connect what the workloads app hears from the apps below it (apps.org.signals explains the mechanism)."""
        from apps.org import signals as org_signals

        from .validation import running_non_preemptible_quota_errors

        org_signals.quota_size_proposed.connect(running_non_preemptible_quota_errors,
                                                dispatch_uid="workloads.running_non_preemptible_quota")
