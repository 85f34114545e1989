from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts and access"

    def ready(self) -> None:
        from . import signals  # noqa: F401 - connects the sign-in receivers

