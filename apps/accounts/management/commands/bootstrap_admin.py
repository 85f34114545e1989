from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.services import installation_admin_bootstrap


class Command(BaseCommand):
    help = ("Create the installation admin (account and admin role over everything); safe to run again. "
            "Defaults come from PORTAL_ADMIN_USERNAME, PORTAL_ADMIN_EMAIL and PORTAL_ADMIN_PASSWORD(_FILE).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default=settings.PORTAL_ADMIN_USERNAME)
        parser.add_argument("--email", default=settings.PORTAL_ADMIN_EMAIL)
        parser.add_argument("--password-file", type=Path,
                            help="read the password from this file (a password on the command line would show in "
                                 "the process list)")

    def handle(self, *args: object, username: str, email: str, password_file: Path | None,
               **options: object) -> None:
        if not username:
            raise CommandError("Give the admin's username: --username or PORTAL_ADMIN_USERNAME.")
        password = settings.PORTAL_ADMIN_PASSWORD
        if password_file is not None:
            try:
                password = password_file.read_text().strip()
            except OSError as exc:
                raise CommandError(f"Cannot read the password file: {exc}") from exc
        try:
            result = installation_admin_bootstrap(username=username, email=email, password=password)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from error
        if not result.changes:
            self.stdout.write(f"{username!r} is an installation admin already; nothing changed.")
            return
        for change in result.changes:
            self.stdout.write(f"  {change}")
        self.stdout.write(self.style.SUCCESS(f"{username!r} is the installation admin."))
