"""kubesim: a Kubernetes + Kueue emulator the official Python client talks to over HTTP (never production)."""
