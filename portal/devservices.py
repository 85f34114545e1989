"""Pick the database and broker for `make test`: the local PostgreSQL and Redis when they answer, else embedded.

Under CI=true the real services are required: the run fails instead of silently testing on SQLite.
Usage: python -m portal.devservices COMMAND [ARGS...]  (runs COMMAND with DATABASE_URL and REDIS_URL set)
"""

from __future__ import annotations

import os
import socket
import sys

LOCAL_POSTGRES = ("127.0.0.1", 5432, "postgres://postgres@127.0.0.1:5432/gpu_portal")
LOCAL_REDIS = ("127.0.0.1", 6379, "redis://127.0.0.1:6379/15")


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def resolve(environ: dict[str, str]) -> dict[str, str]:
    """The environment to test with; raises SystemExit when CI needs a service that is not there."""
    env = dict(environ)
    ci = env.get("CI", "").lower() in {"1", "true", "yes"}
    for variable, (host, port, url) in (("DATABASE_URL", LOCAL_POSTGRES), ("REDIS_URL", LOCAL_REDIS)):
        if env.get(variable):
            continue
        if _reachable(host, port):
            env[variable] = url
        elif ci:
            raise SystemExit(f"CI=true but nothing answers on {host}:{port}; {variable} cannot fall back in CI.")
        else:
            print(f"devservices: {host}:{port} not reachable, testing with the embedded default for {variable}",
                  file=sys.stderr)
    return env


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    env = resolve(dict(os.environ))
    database, broker = env.get("DATABASE_URL", "(sqlite)"), env.get("REDIS_URL", "(embedded)")
    print(f"devservices: DATABASE_URL={database} REDIS_URL={broker}", file=sys.stderr)
    os.execvpe(argv[0], argv, env)  # noqa: S606 - runs the command make asked for


if __name__ == "__main__":
    main(sys.argv[1:])
