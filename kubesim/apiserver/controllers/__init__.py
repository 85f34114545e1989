"""kube-controller-manager's controllers kubesim needs, one per module (each a kubesim.kernel.protocols.Controller):
the batch/v1 Job controller (`job_controller.py`), Endpoints (`endpoints.py`), Deployments and their
ReplicaSets (`deployment_controller.py`), ClusterRole aggregation (`clusterrole_aggregation.py`), namespace deletion
(`namespace.py`) and the garbage collector (`garbage_collector.py`); and the workload operators' controllers
installed beside them (kubesim.apiserver.operators): the JobSet operator (`jobset_controller.py`, its bookkeeping
in `jobset_status.py`), Kubeflow Trainer v2 (`trainjob_controller.py`) and the Kubeflow training-operator
(`pytorchjob_controller.py`). Kueue's controllers are the Kueue half's (kubesim.kueue)."""
