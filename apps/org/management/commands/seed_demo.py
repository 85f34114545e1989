from django.core.management.base import BaseCommand

from apps.org.demo import DEMO_PASSWORD, seed_demo


class Command(BaseCommand):
    help = "Create the demo organisation and its logins (demo/embedded mode only); safe to run again."

    def handle(self, *args: object, **options: object) -> None:
        users = seed_demo()
        self.stdout.write(self.style.SUCCESS(f"Demo organisation ready. Logins (password {DEMO_PASSWORD!r}):"))
        for user in users:
            scope = user.project or user.department or "everything"
            self.stdout.write(f"  {user.username:<10} {user.role:<17} {scope}")
