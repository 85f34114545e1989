"""Fault injection for Kubernetes API requests: random 500s, added latency, dropped watch streams."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field


@dataclass
class FaultConfig:
    error_rate: float = 0.0
    latency_ms: float = 0.0
    verbs: list[str] = field(default_factory=list)  # empty: every verb
    resources: list[str] = field(default_factory=list)  # empty: every resource
    drop_watches: bool = False
    seed: int | None = None

    def as_dict(self) -> dict:
        return {
            "error_rate": self.error_rate,
            "latency_ms": self.latency_ms,
            "verbs": self.verbs,
            "resources": self.resources,
            "drop_watches": self.drop_watches,
            "seed": self.seed,
        }


class Faults:
    """Thread-safe current fault configuration; drop_watches bumps an epoch that open watches poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.config = FaultConfig()
        self._rng = random.Random()
        self.watch_epoch = 0

    def set(self, data: dict) -> FaultConfig:
        cfg = FaultConfig(
            error_rate=float(data.get("error_rate", 0.0)),
            latency_ms=float(data.get("latency_ms", 0.0)),
            verbs=[str(v) for v in data.get("verbs") or []],
            resources=[str(r) for r in data.get("resources") or []],
            drop_watches=bool(data.get("drop_watches", False)),
            seed=data.get("seed"),
        )
        if not 0.0 <= cfg.error_rate <= 1.0:
            raise ValueError("error_rate must be between 0 and 1")
        with self._lock:
            self.config = cfg
            self._rng = random.Random(cfg.seed)
            if cfg.drop_watches:
                self.watch_epoch += 1
        return cfg

    def clear(self) -> None:
        with self._lock:
            self.config = FaultConfig()

    def _applies(self, verb: str, resource: str) -> bool:
        cfg = self.config
        return (not cfg.verbs or verb in cfg.verbs) and (not cfg.resources or resource in cfg.resources)

    def inject(self, verb: str, resource: str) -> bool:
        """Sleep the configured latency; True when this request must fail with a 500."""
        with self._lock:
            if not self._applies(verb, resource):
                return False
            latency = self.config.latency_ms
            fail = self.config.error_rate > 0 and self._rng.random() < self.config.error_rate
        if latency:
            time.sleep(latency / 1000.0)
        return fail
