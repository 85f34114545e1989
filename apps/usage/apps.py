from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "apps.usage"
    label = "usage"
    verbose_name = "Usage"

    def ready(self) -> None:
        from apps.workloads import signals

        from . import services

        signals.quota_held.connect(services.on_quota_held, dispatch_uid="usage.quota_held")
        signals.quota_released.connect(services.on_quota_released, dispatch_uid="usage.quota_released")
