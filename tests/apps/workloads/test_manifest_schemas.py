"""apps/workloads/manifests/schemas.py: the web process loads the official client's models and jsonschema only when a
manifest is first checked (docs/architecture.md, The stack)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from django.conf import settings

PROBE = textwrap.dedent("""
    import sys
    import django
    django.setup()
    from django.urls import get_resolver
    from portal.wsgi import application  # noqa: F401  (what gunicorn loads)
    get_resolver().url_patterns
    print("at start:", "kubernetes" in sys.modules, "jsonschema" in sys.modules)
    from apps.workloads.manifests.schemas import MANIFEST_KINDS, schema_errors
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "busybox", "bogus": 1}]}}}}
    print("job:", schema_errors(MANIFEST_KINDS["Job"], job))
    print("after a check:", "kubernetes" in sys.modules)
""")


def test_the_web_loads_the_client_models_and_jsonschema_at_the_first_check_not_at_start():
    ran = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                         cwd=settings.BASE_DIR, env={"DJANGO_SETTINGS_MODULE": "portal.settings",
                                                     "PATH": "/usr/bin:/bin", "HOME": str(settings.BASE_DIR)})
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert "at start: False False" in lines
    assert "job: ['spec.template.spec.containers[0].bogus: unknown field.']" in lines
    assert "after a check: True" in lines
