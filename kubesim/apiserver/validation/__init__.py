"""What admission checks a write against, in kube-apiserver's order: defaulting and pruning, the structural
schema and its CEL rules (`schema.py`, `cel.py`), then kube's hand-written validation of core and batch kinds
(`core.py`) and the registry strategies' defaults and cross-field rules (`builtin.py`); the workload operators'
webhooks (`jobset_webhook.py`, `trainjob_webhook.py`, `pytorchjob_webhook.py`; kubesim.apiserver.operators).
Kueue's webhooks run after these (kubesim.apiserver.http.admission)."""
