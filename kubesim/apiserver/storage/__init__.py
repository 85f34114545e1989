"""Objects at rest and the rules for reading and changing them.

- `store.py`: `ObjectStore`: objects, resourceVersions, the watch history, finalizers and cascading deletion,
  events (implements kubesim.kernel.store.Store, the interface controllers use).
- `selectors.py`: label and field selectors with kube-apiserver's syntax.
- `patch.py`: JSON merge, strategic merge and JSON patch.
- `fieldmanager.py`: server-side apply: managedFields and the apply merge.
"""
