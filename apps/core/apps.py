from django.apps import AppConfig

from . import request_ids


class CoreConfig(AppConfig):
    """The bottom layer: audit rows, Kueue naming, form/htmx/polling helpers. Imports no other app."""

    name = "apps.core"
    label = "core"

    def ready(self) -> None:
        request_ids.install_record_factory()
