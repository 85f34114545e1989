"""Command line: `python -m kubesim serve ...`, `python -m kubesim prometheus ...`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import yaml

from kubesim.apiserver.auth.kubeconfig import write_kubeconfig
from kubesim.apiserver.http.server import KubeHTTPServer
from kubesim.apiserver.nodes.cluster import kai_demo_pool, load_cluster
from kubesim.apiserver.registry import discovery
from kubesim.kueue.install import VERSION as KUEUE_VERSION
from kubesim.prometheus import exec_prometheus
from kubesim.sim import Simulator

DEFAULT_PORT = 8001  # plain HTTP: not 6443, which every kubeconfig tool assumes speaks TLS
CONTROL_HELP = """control endpoints (JSON, never authenticated; each returns after the controllers settled):
  GET    /kubesim/v1/healthz         ok, emulated time, clock, resourceVersion, Kueue half loaded
  GET    /kubesim/v1/clock           the emulated time
  POST   /kubesim/v1/settle          run the controllers to a fixpoint now
  POST   /kubesim/v1/clock/advance   {"seconds": N} (manual clock)
  POST   /kubesim/v1/faults          {"error_rate", "latency_ms", "verbs", "resources", "drop_watches", "seed"}
  DELETE /kubesim/v1/faults          clear fault injection
  POST   /kubesim/v1/reset           empty cluster with the initial nodes
  POST   /kubesim/v1/config          {"watch_history": N, "bookmark_interval": S}
  GET    /kubesim/v1/stats           controller timings and object counts
  GET    /kubesim/v1/rbac            RBAC denials and grants recorded (DELETE forgets them)
also served: /openapi/v2, /openapi/v3, /metrics (Kueue's metric names), /version, /healthz"""


def version_line() -> str:
    """What this kubesim emulates: the Kubernetes API version it reports and the Kueue release."""
    return f"kubesim {package_version()} (Kubernetes {discovery.VERSION['gitVersion']} API, Kueue {KUEUE_VERSION})"


def package_version() -> str:
    try:
        return metadata.version("gpu-portal")
    except metadata.PackageNotFoundError:
        return "unreleased"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubesim", description="Kubernetes + Kueue emulator for GPU Portal")
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="serve the Kubernetes API over plain HTTP",
        description="Serve the Kubernetes API (with Kueue) over plain HTTP; kubectl and the official clients work "
        "against it with the kubeconfig written by --kubeconfig.",
        epilog=CONTROL_HELP,
        formatter_class=_HelpFormatter,
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port to listen on (plain HTTP); 0 picks a free port"
    )
    serve.add_argument(
        "--kubeconfig", metavar="PATH", help="write a kubeconfig for this server to PATH (default: none written)"
    )
    serve.add_argument(
        "--advertise-url",
        help="server URL written to the kubeconfig (e.g. http://kubesim:8001 in "
        "docker compose); default: the listening address",
    )
    serve.add_argument(
        "--clock",
        choices=["real", "manual"],
        default="real",
        help="real: emulated time follows the wall clock (times --speed); manual: it moves only on clock/advance",
    )
    serve.add_argument("--speed", type=float, default=1.0, help="real clock speed factor")
    serve.add_argument(
        "--start",
        default=None,
        help="start time: an ISO 8601 timestamp or 'now' "
        "(default: now for the real clock, 2026-01-01T00:00:00Z for the manual one)",
    )
    serve.add_argument("--state", help="persist the cluster to FILE (loaded on start; default: in memory only)")
    serve.add_argument(
        "--cluster", help="YAML/JSON list of nodes (name, labels, allocatable, taints); default: the demo GPU cluster"
    )
    serve.add_argument("--with-kai-pool", action="store_true",
                       help="add the demo's KAI pool (four nodes of four RTX PRO 6000, GPU fractions on)")
    serve.add_argument("--config", help="Kueue Configuration subset (YAML); default: Kueue's defaults")
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
        help="authenticate bearer tokens and authorize requests with RBAC (the kubeconfig's token is the admin; "
        "default: off, everything allowed)",
    )
    serve.add_argument("--verbose", action="store_true", help="log every request")
    prom = sub.add_parser("prometheus", help="exec a Prometheus (on the PATH) scraping a kubesim's DCGM exporters")
    prom.add_argument("--kubesim-url", required=True, help="e.g. http://127.0.0.1:8001")
    prom.add_argument("--listen", default="127.0.0.1:8002", help="Prometheus' web listen address")
    prom.add_argument("--data-dir", required=True, help="configuration and TSDB live here")
    prom.add_argument("--scrape-interval", type=float, default=15.0, help="seconds")
    return parser


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every flag's help ends with its default (unless it already says it); the epilog is kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is argparse.SUPPRESS or "default:" in text or action.option_strings == ["-h", "--help"]:
            return text
        shown = "off" if action.default is False else action.default
        return f"{text} (default: {shown})"


def _serving_line(sim: Simulator, kubeconfig: str | None) -> str:
    half = f"with Kueue {KUEUE_VERSION}" if sim.kueue is not None else "without Kueue"
    where = f"kubeconfig: {Path(kubeconfig).resolve()}" if kubeconfig else "no kubeconfig written (--kubeconfig PATH)"
    return (
        f"kubesim serves the Kubernetes {discovery.VERSION['gitVersion']} API {half} over plain HTTP "
        f"({sim.clock.mode} clock); {where}; control endpoints under /kubesim/v1/"
    )


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
        nodes=load_cluster(args.cluster) + (kai_demo_pool() if args.with_kai_pool else []),
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
    print(_serving_line(sim, args.kubeconfig), flush=True)
    try:
        server.serve_forever()
    finally:
        sim.stop()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
