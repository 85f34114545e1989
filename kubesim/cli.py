"""Command line: `python -m kubesim serve ...`, `python -m kubesim prometheus ...`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import yaml

from kubesim.cluster import load_cluster
from kubesim.kubeconfig import write_kubeconfig
from kubesim.prometheus import exec_prometheus
from kubesim.server import KubeHTTPServer
from kubesim.sim import Simulator


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubesim", description="Kubernetes + Kueue emulator for GPU Portal")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the Kubernetes API over HTTP")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=6443, help="0 picks a free port")
    serve.add_argument("--kubeconfig", help="write a kubeconfig for this server to PATH")
    serve.add_argument(
        "--advertise-url",
        help="server URL written to the kubeconfig (e.g. http://kubesim:8001 in "
        "docker compose); default: the listening address",
    )
    serve.add_argument("--clock", choices=["real", "manual"], default="real")
    serve.add_argument("--speed", type=float, default=1.0, help="real clock speed factor")
    serve.add_argument(
        "--start",
        default=None,
        help="start time: an ISO 8601 timestamp or 'now' (manual default: 2026-01-01T00:00:00Z)",
    )
    serve.add_argument("--state", help="persist the cluster to FILE (loaded on start)")
    serve.add_argument("--cluster", help="YAML/JSON list of nodes (name, labels, allocatable)")
    serve.add_argument("--config", help="Kueue Configuration subset (YAML)")
    serve.add_argument(
        "--default-run-seconds", type=float, default=60.0, help="run time of a container whose command has no `sleep N`"
    )
    serve.add_argument("--watch-history", type=int, default=5000, help="watch events kept for resuming")
    serve.add_argument("--bookmark-interval", type=float, default=5.0, help="seconds between watch BOOKMARKs")
    serve.add_argument(
        "--async-settle",
        action="store_true",
        help="controllers run in the background after writes (as in a real cluster) instead of before the response",
    )
    serve.add_argument(
        "--rbac",
        action="store_true",
        help="authenticate bearer tokens and authorize requests with RBAC (the kubeconfig's token is the admin)",
    )
    serve.add_argument("--verbose", action="store_true", help="log every request")
    prom = sub.add_parser("prometheus", help="exec a Prometheus (on the PATH) scraping a kubesim's DCGM exporters")
    prom.add_argument("--kubesim-url", required=True, help="e.g. http://127.0.0.1:8001")
    prom.add_argument("--listen", default="127.0.0.1:8002", help="Prometheus' web listen address")
    prom.add_argument("--data-dir", required=True, help="configuration and TSDB live here")
    prom.add_argument("--scrape-interval", type=float, default=15.0, help="seconds")
    return parser


def _start_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    if value == "now":
        return datetime.now(UTC)
    start = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return start if start.tzinfo else start.replace(tzinfo=UTC)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "prometheus":
        exec_prometheus(args.kubesim_url, Path(args.data_dir), args.listen, args.scrape_interval)
    kueue_config = yaml.safe_load(Path(args.config).read_text()) if args.config else None
    sim = Simulator(
        clock=args.clock,
        speed=args.speed,
        start=_start_time(args.start),
        nodes=load_cluster(args.cluster),
        kueue_config=kueue_config,
        state_file=args.state,
        history=args.watch_history,
        default_run_seconds=args.default_run_seconds,
        bookmark_interval=args.bookmark_interval,
        async_settle=args.async_settle,
        rbac=args.rbac,
    )
    server = KubeHTTPServer((args.host, args.port), sim, verbose=args.verbose)
    url = server.url
    if args.kubeconfig:
        write_kubeconfig(args.kubeconfig, args.advertise_url or url)
    sim.start()
    stopping = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"kubesim listening on {url}", flush=True)
    try:
        server.serve_forever()
    finally:
        sim.stop()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
