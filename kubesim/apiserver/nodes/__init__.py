"""The nodes and what runs on them.

- `cluster.py`: the node definitions: `--cluster` files and the demo cluster's three GPU pools.
- `kubelet.py`: the kubelet (and a trivial scheduler): binds, runs and finishes pods, writes their logs.
- `servers.py`: pods that serve HTTP (a Jupyter server), reached through the service proxy.
- `dcgm.py`: each node's emulated NVIDIA DCGM exporter.
"""
