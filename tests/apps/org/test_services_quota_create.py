"""quota_create: a quota for a new (owner, pool) only, so a POST never silently overwrites a quota."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.core.models import AuditEvent
from apps.org import services
from apps.org.models import NodePool, Project, Quota


def test_creates_with_the_rules_and_audit_of_quota_set(demo):
    pool = NodePool.objects.get(slug="h100")
    etl = Project.objects.get(slug="etl")
    Quota.objects.filter(project=etl, node_pool=pool).delete()
    quota = services.quota_create(actor=demo["admin"], node_pool=pool, project=etl, deserved=0, limit=4)
    assert (quota.deserved, quota.limit) == (0, 4)
    assert AuditEvent.objects.filter(action="quota.create", object_id=str(quota.pk)).exists()
    with pytest.raises(ValidationError) as refused:
        services.quota_create(actor=demo["admin"], node_pool=pool, project=etl, deserved=1, limit=4)
    assert refused.value.messages == ["This project already has a quota on that pool."]


def test_department_duplicate_message(demo):
    with pytest.raises(ValidationError) as refused:
        services.quota_create(actor=demo["admin"], node_pool=NodePool.objects.get(slug="h100"),
                              department=Project.objects.get(slug="etl").department, deserved=1, limit=None)
    assert refused.value.messages == ["This department already has a quota on that pool."]


def test_access_is_checked_before_anything_is_revealed(demo):
    with pytest.raises(PermissionDenied):
        services.quota_create(actor=demo["viewer"], node_pool=NodePool.objects.get(slug="h100"),
                              project=Project.objects.get(slug="vision"), deserved=1, limit=None)
