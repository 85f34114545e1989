from django.core.management.base import BaseCommand

from apps.org.demo import DEMO_PASSWORD, seed_demo_kai_pool, seed_demo_spend
from apps.workloads.demo import seed_demo, seed_demo_templates


class Command(BaseCommand):
    help = ("Create the demo organisation, its logins, a few workload templates, two budgets, a policy and a KAI "
            "Scheduler pool (demo/embedded mode only); safe to run again.")

    def handle(self, *args: object, **options: object) -> None:
        users = seed_demo()
        templates = seed_demo_templates()
        budgets, policies = seed_demo_spend()
        kai_pool = seed_demo_kai_pool()
        self.stdout.write(self.style.SUCCESS(f"Demo organisation ready. Logins (password {DEMO_PASSWORD!r}):"))
        for user in users:
            scope = user.project or user.department or "everything"
            self.stdout.write(f"  {user.username:<10} {user.role:<17} {scope}")
        self.stdout.write(f"Workload templates: {', '.join(template.name for template in templates)}.")
        self.stdout.write(f"Budgets: {', '.join(str(budget.owner) for budget in budgets)}; policies: "
                          f"{', '.join(policy.scope_text() for policy in policies)}.")
        self.stdout.write(f"KAI Scheduler pool: {kai_pool.slug} (GPU fractions on: notebooks and single-pod work may "
                          "ask for part of a card).")
