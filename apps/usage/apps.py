from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "apps.usage"
    label = "usage"
    verbose_name = "Usage"

    def ready(self) -> None:
        """Connect what the ledger hears from the apps below it (apps.org.signals explains the mechanism)."""
        from apps.org import signals as org_signals
        from apps.workloads import signals as workload_signals

        from . import services

        workload_signals.quota_held.connect(services.on_quota_held, dispatch_uid="usage.quota_held")
        workload_signals.quotas_held.connect(services.on_quotas_held, dispatch_uid="usage.quotas_held")
        workload_signals.quota_units_changed.connect(services.on_quota_units_changed,
                                                     dispatch_uid="usage.quota_units_changed")
        workload_signals.quota_released.connect(services.on_quota_released, dispatch_uid="usage.quota_released")
        # The deserved quota in force at each moment (DeservedPeriod), written in the quota change's transaction.
        org_signals.quota_deserved_changed.connect(services.on_quota_deserved_changed,
                                                   dispatch_uid="usage.quota_deserved_changed")
