"""Data sources and credentials through their pages in a browser: the admin adds a data source (every error at
once first), alice stores a credential, sees its keys and never its value, rotates it and finds both on the
training form."""

from __future__ import annotations

from django.urls import reverse

SECRET = "wandb-secret-value-73c1d0"
ROTATED = "wandb-rotated-value-0a9e44"


def test_admin_adds_a_data_source_and_alice_keeps_and_rotates_a_credential(login):
    from apps.org.models import DataSource, Project
    from apps.workloads.models import Credential

    vision = Project.objects.get(slug="vision")
    admin = login("admin")
    admin.goto(reverse("org:data"))
    admin.select_option("#id_source-project", value=str(vision.pk))
    admin.fill("#id_source-name", "Bad Name")
    admin.fill("#id_source-claim_name", "Not/A/Claim")
    admin.fill("#id_source-mount_path", "/etc/ssl")
    admin.click("text=Add data source")
    for field in ("name", "claim_name", "mount_path"):  # all three refused in one answer
        assert admin.locator(f"#id_source-{field}_errors").is_visible()
    assert not DataSource.objects.exists()
    admin.fill("#id_source-name", "imagenet")
    admin.fill("#id_source-claim_name", "imagenet")
    admin.fill("#id_source-mount_path", "/data/imagenet")
    admin.click("text=Add data source")
    admin.wait_for_selector("code:text-is('/data/imagenet')")
    assert DataSource.objects.get(name="imagenet").project == vision

    alice = login("alice")
    alice.goto(reverse("workloads:credentials"))
    alice.select_option("#id_project", value=str(vision.pk))
    alice.fill("#id_name", "Not A Name")
    alice.fill("#id_values", f"WANDB_API_KEY={SECRET}")
    alice.click("button:has-text('Save')")
    assert alice.locator("#id_name_errors").is_visible()
    assert SECRET not in alice.content() and alice.input_value("#id_values") == ""  # never echoed back
    alice.fill("#id_name", "wandb")
    alice.fill("#id_values", f"WANDB_API_KEY={SECRET}\nWANDB_ENTITY=vision")
    alice.click("button:has-text('Save')")
    alice.wait_for_selector("text=Its values will not be shown again")
    row = alice.locator("tr[data-credential]")
    assert "WANDB_API_KEY" in row.inner_text() and "WANDB_ENTITY" in row.inner_text()
    assert SECRET not in alice.content()

    row.locator("text=New values").click()
    alice.fill("#id_values", f"WANDB_API_KEY={ROTATED}")
    alice.click("button:has-text('Save new values')")
    alice.wait_for_selector("text=is being rewritten")
    assert "WANDB_ENTITY" not in alice.locator("tr[data-credential]").inner_text()  # the new values replace all
    assert ROTATED not in alice.content()
    assert Credential.objects.get(name="wandb").keys == ["WANDB_API_KEY"]

    alice.goto("/workloads/submit/training/")
    assert alice.locator("label:has-text('imagenet')").count() == 1
    assert alice.locator("label:has-text('wandb')").count() == 1
