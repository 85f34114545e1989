"""What kubesim's two halves share, and nothing else: it imports neither half nor the composition root.

- `protocols.py`: `Controller`, `Webhook`, `KueueHalf`: the interfaces of kubesim/CONTRACT.md.
- `store.py`: `Store`, the object store as controllers see it (the API server half implements it), and
  `ChangeFeed`, `WatchEvent`, `clone`, `controller_reference`.
- `clock.py`: emulated time (`Clock`) and RFC 3339 timestamps.
- `quantity.py`: the one strict resource.Quantity parser, and Kueue's integer view of quantities.
- `metadata.py`: apimachinery's name, label and annotation rules, and `Cause` (a StatusCause).
- `trainer.py`: Kubeflow Trainer's runtime library: the JobSet a TrainJob runs as (the Trainer's controller builds
  it, Kueue's TrainJob integration reads its pod sets).
"""
