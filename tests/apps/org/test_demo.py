import pytest

from apps.core.models import AuditEvent
from apps.org.demo import seed_demo
from apps.org.models import Department, NodePool, Project, Quota


def test_seed_is_idempotent(demo):
    counts = (NodePool.objects.count(), Department.objects.count(), Project.objects.count(), Quota.objects.count())
    audit_rows = AuditEvent.objects.count()
    seed_demo()
    assert counts == (3, 3, 6, 27)
    assert (NodePool.objects.count(), Department.objects.count(), Project.objects.count(),
            Quota.objects.count()) == counts
    assert AuditEvent.objects.count() == audit_rows


def test_demo_refused_outside_demo_mode(db, settings):
    from django.contrib.auth import get_user_model
    from django.core.exceptions import ImproperlyConfigured

    get_user_model().objects.all().delete()
    NodePool.objects.filter(quotas__isnull=True).delete()
    settings.DEMO_MODE = False
    with pytest.raises(ImproperlyConfigured, match="refused outside the demo"):
        seed_demo()
    assert not get_user_model().objects.exists()
