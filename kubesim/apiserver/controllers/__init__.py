"""kube-controller-manager's controllers kubesim needs, one per module (each a kubesim.kernel.protocols.Controller):
the batch/v1 Job controller (`job_controller.py`), Endpoints (`endpoints.py`), namespace deletion (`namespace.py`)
and the garbage collector (`garbage_collector.py`). Kueue's controllers are the Kueue half's (kubesim.kueue)."""
