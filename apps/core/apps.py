from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The bottom layer: audit rows, Kueue naming, form/htmx/polling helpers. Imports no other app."""

    name = "apps.core"
    label = "core"
