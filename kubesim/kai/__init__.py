"""kubesim's KAI Scheduler half: the scheduler KAI Scheduler v0.20.1 runs for the nodes of its node pools
(kubesim/README.md, "KAI Scheduler"). Like the Kueue half it reaches the cluster only through the kernel's Store;
kubesim.sim installs it."""

from kubesim.kai.scheduler import KaiScheduler

__all__ = ["KaiScheduler"]
