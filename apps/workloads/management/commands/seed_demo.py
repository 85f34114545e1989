from django.core.management.base import BaseCommand

from apps.org.demo import DEMO_PASSWORD
from apps.workloads.demo import seed_demo, seed_demo_templates


class Command(BaseCommand):
    help = ("Create the demo organisation, its logins and a few workload templates (demo/embedded mode only); safe "
            "to run again.")

    def handle(self, *args: object, **options: object) -> None:
        users = seed_demo()
        templates = seed_demo_templates()
        self.stdout.write(self.style.SUCCESS(f"Demo organisation ready. Logins (password {DEMO_PASSWORD!r}):"))
        for user in users:
            scope = user.project or user.department or "everything"
            self.stdout.write(f"  {user.username:<10} {user.role:<17} {scope}")
        self.stdout.write(f"Workload templates: {', '.join(template.name for template in templates)}.")
