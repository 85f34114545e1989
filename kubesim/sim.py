"""The composition root: the Simulator builds the API server half (store, clock, faults, RBAC, its controllers) and
the optional Kueue half, wires them through kubesim.kernel.protocols, and runs the controllers to a fixpoint; clock
steps and persistence. Independent of HTTP (kubesim.apiserver.http serves a Simulator)."""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kubesim.apiserver import operators
from kubesim.apiserver.auth import bootstrap_policy
from kubesim.apiserver.auth.kubeconfig import TOKEN
from kubesim.apiserver.auth.rbac import Rbac
from kubesim.apiserver.controllers.clusterrole_aggregation import ClusterRoleAggregationController
from kubesim.apiserver.controllers.deployment_controller import DeploymentController
from kubesim.apiserver.controllers.endpoints import EndpointsController
from kubesim.apiserver.controllers.garbage_collector import GarbageCollector
from kubesim.apiserver.controllers.job_controller import JobController
from kubesim.apiserver.controllers.namespace import NamespaceController
from kubesim.apiserver.http.faults import Faults
from kubesim.apiserver.nodes.cluster import demo_cluster, node_object
from kubesim.apiserver.nodes.kubelet import Kubelet
from kubesim.apiserver.nodes.servers import ServerActivity
from kubesim.apiserver.registry import conversion
from kubesim.apiserver.registry.resources import KAI, KUEUE, OPERATORS, Resource, crd_schema
from kubesim.apiserver.storage.store import ObjectStore
from kubesim.apiserver.validation import builtin
from kubesim.kai import KaiScheduler
from kubesim.kernel.clock import Clock, parse_rfc3339, rfc3339
from kubesim.kernel.protocols import Controller, KueueHalf, KueueModule, Webhook
from kubesim.kernel.store import clone

MAX_SETTLE_ROUNDS = 100_000  # Kueue admits one head per ClusterQueue per cycle: deep backlogs need many rounds
MAX_ADVANCE_STEPS = 100000
# The background settle (--async-settle) coalesces the writes that arrive while it waits: it waits as long as its last
# pass took (ASYNC_SETTLE_RATIO x), so the controllers take at most about half of the process however large the
# cluster, however busy the machine, and a burst of writes shares one pass. A fixed wall-clock window gave a slowed
# process ever smaller batches and many more passes, each as costly as the cluster is large. Bounds in seconds: a
# small cluster settles almost at once, a huge one at least twice a second.
ASYNC_SETTLE_RATIO = 1.0
ASYNC_SETTLE_MIN = 0.005
ASYNC_SETTLE_MAX = 0.5
# The background settle freezes the heap after each pass (gc.freeze): the stored objects are acyclic JSON trees, freed
# by reference counting, yet Python's full collections scanned them all every few seconds of churn, collecting
# nothing (0.6 s per scan at 4,000 Jobs, growing with the store) while every thread, API requests included, stood
# still: those pauses were the "longest reconciles" of whichever controller ran. A cycle frozen and dropped later is
# only collected when the heap is thawed and collected, every GC_THAW_SECONDS (one such pause per interval).
GC_THAW_SECONDS = 600.0
# The background settle, once it has held the store lock SETTLE_TURN seconds, hands it between two controllers to the
# threads waiting for it (API requests, watches woken by a write) and takes it back once each has had it, or after
# SETTLE_YIELD_MAX seconds however many are still waiting (newcomers keep overtaking one: the pass must go on).
SETTLE_TURN = 0.005
SETTLE_YIELD_MAX = 0.25
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def settle_window(last_pass: float) -> float:
    """Seconds the background settle lets writes gather after the first one, from its last pass's wall-clock seconds
    (which grow with the work a pass does and with how much of a CPU the process gets)."""
    return min(ASYNC_SETTLE_MAX, max(ASYNC_SETTLE_MIN, ASYNC_SETTLE_RATIO * last_pass))


class SettleError(RuntimeError):
    """Controllers kept writing for MAX_SETTLE_ROUNDS rounds: a controller bug (ping-pong)."""


def freeze_heap(thawed: float) -> float:
    """Freeze what the heap holds now, so full collections skip it (see GC_THAW_SECONDS); once GC_THAW_SECONDS have
    passed since `thawed` (a time.monotonic()), thaw and collect everything first. Returns the last thaw's time."""
    now = time.monotonic()
    if now - thawed >= GC_THAW_SECONDS:
        gc.unfreeze()
        gc.collect()
        thawed = now
    gc.freeze()
    return thawed


def load_kueue() -> KueueModule | None:
    """The Kueue half, if present; kubesim runs as a plain Kubernetes emulator without it (hence the import by
    name at run time rather than a module-level import)."""
    module: Any
    try:
        module = importlib.import_module("kubesim.kueue")
    except ModuleNotFoundError as exc:
        if exc.name != "kubesim.kueue":
            raise
        module = None
    if module is None or not hasattr(module, "Kueue"):
        print("kubesim: kubesim.kueue not available, running without Kueue", file=sys.stderr)
        return None
    return module


def _crd_object(res: Resource) -> dict:
    """The CustomResourceDefinition an install (Kueue's, an operator's) creates for res, from the vendored schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{res.plural}.{res.group}"},
        "spec": {
            "group": res.group,
            "names": {
                "plural": res.plural,
                "singular": res.singular,
                "kind": res.kind,
                "shortNames": list(res.short_names),
                "categories": list(res.categories),
            },
            "scope": "Namespaced" if res.namespaced else "Cluster",
            "versions": [
                {
                    "name": res.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": crd_schema(res.plural)},
                    "subresources": {sub: {} for sub in res.subresources},
                },
                *(
                    {
                        "name": old.version,
                        "served": True,
                        "storage": False,
                        "deprecated": True,
                        "deprecationWarning": conversion.warning(res),
                        "schema": {"openAPIV3Schema": conversion.schema(old)},
                        "subresources": {sub: {} for sub in res.subresources},
                    }
                    for old in conversion.old_versions()
                    if old.plural == res.plural
                ),
            ],
        },
        "status": {
            "acceptedNames": {"plural": res.plural, "kind": res.kind},
            "storedVersions": [res.version],
            "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
        },
    }


class Simulator:
    """Everything but HTTP. All mutation happens under store.lock; settle() runs controllers to a fixpoint."""

    def __init__(
        self,
        *,
        clock: str = "manual",
        speed: float = 1.0,
        start: datetime | None = None,
        nodes: list[dict] | None = None,
        kueue_config: dict | None = None,
        state_file: str | None = None,
        history: int = 5000,
        default_run_seconds: float = 60.0,
        bookmark_interval: float = 5.0,
        kueue: KueueModule | str | None = "auto",
        async_settle: bool = False,
        rbac: bool = False,
    ) -> None:
        self.clock = Clock(clock, speed, start)
        self.store = ObjectStore(self.clock, history)
        self.faults = Faults()
        self.rbac = Rbac(enabled=rbac, admin_token=TOKEN)
        self.nodes = nodes if nodes is not None else demo_cluster()
        self.default_run_seconds = default_run_seconds
        self.bookmark_interval = bookmark_interval
        self.state_file = state_file
        self.async_settle = async_settle
        self._dirty = threading.Event()
        module = load_kueue() if kueue == "auto" else kueue
        if isinstance(module, str):
            raise ValueError(f'kueue must be "auto", None or the Kueue half, not {module!r}')
        self._kueue_module = module
        if module is not None:
            cfg_cls = module.KueueConfig
            self.kueue_config = cfg_cls.from_dict(kueue_config) if kueue_config else cfg_cls.default()
        self.webhooks: list[Webhook] = []
        self.controllers: list[Controller] = []
        self.kueue: KueueHalf | None = None  # this simulator's Kueue half (None: plain Kubernetes)
        self._install_controllers()
        self.server_activity = ServerActivity()  # what pods serving HTTP saw (kubesim.apiserver.nodes.servers)
        self.stats: dict[str, list] = {}  # controller name -> [calls, writing calls, seconds, max seconds]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._saved_rv: tuple = ()  # (resourceVersion, manual time) of the last save
        if state_file and Path(state_file).exists():
            self._load(state_file)
        else:
            self.bootstrap()
        self.settle()

    # ---- lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Background threads: the real-clock ticker and the debounced state saver."""
        if not self.clock.manual:
            self._spawn(self._tick_loop, "kubesim-ticker")
        if self.async_settle:
            self._spawn(self._settle_loop, "kubesim-settler")
        if self.state_file:
            self._spawn(self._save_loop, "kubesim-saver")

    def _install_controllers(self) -> None:
        """The Kueue half (new, with empty memory), its webhooks, and every controller, in reconcile order."""
        self.webhooks, self.controllers, self.kueue = [], [], None
        if self._kueue_module is not None:
            self.kueue = self._kueue_module.Kueue(self.kueue_config)
            self.controllers += self.kueue.controllers()
            self.webhooks += self.kueue.admission_webhooks()
        self.controllers += [*operators.controllers(self._admit_pod), JobController(), KaiScheduler(),
                             Kubelet(self.default_run_seconds), EndpointsController(), DeploymentController(),
                             ClusterRoleAggregationController(), NamespaceController(), GarbageCollector()]

    def _admit_pod(self, pod: dict) -> dict:
        """What the API server does to a pod a controller creates through it: defaults, then the mutating admission
        webhooks (Kueue's pod webhook gates a LeaderWorkerSet's pods)."""
        builtin.apply_defaults("pods", pod, None)
        for hook in self.webhooks:
            pod = hook.mutate("pods", "CREATE", pod, None, self.store) or pod
        return pod

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        if self.state_file:
            self.save()

    def bootstrap(self) -> None:
        with self.store.lock:
            for name in SYSTEM_NAMESPACES:
                ns: dict = {"metadata": {"name": name}}
                builtin.apply_defaults("namespaces", ns, None)
                self.store.create("namespaces", ns)
            for resource, obj in bootstrap_policy.installation():
                self.store.create(resource, obj)
            for spec in self.nodes:
                self.store.create("nodes", node_object(spec))
            for res in OPERATORS + KAI:
                self.store.create("customresourcedefinitions", _crd_object(res))
            for resource, obj in operators.installation():
                if resource == "namespaces":
                    builtin.apply_defaults("namespaces", obj, None)
                self.store.create(resource, obj)
            if self.kueue is not None:
                for res in KUEUE:
                    self.store.create("customresourcedefinitions", _crd_object(res))
                # A stand-in Kueue half (tests) may have no installation to show.
                for resource, obj in getattr(self.kueue, "installation", list)():
                    if resource == "namespaces":
                        builtin.apply_defaults("namespaces", obj, None)
                    self.store.create(resource, obj)

    def reset(self) -> None:
        """Back to an empty cluster with the initial nodes; the clock keeps going."""
        with self.store.lock:
            self.store.wipe()
            self.rbac.reset()
            self.bootstrap()
            self.settle()

    def snapshot(self) -> dict:
        """The cluster as it is now, for restore(): tests build a cluster once and go back to it before each test."""
        return clone(self.store.snapshot())

    def restore(self, snapshot: dict) -> None:
        """Back to a snapshot() of this simulator, as after a restart from it with --state: its objects exactly,
        tokens forgotten, the controllers and the Kueue half starting with empty memory. The clock keeps going and
        resourceVersions keep counting up, so open watches end with 410 Gone and their clients list again."""
        with self.store.lock:
            self.store.wipe()
            self.rbac.reset()
            self.store.restore(clone(snapshot))  # a copy: the snapshot serves again whatever happens to the objects
            self._install_controllers()
            self.settle()
            self.store.changed.notify_all()

    def end_watches(self) -> None:
        """Close every open watch stream within a poll (a quarter second), as an API server restart would: tests
        stop their watchers without waiting for a watch timeout."""
        self.faults.watch_epoch += 1

    # ---- controllers ---------------------------------------------------------------------------------------
    def settle(self) -> None:
        with self.store.lock:
            for _ in range(MAX_SETTLE_ROUNDS):
                wrote = False
                for c in self.controllers:
                    started = time.perf_counter()
                    did = bool(c.reconcile(self.store))
                    self._account(c, time.perf_counter() - started, did)
                    wrote = did or wrote
                if not wrote:
                    return
            raise SettleError(f"controllers did not settle within {MAX_SETTLE_ROUNDS} rounds")

    def _settle_in_turns(self) -> None:
        """The background settle's pass: the same fixpoint as settle(), but once the pass has held the store lock
        SETTLE_TURN seconds, the threads waiting for it by then are let in between two controllers' reconciles
        (StoreLock.yield_to_waiters: each of them takes the lock before the pass takes it back). At 10,000 objects a
        pass takes long enough that API requests waiting for the lock piled up behind all of it (creates answered
        seconds late, watches silent until the pass ended); now they are served between controllers, as a real API
        server serves while its controllers work. Every reconcile still reads and writes the store under the lock,
        and a write that lands mid-pass is read by each controller's next reconcile (their change feeds), so the
        fixpoint is the same."""
        lock = self.store.lock
        with lock:
            turn = time.perf_counter()
            for _ in range(MAX_SETTLE_ROUNDS):
                wrote = False
                controllers = self.controllers
                for c in controllers:
                    if time.perf_counter() - turn >= SETTLE_TURN and lock.yield_to_waiters(SETTLE_YIELD_MAX):
                        turn = time.perf_counter()
                        if self.controllers is not controllers:  # restore(): the old controllers must not run again
                            wrote = True
                            break
                    started = time.perf_counter()
                    did = bool(c.reconcile(self.store))
                    self._account(c, time.perf_counter() - started, did)
                    wrote = did or wrote
                if not wrote:
                    return
            raise SettleError(f"controllers did not settle within {MAX_SETTLE_ROUNDS} rounds")

    def _account(self, controller: Controller, seconds: float, wrote: bool) -> None:
        entry = self.stats.setdefault(getattr(controller, "name", type(controller).__name__), [0, 0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += int(wrote)
        entry[2] += seconds
        entry[3] = max(entry[3], seconds)

    def stats_report(self) -> dict:
        """Per controller: reconcile calls, calls that wrote, total and longest reconcile time (seconds)."""
        with self.store.lock:
            return {
                name: {"calls": c, "writes": w, "seconds": round(t, 6), "max_seconds": round(m, 6)}
                for name, (c, w, t, m) in self.stats.items()
            }

    def next_deadline(self) -> datetime | None:
        with self.store.lock:
            deadlines = [d for c in self.controllers if (d := c.next_deadline(self.store)) is not None]
            return min(deadlines) if deadlines else None

    def advance(self, seconds: float) -> datetime:
        """Manual clock: step to every controller deadline inside the window in order, settling at each."""
        if not self.clock.manual:
            raise ValueError("clock/advance needs --clock manual")
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        with self.store.lock:
            self.settle()
            target = self.clock.now() + timedelta(seconds=seconds)
            for _ in range(MAX_ADVANCE_STEPS):
                deadline = self.next_deadline()
                if deadline is None or deadline > target:
                    break
                if deadline <= self.clock.now():
                    # A due deadline that settling does not clear: step a microsecond past it.
                    deadline = self.clock.now() + timedelta(microseconds=1)
                    if deadline > target:
                        break
                self.clock.set(deadline)
                self.settle()
            self.clock.set(target)
            self.settle()
            return self.clock.now()

    def after_write(self) -> None:
        """Called after every API write: settle now (default: a client reads its write's effects at once), or
        with async_settle let a background thread settle, coalescing bursts of writes as real controllers do."""
        if self.async_settle:
            self._dirty.set()
        else:
            self.settle()

    def _settle_loop(self) -> None:
        window = ASYNC_SETTLE_MIN
        thawed = time.monotonic()
        while not self._stop.is_set():
            if self._dirty.wait(0.5):
                self._stop.wait(window)  # let the writes that come meanwhile land: one pass handles them all
                self._dirty.clear()
                started = time.perf_counter()
                self._settle_in_turns()
                window = settle_window(time.perf_counter() - started)
                thawed = freeze_heap(thawed)

    def _tick_loop(self) -> None:
        while not self._stop.is_set():
            deadline = self.next_deadline()
            wait = 1.0 if deadline is None else min(1.0, self.clock.real_seconds_until(deadline))
            if self._stop.wait(wait):
                return
            if deadline is not None and deadline <= self.clock.now():
                if self.async_settle:
                    self._dirty.set()  # the background settle's thread runs the pass (one pass at a time)
                else:
                    self.settle()

    # ---- persistence ---------------------------------------------------------------------------------------
    def save(self) -> None:
        """Atomic write of objects, resourceVersion counter and clock."""
        if not self.state_file:
            return
        with self.store.lock:
            data = {
                "clock": rfc3339(self.clock.now()),
                "clockExact": self.clock.now().isoformat(),
                "store": self.store.snapshot(),
            }
            rv = (self.store.resource_version, self.clock.now() if self.clock.manual else None)
        path = Path(self.state_file)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
        self._saved_rv = rv

    def _save_loop(self) -> None:
        pause = 0.5
        while not self._stop.wait(pause):
            if (self.store.resource_version, self.clock.now() if self.clock.manual else None) != self._saved_rv:
                started = time.perf_counter()
                self.save()
                pause = max(0.5, 4 * (time.perf_counter() - started))  # big clusters: save less often

    def _load(self, path: str) -> None:
        data = json.loads(Path(path).read_text())
        saved = datetime.fromisoformat(data["clockExact"]) if "clockExact" in data else parse_rfc3339(data["clock"])
        if self.clock.manual or saved > self.clock.now():
            self.clock.set(saved)
        self.store.restore(data["store"])
        self._saved_rv = (self.store.resource_version, self.clock.now() if self.clock.manual else None)
