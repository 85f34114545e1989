from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "apps.usage"
    label = "usage"
    verbose_name = "Usage"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from apps.org.models import Quota
        from apps.workloads import signals

        from . import services

        signals.quota_held.connect(services.on_quota_held, dispatch_uid="usage.quota_held")
        signals.quota_released.connect(services.on_quota_released, dispatch_uid="usage.quota_released")
        # The deserved quota in force at each moment (DeservedPeriod), written in the quota change's transaction.
        post_save.connect(services.on_quota_saved, sender=Quota, dispatch_uid="usage.quota_saved")
        post_delete.connect(services.on_quota_deleted, sender=Quota, dispatch_uid="usage.quota_deleted")
