"""Training on a framework (docs/frameworks.md): which object runs it, and the checks of the framework's own settings.

PyTorch runs as a Kubeflow Trainer TrainJob where the cluster serves TrainJob and has a ClusterTrainingRuntime for torch
(the watcher records its name), else as a JobSet the portal wires the same way (the Trainer itself runs a TrainJob as a
JobSet, so a cluster with Trainer has JobSet too, and a JobSet is the safer choice while the watcher has not yet said
what is served). Ray runs as a KubeRay RayJob: a head, one worker group of `pods` workers with the GPUs, and the
entrypoint. Pure: the caller passes what is served (apps.cluster.selectors.served_for_training).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .manifests import MANIFEST_KINDS, ManifestKind
from .models import Framework, Kind

if TYPE_CHECKING:
    from .models import Workload

TORCH_RUNTIME_LABEL = "trainer.kubeflow.org/framework"  # on a ClusterTrainingRuntime: the framework it runs
TORCH_RUNTIME_DEFAULT = "torch-distributed"  # the one Trainer installs: chosen first when several are labelled torch
DEFAULT_RAY_VERSION = "2.41.0"
RAY_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
MAX_ENTRYPOINT = 4096
MAX_WORKING_DIR = 1024
RAY_FIELDS = ("ray_version", "ray_entrypoint", "ray_working_dir")
# What torchrun reads, set by the Trainer's torch plugin on a TrainJob and by the portal on its JobSet: a user's own
# value would silently break the rendezvous.
TORCH_ENV_NAMES = frozenset({"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                             "PET_MASTER_PORT"})
RAY_ENV_NAMES = frozenset({"RAY_ADDRESS"})


def framework_object(framework: str, served: frozenset[str] | None,
                     torch_runtime: str = "") -> tuple[ManifestKind | None, str]:
    """(the kind a training on `framework` is created as, or None for the portal's Job; why it cannot run here).
    PyTorch is a TrainJob only with a `torch_runtime` to run on: Trainer without one would refuse the TrainJob."""
    if framework == Framework.PYTORCH:
        if served is not None and Kind.TRAINJOB in served and torch_runtime:
            return MANIFEST_KINDS["TrainJob"], ""
        if served is not None and Kind.JOBSET not in served:
            return None, ("This cluster serves neither Kubeflow Trainer's TrainJob nor JobSet; ask an admin to install "
                          "one, or choose framework none.")
        return MANIFEST_KINDS["JobSet"], ""
    if framework == Framework.RAY:
        if served is not None and Kind.RAYJOB not in served:
            return None, "This cluster does not serve KubeRay's RayJob; ask an admin to install KubeRay."
        return MANIFEST_KINDS["RayJob"], ""
    return None, ""


def framework_entry(workload: Workload) -> ManifestKind:
    """The kind a training on a framework was created as (decided at submission: `object_api_version`)."""
    if workload.framework == Framework.RAY:
        return MANIFEST_KINDS["RayJob"]
    trainjob = MANIFEST_KINDS["TrainJob"]
    return trainjob if workload.object_api_version == trainjob.api_version else MANIFEST_KINDS["JobSet"]


def torch_runtime_of(runtimes: list[dict[str, Any]]) -> str:
    """The ClusterTrainingRuntime PyTorch runs on, of those labelled for torch: Trainer's own when it is there, else
    the first by name (the same choice on every resync); "" for none."""
    names = sorted(str((runtime.get("metadata") or {}).get("name") or "") for runtime in runtimes
                   if ((runtime.get("metadata") or {}).get("labels") or {}).get(TORCH_RUNTIME_LABEL) == "torch")
    names = [name for name in names if name]
    return TORCH_RUNTIME_DEFAULT if TORCH_RUNTIME_DEFAULT in names else (names[0] if names else "")


def framework_settings_of(framework: str, values: dict[str, Any]) -> dict[str, Any]:
    """What the row keeps of the framework's settings (with their defaults)."""
    if framework != Framework.RAY:
        return {}
    return {"ray_version": values.get("ray_version") or DEFAULT_RAY_VERSION,
            "ray_entrypoint": values.get("ray_entrypoint") or "",
            "ray_working_dir": values.get("ray_working_dir") or ""}


def framework_errors(*, kind: str, framework: Any, values: dict[str, Any], unknown: set[str]) -> dict[str, list[str]]:
    """Every refusal of the framework and its settings (field -> messages); checks needing an `unknown` field are
    left out. `values` holds the service's fields (command, args, env, the ray_* settings)."""
    errors: dict[str, list[str]] = {}
    if "framework" in unknown:
        return errors
    if framework not in Framework.values:
        return {"framework": [f"Choose one of: {', '.join(Framework.values)}."]}
    if framework != Framework.NONE and kind != Kind.TRAINING:
        errors["framework"] = [f"Only training workloads run on a framework; leave it out of a {kind} workload."]
    for name in RAY_FIELDS:
        if framework != Framework.RAY and name not in unknown and values.get(name) not in (None, ""):
            errors[name] = ["Only Ray training has this; choose framework ray, or leave it out."]
    env_names = {item.get("name") for item in values.get("env") or [] if isinstance(item, dict)}
    if framework == Framework.PYTORCH and "env" not in unknown:
        taken = sorted(TORCH_ENV_NAMES & env_names)
        if taken:
            errors["env"] = [f"{', '.join(taken)}: set by the portal for torchrun's rendezvous; choose another name."]
    if framework != Framework.RAY:
        return errors
    if "env" not in unknown and (taken := sorted(RAY_ENV_NAMES & env_names)):
        errors["env"] = [f"{', '.join(taken)}: set by KubeRay for the job; choose another name."]
    for name, what in (("command", "command"), ("args", "arguments")):
        if name not in unknown and values.get(name):
            errors[name] = [f"A Ray job runs its entrypoint on the cluster KubeRay starts; leave the {what} empty and "
                            "write it into the entrypoint."]
    entrypoint = values.get("ray_entrypoint")
    if "ray_entrypoint" not in unknown:
        if not isinstance(entrypoint, str) or not entrypoint.strip():
            errors["ray_entrypoint"] = ["Give the command Ray runs as the job, e.g. python train.py --epochs 3."]
        elif len(entrypoint) > MAX_ENTRYPOINT or "\x00" in entrypoint:
            errors["ray_entrypoint"] = [f"At most {MAX_ENTRYPOINT} characters, without NUL."]
    version = values.get("ray_version")
    if "ray_version" not in unknown and version not in (None, "") and (
            not isinstance(version, str) or not RAY_VERSION.match(version)):
        errors["ray_version"] = [f"{version!r} is not a Ray version; write it as the image has it, e.g. "
                                 f"{DEFAULT_RAY_VERSION}."]
    working_dir = values.get("ray_working_dir")
    if "ray_working_dir" not in unknown and working_dir not in (None, "") and (
            not isinstance(working_dir, str) or len(working_dir) > MAX_WORKING_DIR
            or any(character.isspace() or character == "\x00" for character in working_dir)):
        errors["ray_working_dir"] = [f"A path in the image or a URI of a zip (s3://, gs://, https://), at most "
                                     f"{MAX_WORKING_DIR} characters, without spaces."]
    return errors
