"""NVIDIA's DCGM exporter, emulated per node: the Prometheus text a `dcgm-exporter -k` DaemonSet pod would serve.

What a real exporter with pod mapping on (`-k` / `DCGM_EXPORTER_KUBERNETES=true`) publishes, and so what this
module writes (metric and label names from the exporter's documentation and its default counters):

- one series per GPU entity, labelled `gpu` (index on the node), `UUID`, `pci_bus_id`, `device` (`nvidia<N>`),
  `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, and `namespace`, `pod`, `container` of the pod the kubelet's
  pod-resources API says holds it (absent when no pod does);
- a MIG instance is an entity of its own with `GPU_I_ID` and `GPU_I_PROFILE` (its parent GPU's `gpu` and `UUID`);
  device-level counters (`DCGM_FI_DEV_GPU_UTIL`, power, temperature) are not reported for MIG instances, the
  profiling ones (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, a ratio 0..1) and the framebuffer are;
- a time-sliced GPU (`nvidia.com/gpu.replicas` > 1 on the node) is one physical device whatever the replicas: the
  exporter cannot split its counters by pod, so it repeats the physical GPU's series once per pod sharing it.

Values follow each running pod's declared behaviour, annotation `kubesim.io/gpu-pattern` (on the pod or its
template): `busy`, `idle`, `bursty`, `training` (the default: a warm-up, then high with short dips for evaluation and
checkpoints), a number (a constant percent) or comma-separated percents, each held `kubesim.io/gpu-pattern-step`
seconds (default 10) in a cycle. Time is kubesim's clock (seconds since the pod started), so a manual clock gives
reproducible output. Served at `GET /kubesim/v1/dcgm/<node>/metrics`.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from datetime import datetime

from kubesim.kernel.clock import parse_rfc3339
from kubesim.kernel.quantity import QuantityError, decimal_value

PATTERN_ANNOTATION = "kubesim.io/gpu-pattern"
PATTERN_STEP_ANNOTATION = "kubesim.io/gpu-pattern-step"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
PRODUCT_LABEL = "nvidia.com/gpu.product"
FULL_GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
DRIVER_VERSION = "570.124.06"
DEFAULT_STEP_SECONDS = 10.0

# (metric, help, applies to MIG instances)
METRICS: list[tuple[str, str, bool]] = [
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", False),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", False),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", True),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", True),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", False),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", False),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", True),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", True),
]

# Framebuffer MiB and board power (idle W, max W) by product; unknown products get the last entry.
_PRODUCTS = {
    "H100": (81559, 70.0, 700.0),
    "A100": (81920, 55.0, 400.0),
    "L40S": (46068, 35.0, 350.0),
    "": (24576, 30.0, 300.0),
}
_MIG_SLICES = {"1g": 7, "2g": 3, "3g": 2, "4g": 1, "7g": 1}  # instances of a profile that fit one A100/H100


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str
    pattern: str
    step: float
    seconds: float  # since the pod started, on kubesim's clock
    seed: int


@dataclass
class Entity:
    """One series set: a full GPU, a MIG instance or a time-sliced physical GPU."""

    gpu: int
    uuid: str
    memory_mib: int
    power: tuple[float, float]
    mig_id: int | None = None
    mig_profile: str = ""
    holders: list[Holder] | None = None

    @property
    def utilisation(self) -> float:
        """Percent busy: the sum of what its pods do (time-sliced pods share one engine), at most 100."""
        return min(100.0, sum(pattern_value(h.pattern, h.seconds, h.step, h.seed) for h in self.holders or []))


def pattern_value(pattern: str, seconds: float, step: float = DEFAULT_STEP_SECONDS, seed: int = 0) -> float:
    """Percent utilisation of one pod `seconds` into its run."""
    name = pattern.strip().lower()
    jitter = ((seed + int(seconds)) * 2654435761 % 1000) / 1000.0  # deterministic noise in [0, 1)
    if name == "busy":
        return 93.0 + 5.0 * jitter
    if name == "idle":
        return 0.0
    if name == "bursty":
        return 95.0 if int(seconds // 30) % 2 == 0 else 2.0
    if name in ("", "training"):
        if seconds < 20:
            return 10.0 + 3.5 * seconds  # loading data and the model
        if int(seconds) % 300 >= 285:
            return 25.0 + 10.0 * jitter  # evaluation / checkpoint
        return 86.0 + 10.0 * jitter
    try:
        values = [min(100.0, max(0.0, float(part))) for part in name.split(",")]
    except ValueError:
        return pattern_value("training", seconds, step, seed)
    if any(math.isnan(v) for v in values):
        return 0.0
    return values[int(seconds // max(step, 0.001)) % len(values)]


def _product(labels: dict) -> tuple[str, tuple[int, float, float]]:
    product = labels.get(PRODUCT_LABEL, "NVIDIA-GPU")
    key = next((k for k in _PRODUCTS if k and k in product), "")
    return product.removesuffix("-SHARED").replace("-", " "), _PRODUCTS[key]


def _gpu_requests(pod: dict) -> tuple[str, int, str]:
    """(resource, count, container) of the first container asking for GPUs; count 0 when none does."""
    for container in pod["spec"].get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for resource, value in asked.items():
            if resource == FULL_GPU or resource.startswith(MIG_PREFIX):
                try:
                    count = int(decimal_value(value))
                except (QuantityError, ValueError):
                    continue
                if count > 0:
                    return resource, count, container["name"]
    return "", 0, ""


def _holder(pod: dict, container: str, now: datetime) -> Holder:
    md = pod["metadata"]
    annotations = md.get("annotations") or {}
    try:
        step = float(annotations.get(PATTERN_STEP_ANNOTATION, DEFAULT_STEP_SECONDS))
    except ValueError:
        step = DEFAULT_STEP_SECONDS
    started = (pod.get("status") or {}).get("startTime")
    seconds = max(0.0, (now - parse_rfc3339(started)).total_seconds()) if started else 0.0
    seed = int(hashlib.sha256(md.get("uid", md["name"]).encode()).hexdigest()[:8], 16)
    return Holder(
        md["namespace"],
        md["name"],
        container,
        annotations.get(PATTERN_ANNOTATION, "training"),
        step if step > 0 and math.isfinite(step) else DEFAULT_STEP_SECONDS,
        seconds,
        seed,
    )


def _uuid(node: str, gpu: int) -> str:
    digest = hashlib.sha256(f"{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def node_entities(node: dict, pods: list[dict], now: datetime) -> list[Entity]:
    """The node's GPU entities with the running pods that hold them (in start order, as a device plugin hands them
    out: each pod takes the next free devices)."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    _, (memory, idle_w, max_w) = _product(labels)
    running = sorted(
        (
            p
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
            and p["spec"].get("nodeName") == name
            and not p["metadata"].get("deletionTimestamp")
        ),
        key=lambda p: ((p.get("status") or {}).get("startTime", ""), p["metadata"]["name"]),
    )
    entities: list[Entity] = []
    slots: list[Entity] = []  # one per schedulable unit, in device-plugin order
    mig = next((r for r in allocatable if r.startswith(MIG_PREFIX)), None)
    if mig is not None:
        profile = mig.removeprefix(MIG_PREFIX)
        per_gpu = _MIG_SLICES.get(profile.split(".")[0], 1)
        count = int(decimal_value(allocatable[mig]))
        mib = _profile_memory(profile, memory)
        for index in range(count):
            gpu = index // per_gpu
            entity = Entity(
                gpu, _uuid(name, gpu), mib, (idle_w, max_w), mig_id=index % per_gpu + 1, mig_profile=profile, holders=[]
            )
            entities.append(entity)
            slots.append(entity)
        resource = mig
    else:
        count = int(decimal_value(allocatable.get(FULL_GPU, "0")))
        try:
            replicas = max(1, int(labels.get(REPLICAS_LABEL, "1")))
        except ValueError:
            replicas = 1
        physical = max(1, count // replicas) if count else 0
        entities = [Entity(gpu, _uuid(name, gpu), memory, (idle_w, max_w), holders=[]) for gpu in range(physical)]
        # Replica slots go round the physical GPUs, as the device plugin spreads time-sliced replicas.
        slots = [entities[i % physical] for i in range(count)] if physical else []
        resource = FULL_GPU
    free = list(range(len(slots)))
    for pod in running:
        asked_resource, asked, container = _gpu_requests(pod)
        if asked_resource != resource or asked == 0:
            continue
        taken, free = free[:asked], free[asked:]
        holder = _holder(pod, container, now)
        for slot in taken:
            holders = slots[slot].holders
            assert holders is not None
            if holder not in holders:
                holders.append(holder)
    return entities


def _profile_memory(profile: str, card_mib: int) -> int:
    match = re.search(r"\.(\d+)gb$", profile)
    return int(match.group(1)) * 1024 if match else card_mib // 7


def _labels(entity: Entity, node: dict, holder: Holder | None) -> str:
    labels = node["metadata"].get("labels") or {}
    model, _ = _product(labels)
    pairs = [
        ("gpu", str(entity.gpu)),
        ("UUID", entity.uuid),
        ("pci_bus_id", f"00000000:{entity.gpu + 0x18:02X}:00.0"),
        ("device", f"nvidia{entity.gpu}"),
        ("modelName", model),
    ]
    if entity.mig_id is not None:
        pairs += [("GPU_I_PROFILE", entity.mig_profile), ("GPU_I_ID", str(entity.mig_id))]
    pairs += [("Hostname", node["metadata"]["name"]), ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION)]
    if holder is not None:
        pairs += [("container", holder.container), ("namespace", holder.namespace), ("pod", holder.pod)]
    return ",".join(f'{key}="{_escape(value)}"' for key, value in pairs)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _values(entity: Entity) -> dict[str, float]:
    util = entity.utilisation
    busy = util / 100.0
    used = round(entity.memory_mib * (0.02 + (0.76 * min(1.0, busy * 1.4) if entity.holders else 0.0)))
    if entity.holders and util == 0:
        used = round(entity.memory_mib * 0.08)  # a loaded but idle framework keeps its context and weights
    idle_w, max_w = entity.power
    return {
        "DCGM_FI_DEV_GPU_UTIL": round(util),
        "DCGM_FI_DEV_MEM_COPY_UTIL": round(util * 0.45),
        "DCGM_FI_DEV_FB_FREE": entity.memory_mib - used,
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_POWER_USAGE": round(idle_w + (max_w - idle_w) * busy, 3),
        "DCGM_FI_DEV_GPU_TEMP": round(32 + 40 * busy),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(busy, 6),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(busy * 0.6, 6),
    }


def exposition(node: dict, pods: list[dict], now: datetime) -> str:
    """The node's exporter page in the Prometheus text format (version 0.0.4)."""
    entities = node_entities(node, pods, now)
    values = [(entity, _values(entity)) for entity in entities]
    lines: list[str] = []
    for metric, help_text, on_mig in METRICS:
        rows = [(entity, v) for entity, v in values if on_mig or entity.mig_id is None]
        if not rows:
            continue
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for entity, v in rows:
            holders: list[Holder | None] = list(entity.holders or []) or [None]
            for holder in holders:
                lines.append(f"{metric}{{{_labels(entity, node, holder)}}} {_number(v[metric])}")
    return "\n".join(lines) + "\n" if lines else ""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
