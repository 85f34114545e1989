"""README's "Install on a cluster", run as written: every `kubectl` and `docker` command of the section, in its
order, against a served kubesim (the Kueue half included), with the real kubectl. The commands are read from the
README, so a step that names a Deployment, an overlay or a Job that deploy/ does not have fails here.

- `docker build -t <image> .` is not run (no image builds in the suite): the image it names must be the one the
  example overlay deploys, and the Dockerfile must be there.
- `kubectl ... exec deploy/<name> -- <command>`: kubesim runs no containers, so the Deployment must exist in the
  namespace after the apply (kubectl resolves the same `deploy/<name>`), and the command after `--`, a
  `python manage.py ...`, runs in this process against the test database and the kubesim (as it would in the pod).
- every other kubectl command runs and must succeed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from kubesim.testing import serve

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "deploy" / "overlays" / "example"
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize v5) not on PATH")


def install_commands() -> list[str]:
    """The section's commands in the order written: the `kubectl ...` and `docker ...` code spans."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Install on a cluster\n", 1)[1].split("\n### ", 1)[0]
    spans = re.findall(r"`((?:kubectl|docker) [^`]+)`", section.replace("\n   ", " "))
    return [" ".join(span.split()) for span in spans]


def overlay_image() -> str:
    (image,) = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())["images"]
    return f"{image['newName']}:{image['newTag']}"


def test_the_section_has_every_step():
    commands = install_commands()
    assert commands[0].startswith("kubectl get --raw /apis/visibility.kueue.x-k8s.io/")
    assert [command.split(" -- ")[-1] for command in commands if " exec " in command] == [
        "python manage.py migrate --noinput", "python manage.py bootstrap_admin", "python manage.py cluster_check"]
    assert any(command.startswith("kubectl apply -k ") for command in commands)
    assert any(command.startswith("docker build ") for command in commands)


@needs_kubectl
@pytest.mark.slow
def test_every_install_command_runs_against_kubesim_in_order(db, settings, tmp_path):
    settings.PORTAL_ADMIN_USERNAME, settings.PORTAL_ADMIN_EMAIL = "root", "root@example.org"
    settings.PORTAL_ADMIN_PASSWORD = "a-long-and-unguessable-passphrase-7"
    ran = []
    with serve(clock="manual") as ks:
        settings.KUBECONFIG = ks.kubeconfig_path
        env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path), "KUBECONFIG": ks.kubeconfig_path}

        def kubectl(argv: list[str]) -> str:
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, (" ".join(argv), done.stdout, done.stderr)
            return done.stdout

        for command in install_commands():
            argv = shlex.split(command)
            if argv[0] == "docker":
                assert argv[:2] == ["docker", "build"] and argv[argv.index("-t") + 1] == overlay_image(), command
                assert argv[-1] == "." and (ROOT / "Dockerfile").is_file()
            elif "exec" in argv:
                inside = argv[argv.index("--") + 1:]
                namespace = argv[argv.index("-n") + 1]
                target = argv[argv.index("exec") + 1]
                assert target.startswith("deploy/"), command
                assert kubectl(["kubectl", "-n", namespace, "get", target, "-o", "name"]).strip() == \
                    f"deployment.apps/{target.removeprefix('deploy/')}"
                assert inside[:2] == ["python", "manage.py"], command
                out = StringIO()
                call_command(*inside[2:], stdout=out, stderr=out)  # a failing command raises: the test fails
                if inside[2] == "cluster_check":
                    assert "The cluster is ready for the portal." in out.getvalue()
            else:
                kubectl(argv)
            ran.append(argv[:3])
        from django.contrib.auth import get_user_model

        assert get_user_model().objects.get(username="root").is_superuser  # bootstrap_admin ran
    assert len(ran) == len(install_commands())
