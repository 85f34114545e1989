"""The `gpu` commands. Each one is one or a few REST calls; what the portal refuses is printed as its own message in
one line on stderr, with an exit code from `client` (0 ok, 3 not signed in, 4 forbidden, 5 not found, 6 refused,
7 portal unreachable or failing, 2 bad command line, 1 anything else)."""

from __future__ import annotations

import functools
import getpass
import re
import sys
import time
import uuid
from collections.abc import Callable
from datetime import date, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import click
import yaml
from click.shell_completion import get_completion_class

from . import config
from .client import NOT_FOUND, NOT_SIGNED_IN, USAGE, Api, CliError
from .output import FORMATS, emit, render

# `gpu submit` flags -> submission fields (the API's names, as `-f job.yaml` writes them)
SUBMIT_FLAGS = {
    "project": "project", "kind": "kind", "name": "name", "image": "image", "pool": "node_pool", "gpus": "gpus",
    "gpu_fraction": "gpu_fraction", "cpu": "cpu", "memory": "memory", "pods": "pods", "completions": "completions",
    "parallelism": "parallelism",
    "priority_class": "priority_class", "preemptible": "preemptible", "max_runtime": "max_runtime_seconds",
    "idle_timeout": "idle_timeout_minutes", "port": "port", "framework": "framework", "ray_version": "ray_version",
    "ray_entrypoint": "ray_entrypoint", "ray_working_dir": "ray_working_dir",
}


def _fail(message: str, code: int) -> None:
    click.echo(f"gpu: {message}", err=True)
    sys.exit(code)


def command(function: Callable[..., Any]) -> Callable[..., Any]:
    """A command with `-o/--output` that reports a CliError in one line and exits with its code."""

    @click.option("-o", "--output", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                  help="wide: a table with more columns; json and yaml print the API's data as it is.")
    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except CliError as error:
            _fail(str(error), error.code)

    return run


def api(url: str | None = None, token: str | None = None) -> Api:
    """The portal, as `gpu login` stored it (or at `url` with `token`); its connections close with the command."""
    if url is None:
        credentials = config.load()
        if credentials is None:
            raise CliError("not signed in: run `gpu login --url https://<portal>`", NOT_SIGNED_IN)
        url, token = credentials.url, credentials.token
    portal = Api(url, token)
    click.get_current_context().call_on_close(portal.session.close)
    return portal


def _version() -> str:
    try:
        return metadata.version("gpu-portal")
    except metadata.PackageNotFoundError:  # a checkout run as `python -m portal_cli` without installing it
        return "unknown"


def watch_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--watch` and `--interval` for a command that can print itself again whenever what it shows changes."""
    function = click.option("--interval", type=click.FloatRange(min=0.5), default=2.0, show_default=True,
                            help="With --watch: seconds between two reads.")(function)
    return click.option("-w", "--watch", is_flag=True, help="Keep reading and print again whenever it changes; "
                                                            "Ctrl-C stops (exit code 0).")(function)


def show(produce: Callable[[], str], *, watch: bool, interval: float) -> None:
    """Print what `produce` returns; watching, read it again every `interval` seconds and print it again when it
    changed (on a terminal in place of the last one), until Ctrl-C, which ends the command normally."""
    if not watch:
        click.echo(produce(), nl=False)
        return
    last = None
    try:
        while True:
            text = produce()
            if text != last:
                if last is not None:
                    if sys.stdout.isatty():
                        click.clear()
                    else:
                        click.echo()
                click.echo(text, nl=False)
                last = text
            time.sleep(interval)
    except KeyboardInterrupt:
        return


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", prog_name="gpu", message="%(prog)s %(version)s")
def cli() -> None:
    """Submit and follow work on the GPU Portal from a terminal (its REST API: /api/v1/)."""


# --- login ---------------------------------------------------------------------------------------------------------


@cli.command()
@click.option("--url", required=True, envvar="GPU_PORTAL_URL", help="The portal, e.g. https://gpu.example.org.")
@click.option("--token", help="A token made on My tokens (/accounts/tokens/); else your username and password "
                              "make a new one.")
@click.option("--username", help="Sign in with this username (asked when no --token is given).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input (for scripts).")
@command
def login(url: str, token: str | None, username: str | None, password_stdin: bool, fmt: str) -> None:
    """Store a token for the portal (0600, in $XDG_CONFIG_HOME/gpu-portal/)."""
    url = url.rstrip("/")
    if token is None:
        username = username or click.prompt("Username")
        password = sys.stdin.readline().rstrip("\n") if password_stdin else getpass.getpass("Password: ")
        token = api(url).post("auth/token/", {"username": username, "password": password})["token"]
    me = api(url, token).get("me/")  # the token works before it is stored
    path = config.save(config.Credentials(url=url, token=token))
    emit({"username": me["username"], "url": url, "config": str(path)}, fmt)


@cli.command()
@command
def logout(fmt: str) -> None:
    """Forget the stored token (the config file goes). The token itself stays valid until it expires or is revoked
    on My tokens; GPU_PORTAL_URL and GPU_PORTAL_TOKEN in the environment still sign commands in."""
    stored = config.load_stored()
    removed = config.remove()
    answer = {"signed_out": removed is not None, "url": stored.url if stored else None,
              "config": str(removed or config.config_path())}
    if fmt in ("json", "yaml"):
        emit(answer, fmt)
        return
    if removed is None:
        click.echo(f"no token was stored ({config.config_path()})")
    else:
        click.echo(f"signed out of {stored.url if stored else 'the portal'}: removed {removed}")
    if config.from_environment():
        click.echo("note: GPU_PORTAL_URL / GPU_PORTAL_TOKEN are set in the environment and still sign commands in",
                   err=True)


def _scope(binding: dict[str, Any], slugs: dict[tuple[str, int], str]) -> str:
    """ "everything", "department research", "project vision" (the id where the slug is not known)."""
    scope = str(binding.get("scope") or "everything")
    target = binding.get(scope) if scope in ("department", "project") else None
    return scope if target is None else f"{scope} {slugs.get((scope, target), target)}"


@cli.command()
@command
def whoami(fmt: str) -> None:
    """Who the stored token (or GPU_PORTAL_TOKEN) signs in as, on which portal, with which roles."""
    credentials = config.load()
    portal = api()
    me = portal.get("me/")
    if fmt not in ("table", "wide"):
        emit(me, fmt)
        return
    slugs = {(kind, row["id"]): row["slug"] for kind, path in (("department", "departments/"),
                                                                ("project", "projects/"))
             for row in portal.pages(path)}
    name = " ".join(part for part in (me.get("first_name"), me.get("last_name")) if part)
    emit({"username": me["username"], "name": name or None, "email": me.get("email") or None,
          "portal": credentials.url if credentials else None,
          "roles": ", ".join(f"{b['role']} on {_scope(b, slugs)}" for b in me.get("role_bindings", [])) or None},
         fmt)


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell's completion script for gpu (click's shell completion). Load it at start:

    \b
    bash: eval "$(gpu completion bash)"      (in ~/.bashrc)
    zsh:  eval "$(gpu completion zsh)"       (in ~/.zshrc)
    fish: gpu completion fish > ~/.config/fish/completions/gpu.fish
    """
    completer = get_completion_class(shell)
    assert completer is not None  # click ships bash, zsh and fish
    click.echo(completer(cli, {}, "gpu", "_GPU_COMPLETE").source())


# --- submit --------------------------------------------------------------------------------------------------------


def _template(portal: Api, name: str) -> dict[str, Any]:
    for template in portal.pages("templates/"):
        if template["name"] == name:
            return dict(template["submission"])
    raise CliError(f'no template is called "{name}" (gpu templates lists them)', NOT_FOUND)


def _env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise CliError(f"--env takes NAME=VALUE, not {pair!r}", USAGE)
        env[name] = value
    return env


def _read(path: str) -> str:
    """The text of a file, or of standard input for `-`."""
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise CliError(f"cannot read {path}: {error}", USAGE) from None


def _first_document(text: str, path: str) -> yaml.Node | None:
    """The first YAML document's node tree (JSON is YAML), read without building it: an alias stays one node, so a
    hostile text costs nothing here and is the portal's to refuse."""
    try:
        return next(iter(yaml.compose_all(text, Loader=yaml.SafeLoader)), None)
    except yaml.YAMLError as error:
        raise CliError(f"cannot read {path}: {error}", USAGE) from None


def _mapping_value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((value for name, value in node.value if isinstance(name, yaml.ScalarNode) and name.value == key), None)


def _scalar(node: yaml.Node | None) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def is_manifest(document: yaml.Node | None) -> bool:
    """A Kubernetes object rather than a job file: it has an apiVersion, or a kind spelt as Kubernetes spells kinds
    (Job, RayJob), where a job file's kind is one of the portal's (training, notebook, batch)."""
    if _mapping_value(document, "apiVersion") is not None:
        return True
    kind = _scalar(_mapping_value(document, "kind"))
    return kind is not None and kind[:1].isupper()


def _job_file(path: str, text: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CliError(f"cannot read {path}: {error}", USAGE) from None
    if not isinstance(loaded, dict):
        raise CliError(f"{path}: write a YAML mapping of submission fields (see the README's CLI section), or a "
                       "Kubernetes manifest (apiVersion, kind, metadata, spec)", USAGE)
    return loaded


def submission_options(*, again: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The flags `gpu submit` and `gpu resubmit` share: what runs, where, how big and how it may be preempted, the
    environment, the Idempotency-Key and the command after `--`. `again`: resubmit's wording, where each flag changes
    the earlier submission."""
    options = [
        click.option("-n", "--name", help="A new name." if again else
                     "A DNS label you will recognise (not unique: workloads are known by id)."),
        click.option("-i", "--image", help="Another container image." if again else "Container image."),
        click.option("--pool", help="Another node pool (slug)." if again else "Node pool slug, e.g. h100."),
        click.option("-g", "--gpus", type=int, help="GPU units per pod (0 with --gpu-fraction)."),
        click.option("--gpu-fraction", help="A share of one GPU for one pod, e.g. 0.5: KAI pools with GPU "
                                            "fractions only (then GPUs per pod is 0)."),
        click.option("--cpu", help='CPU cores per pod, e.g. 4 or "500m".'),
        click.option("--memory", help='Memory per pod, e.g. "16Gi".' if again else
                     'Memory per pod, e.g. "16Gi" (a plain number is GiB).'),
        click.option("--pods", type=int, help="Training: pods started together as one gang."),
        click.option("--completions", type=int, help="Batch: pods that must succeed."),
        click.option("--parallelism", type=int, help="Batch: pods running at once."),
        click.option("--priority-class", help="Priority class name."),
        click.option("--preemptible/--non-preemptible", default=None,
                     help="Default: as it was." if again else "Default: that of the priority class."),
        click.option("--max-runtime", type=int, help="Seconds before it is stopped."),
        click.option("-e", "--env", "env_pairs", multiple=True,
                     help="NAME=VALUE: the environment it gets instead (repeatable)." if again else
                     "NAME=VALUE (repeatable)."),
        click.option("--idempotency-key", help="Default: a new UUID, so the CLI's own retry never submits twice."),
        click.argument("command_line", nargs=-1),
    ]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):  # the first listed is the first in --help, as if written above the function
            function = option(function)
        return function

    return decorate


# Flags a manifest takes (where and how it runs); the others describe the pods, which the manifest's spec does.
MANIFEST_FLAGS = {"project": "project", "pool": "node_pool", "priority_class": "priority_class",
                  "preemptible": "preemptible", "max_runtime": "max_runtime_seconds"}


def _option_name(flag: str) -> str:
    return "--" + flag.replace("_", "-")


def _project_of_namespace(portal: Api, document: yaml.Node | None) -> str | None:
    """The project whose namespace the manifest names (metadata.namespace), when it is one you may see."""
    namespace = _scalar(_mapping_value(_mapping_value(document, "metadata"), "namespace"))
    if not namespace:
        return None
    return next((row["slug"] for row in portal.pages("projects/") if row.get("namespace") == namespace), None)


def _manifest_body(portal: Api, path: str, text: str, document: yaml.Node | None, flags: dict[str, Any],
                   refused: dict[str, Any]) -> dict[str, Any]:
    """The submission of a Kubernetes manifest: its text as written (the portal reads and checks it), where and how
    it runs from the flags. A flag that describes the pods is refused: the manifest's spec says that."""
    given = [name for name, value in refused.items() if value not in (None, (), False)]
    given += [flag for flag, value in flags.items() if flag not in MANIFEST_FLAGS and value is not None]
    if given:
        names = ", ".join(sorted(_option_name(name) if name != "command_line" else "the command after --"
                                 for name in given))
        raise CliError(f"{path} is a Kubernetes manifest: {names} do not apply (its spec says what runs; set it "
                       "there)", USAGE)
    body: dict[str, Any] = {"kind": "manifest", "manifest": text}
    body.update({MANIFEST_FLAGS[flag]: value for flag, value in flags.items() if value is not None})
    if "project" not in body and (project := _project_of_namespace(portal, document)):
        body["project"] = project
    return body


@cli.command(context_settings={"ignore_unknown_options": False})
@click.option("-f", "--file", "job_file", help="A job file (YAML, the submission's fields) or a Kubernetes manifest "
                                               "(a Job, JobSet, RayJob ... of any kind the portal submits); - for "
                                               "stdin.")
@click.option("-t", "--template", help="Start from the workload template of this name.")
@click.option("-p", "--project", help="Project slug or id.")
@click.option("-k", "--kind", type=click.Choice(["training", "notebook", "batch"]), help="Default: training.")
@submission_options(again=False)
@click.option("--framework", type=click.Choice(["none", "pytorch", "ray"]),
              help="Training: none (default: an Indexed Job), pytorch (a Trainer TrainJob, or a JobSet) or ray (a "
                   "RayJob).")
@click.option("--ray-version", help="Ray: the Ray version in the image.")
@click.option("--ray-entrypoint", help="Ray: the job's command, e.g. 'python train.py'.")
@click.option("--ray-working-dir", help="Ray: the runtime environment's working_dir.")
@click.option("--idle-timeout", type=int, help="Notebook: minutes idle before it is stopped.")
@click.option("--port", type=int, help="Notebook: the port Jupyter listens on.")
@click.option("--model", "model_label", help="Audit label: the model it trains or serves.")
@click.option("--data-class", help="Audit label: the class of data it reads.")
@command
def submit(job_file: str | None, template: str | None, env_pairs: tuple[str, ...], model_label: str | None,
           data_class: str | None, idempotency_key: str | None, command_line: tuple[str, ...], fmt: str,
           **flags: Any) -> None:
    """Submit a workload: a template, then the job file, then the flags (each overrides the one before); the
    words after `--` are the command, e.g. `gpu submit -p vision -n sweep -- python train.py --lr 3e-4`.

    A Kubernetes manifest given with -f (it has an apiVersion) is submitted as it is, with -p, --pool,
    --priority-class, --preemptible/--non-preemptible, --max-runtime, --model and --data-class saying where and how
    it runs; -p defaults to the project whose namespace its metadata names."""
    portal = api()
    text = _read(job_file) if job_file else ""
    document = _first_document(text, job_file) if job_file else None
    body: dict[str, Any]
    if job_file and is_manifest(document):
        body = _manifest_body(portal, job_file, text, document, flags,
                              {"template": template, "env": env_pairs, "command_line": command_line})
    else:
        from_file = _job_file(job_file, text) if job_file else {}
        template = template or from_file.pop("template", None)
        body = _template(portal, template) if template else {}
        body.update(from_file)
        body.update({SUBMIT_FLAGS[flag]: value for flag, value in flags.items() if value is not None})
        _one_gpu_request(body, flags)
        if env_pairs:
            earlier = body.get("env")
            body["env"] = {**(earlier if isinstance(earlier, dict) else {}), **_env(env_pairs)}
        if command_line:
            body["command"] = list(command_line)
        body.setdefault("kind", "training")
    labels = dict(body.get("labels") or {})
    labels.update({key: value for key, value in (("model", model_label), ("data_class", data_class)) if value})
    if labels:
        body["labels"] = labels
    created = portal.post("workloads/", body, headers={"Idempotency-Key": idempotency_key or str(uuid.uuid4())})
    emit(created, fmt, columns=_LIST_COLUMNS, wide=_WIDE_COLUMNS, rows=[created])


def _one_gpu_request(body: dict[str, Any], flags: dict[str, Any]) -> None:
    """A flag for one way of asking for GPUs replaces the other one from the file or template: --gpu-fraction alone
    asks for no whole GPUs, --gpus alone for no fraction."""
    if flags.get("gpu_fraction") is not None and flags.get("gpus") is None:
        body["gpus"] = 0
    elif flags.get("gpus") is not None and flags.get("gpu_fraction") is None and "gpu_fraction" in body:
        body["gpu_fraction"] = None


# `gpu resubmit` flags -> the fields of the submission to change
RESUBMIT_FLAGS = {"name": "name", "image": "image", "pool": "node_pool", "gpus": "gpus",
                  "gpu_fraction": "gpu_fraction", "cpu": "cpu",
                  "memory": "memory", "pods": "pods", "completions": "completions", "parallelism": "parallelism",
                  "priority_class": "priority_class", "preemptible": "preemptible",
                  "max_runtime": "max_runtime_seconds"}


@cli.command()
@click.argument("workload_id")
@submission_options(again=True)
@command
def resubmit(workload_id: str, env_pairs: tuple[str, ...], idempotency_key: str | None,
             command_line: tuple[str, ...], fmt: str, **flags: Any) -> None:
    """Submit a workload again: the same request (its data sources and credentials too), changed by the flags given;
    the words after `--` replace its command. The new workload names the one it came from."""
    body: dict[str, Any] = {RESUBMIT_FLAGS[flag]: value for flag, value in flags.items() if value is not None}
    if env_pairs:
        body["env"] = _env(env_pairs)
    if command_line:
        body["command"] = list(command_line)
    created = api().post(f"workloads/{_id(workload_id)}/resubmit/", body,
                         headers={"Idempotency-Key": idempotency_key or str(uuid.uuid4())})
    emit(created, fmt, columns=_LIST_COLUMNS, wide=_WIDE_COLUMNS, rows=[created])


# --- inference services ------------------------------------------------------------------------------------------

_SERVICE_COLUMNS: list[tuple[str, Callable[[Any], Any]]] = [
    ("ID", lambda s: s["id"]), ("NAME", lambda s: s["name"]), ("PROJECT", lambda s: s["project"]),
    ("POOL", lambda s: s["node_pool"]), ("REPLICAS", lambda s: s["replicas"]),
    ("READY", lambda s: s.get("ready_replicas")), ("STATUS", lambda s: s["status"]),
]
_SERVICE_WIDE: list[tuple[str, Callable[[Any], Any]]] = [
    ("IMAGE", lambda s: s["image"]), ("PODS", lambda s: s.get("pods")), ("GPUS", lambda s: s["gpus"]),
    ("PORT", lambda s: s.get("serving_port")),
    ("MESSAGE", lambda s: s.get("status_message")),
]


def _image_name(image: str) -> str:
    """A service's default name: its image's repository, as a DNS label (vllm/vllm-openai:v0.6.3 -> vllm-openai)."""
    repository = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0].lower()
    return re.sub(r"[^a-z0-9-]+", "-", repository).strip("-")[:40].strip("-") or "service"


@cli.command()
@click.option("-p", "--project", required=True, help="Project slug.")
@click.option("--pool", required=True, help="A serving pool the project holds a reservation on (slug).")
@click.option("-i", "--image", required=True, help="The model server's image, e.g. vllm/vllm-openai:v0.6.3.")
@click.option("-n", "--name", help="A name you will recognise (services are known by id); default: the image's.")
@click.option("--port", type=int, help="The port the model server listens on (default 8000).")
@click.option("-g", "--gpus", type=int, default=1, show_default=True, help="GPU units per replica.")
@click.option("--replicas", type=int, help="Copies of the model server (default 1).")
@click.option("--pods", type=int, help="Pods per replica (default 1); more for a model too large for one node: each "
                                       "replica is then a LeaderWorkerSet group.")
@click.option("--arg", "args", multiple=True, help="An argument after the command (repeatable), e.g. --arg=--model.")
@click.option("--model", "model_label", required=True, help="Audit label: the model it serves.")
@click.option("--data-class", required=True, help="Audit label: the class of data it reads.")
@click.argument("command_line", nargs=-1)
@command
def serve(project: str, pool: str, image: str, name: str | None, port: int | None, gpus: int,
          replicas: int | None, pods: int | None, args: tuple[str, ...], model_label: str, data_class: str,
          command_line: tuple[str, ...], fmt: str) -> None:
    """Start an inference service on a serving pool, never queued, within the project's serving reservation; the
    words after `--` are its command, e.g. `gpu serve -p vision --pool serve-l4 -i vllm/vllm-openai:v0.6.3 -n llama
    --model llama-3-8b --data-class public -- vllm serve meta-llama/Llama-3.1-8B`."""
    body: dict[str, Any] = {"project": project, "node_pool": pool, "image": image, "gpus": gpus,
                            "name": name or _image_name(image), "model_label": model_label, "data_class": data_class}
    body.update({key: value for key, value in (("serving_port", port), ("replicas", replicas), ("pods", pods))
                 if value is not None})
    if command_line:
        body["command"] = list(command_line)
    if args:
        body["args"] = list(args)
    # A new key per call: the client's own retry of a lost answer never starts a second service.
    created = api().post("inference-services/", body, headers={"Idempotency-Key": str(uuid.uuid4())})
    emit(created, fmt, columns=_SERVICE_COLUMNS, wide=_SERVICE_WIDE, rows=[created])


@cli.command()
@click.argument("service_id")
@click.option("--replicas", type=int, help="Scale to this many replicas (a scale-up must fit the reservation).")
@click.option("-i", "--image", help="Roll the replicas to this image, one at a time.")
@command
def scale(service_id: str, replicas: int | None, image: str | None, fmt: str) -> None:
    """Scale an inference service or roll it to a new image (or both at once)."""
    body = {key: value for key, value in (("replicas", replicas), ("image", image)) if value is not None}
    if not body:
        raise CliError("say what to change: --replicas N, --image IMAGE or both", USAGE)
    changed = api().patch(f"inference-services/{_id(service_id)}/", body)
    emit(changed, fmt, columns=_SERVICE_COLUMNS, wide=_SERVICE_WIDE, rows=[changed])


# --- list, status, queue -------------------------------------------------------------------------------------------


def _position(workload: dict[str, Any]) -> int | None:
    """The API's 0-based position in the LocalQueue (Kueue's own count), or None when Kueue reported none."""
    queue_position = workload.get("queue_position")
    if queue_position:
        return int(queue_position["local_queue"])
    return ((workload.get("waiting") or {}).get("numbers") or {}).get("position")


def _position_label(workload: dict[str, Any]) -> str | None:
    """The position as people count it, the same as the pages and e-mails: "#1" is next in line."""
    position = _position(workload)
    return None if position is None else f"#{position + 1}"


def _why(workload: dict[str, Any]) -> str:
    waiting = workload.get("waiting") or {}
    return waiting.get("headline") or workload.get("status_reason") or ""


def _gpus(workload: dict[str, Any]) -> Any:
    """The GPUs it holds: its whole units, or its share of one card (0.5)."""
    return workload["gpu_fraction"] if workload.get("gpu_fraction") is not None else workload["gpu_units"]


_LIST_COLUMNS: list[tuple[str, Callable[[Any], Any]]] = [
    ("ID", lambda w: w["id"]), ("NAME", lambda w: w["name"]), ("PROJECT", lambda w: w["project_slug"]),
    ("KIND", lambda w: w["kind"]), ("STATUS", lambda w: w["status"]), ("POOL", lambda w: w["node_pool"]),
    ("GPUS", _gpus), ("OWNER", lambda w: w.get("submitter_label") or w["owner"]),
    ("POSITION", _position_label),
    ("WHY", _why),
]
# -o wide adds these: what was asked, where it stands in Kueue, and when it is likely to start.
_WIDE_COLUMNS: list[tuple[str, Callable[[Any], Any]]] = [
    ("NAMESPACE", lambda w: w.get("namespace")), ("PRIORITY", lambda w: w.get("priority_class")),
    ("PREEMPTIBLE", lambda w: w.get("preemptible")), ("PODS", lambda w: w.get("pod_count")),
    ("CPU", lambda w: w.get("cpu")), ("MEMORY GIB", lambda w: w.get("memory_gib")),
    ("QUEUE", lambda w: w.get("queue_name")), ("REASON", lambda w: w.get("status_reason")),
    ("FORECAST", lambda w: (w.get("forecast") or {}).get("summary")),
    ("SUBMITTED", lambda w: w.get("submitted_at") or w.get("created_at")),
]


def _rows(rows: list[dict[str, Any]], fmt: str, title: str | None = None) -> str:
    return render(rows, fmt, columns=_LIST_COLUMNS, wide=_WIDE_COLUMNS, title=title)


def _project(portal: Api, reference: str) -> dict[str, Any]:
    """The project a command names (slug or id) among those the user may see: "not found" (exit 5) otherwise, as
    for any row one may not see. (The workloads list refuses such a filter as a bad parameter, a 400.)"""
    for row in portal.pages("projects/"):
        if reference in (row["slug"], str(row["id"])):
            return row
    raise CliError(f"No project {reference!r} that you may see.", NOT_FOUND)


@cli.command(name="list")
@click.option("--all", "everyone", is_flag=True, help="Everything you may see, not only your own.")
@click.option("--status", help="Comma-separated statuses; live = not finished.")
@click.option("-p", "--project", help="Only this project (slug or id).")
@click.option("--kind", help="training, notebook or batch (comma-separated).")
@watch_options
@command
def list_(everyone: bool, status: str | None, project: str | None, kind: str | None, watch: bool, interval: float,
          fmt: str) -> None:
    """Your workloads, newest first, with queue position and why each waits."""
    portal = api()
    if project is not None:
        project = _project(portal, project)["slug"]

    def produce() -> str:
        rows = list(portal.pages("workloads/", scope="all" if everyone else "mine", status=status, project=project,
                                 kind=kind))
        return _rows(rows, fmt)

    show(produce, watch=watch, interval=interval)


def _summary(workload: dict[str, Any]) -> dict[str, Any]:
    waiting = workload.get("waiting") or {}
    summary = {
        "id": workload["id"], "name": workload["name"], "project": workload["project_slug"],
        "kind": workload["kind"], "owner": workload.get("submitter_label") or workload["owner"],
        "status": workload["status"],
        "reason": workload.get("reason"), "message": workload.get("message"),
        "pool": workload["node_pool"], "gpu units": workload["gpu_units"],
        "priority class": workload["priority_class"] or "none", "preemptible": workload["preemptible"],
        "queue position": _position_label(workload), "why waiting": waiting.get("sentence"),
        "preemption": waiting.get("preemption"), "submitted": workload.get("submitted_at"),
        "started": workload.get("started_at"), "finished": workload.get("finished_at"),
    }
    forecast = workload.get("forecast")
    if forecast:  # the portal's own sentence ("likely in 25-40 min", or why it cannot say)
        summary["expected start"] = forecast.get("summary") or forecast.get("message")
    if workload.get("connect_url"):  # a running notebook, for those who may open it
        summary["connect"] = workload["connect_url"]
    return summary


def _cluster_events_text(events: list[dict]) -> str:
    """The Kubernetes events of the workload's objects, newest first, as kubectl describe lists them."""
    if not events:
        return ""
    lines = ["", "Events:"]
    rows = [("TYPE", "REASON", "LAST SEEN", "COUNT", "OBJECT", "MESSAGE")]
    for event in events:
        objects = event.get("objects") or [""]
        more = f" (+{len(objects) - 1})" if len(objects) > 1 else ""
        rows.append((event["type"], event["reason"], str(event["last_seen"]), str(event["count"]), objects[0] + more,
                     event["message"]))
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True))
                     + "  " + row[5])
    return "\n".join(lines) + "\n"


@cli.command()
@click.argument("workload_id")
@watch_options
@command
def status(workload_id: str, watch: bool, interval: float, fmt: str) -> None:
    """One workload: status, Kueue's reason, queue position, why it waits, the forecast where the API gives one, a
    running notebook's connect address, then the Kubernetes events of its objects."""
    portal, path = api(), f"workloads/{_id(workload_id)}/"

    def produce() -> str:
        workload = portal.get(path)
        if fmt in ("json", "yaml"):
            return render(workload, fmt)
        return render(_summary(workload), fmt) + _cluster_events_text(workload.get("cluster_events") or [])

    show(produce, watch=watch, interval=interval)


def _id(text: str) -> str:
    if not (text.isascii() and text.isdigit()):
        raise CliError(f"workloads are known by id (gpu list shows them), not {text!r}", USAGE)
    return text


@cli.command()
@click.argument("project")
@command
def queue(project: str, fmt: str) -> None:
    """A project's live work in queue order: the waiting by position, then the admitted and running."""
    portal = api()
    slug = _project(portal, project)["slug"]
    rows = list(portal.pages("workloads/", scope="all", project=slug, status="live"))
    rows.sort(key=lambda w: (_position(w) is None, _position(w) if _position(w) is not None else 0, w["id"]))
    emit(rows, fmt, columns=_LIST_COLUMNS, wide=_WIDE_COLUMNS, title=f"queue of {project}")


@cli.command()
@click.argument("workload_id")
@command
def why(workload_id: str, fmt: str) -> None:
    """Why a workload waits: the portal's reason code, its sentence and the numbers behind it (the same as the
    pages, the API's `waiting`), and its last preemption."""
    workload = api().get(f"workloads/{_id(workload_id)}/")
    waiting = workload.get("waiting")
    if fmt in ("json", "yaml"):
        emit({"id": workload["id"], "status": workload["status"], "waiting": waiting}, fmt)
        return
    if waiting is None:
        click.echo(f"{workload['name']} ({workload['id']}) is not waiting: it is {workload['status']}"
                   + (f" ({workload['status_reason']})" if workload.get("status_reason") else "") + ".")
        return
    emit({"id": workload["id"], "name": workload["name"], "status": workload["status"], "reason": waiting["reason"],
          "in short": waiting.get("headline"), "why": waiting.get("sentence"), "preemption": waiting.get("preemption"),
          "queue position": _position_label(workload), **{
              f"  {key}": value for key, value in sorted((waiting.get("numbers") or {}).items())}}, fmt)


@cli.command()
@click.argument("workload_id")
@command
def forecast(workload_id: str, fmt: str) -> None:
    """When a waiting workload is likely to start: the portal's replay of Kueue's decisions (earliest, likely,
    latest, and what the estimate rests on), or why it cannot say."""
    workload = api().get(f"workloads/{_id(workload_id)}/")
    found = workload.get("forecast")
    if fmt in ("json", "yaml"):
        emit({"id": workload["id"], "status": workload["status"], "forecast": found}, fmt)
        return
    if found is None:
        click.echo(f"{workload['name']} ({workload['id']}) is {workload['status']}: only waiting work has a "
                   "forecast.")
        return
    emit({"id": workload["id"], "name": workload["name"], "status": workload["status"],
          "expected start": found.get("summary"), "earliest": found.get("earliest"), "likely": found.get("likely"),
          "latest": found.get("latest"), "basis": found.get("basis"), "cannot estimate": found.get("message"),
          "computed": found.get("computed_at")}, fmt)


# --- logs, stop ----------------------------------------------------------------------------------------------------


@cli.command()
@click.argument("workload_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing lines as they come, until the workload ends.")
@click.option("--lines", type=int, help="The last N lines of each pod.")
@click.option("--timeout", type=int, help="Following: give up after this many seconds.")
@command
def logs(workload_id: str, follow: bool, lines: int | None, timeout: int | None, fmt: str) -> None:
    """The pods' logs (the last lines the portal read; -f follows them)."""
    portal, path = api(), f"workloads/{_id(workload_id)}/logs/"
    if follow:
        params = {"follow": "true", **({"timeout": timeout} if timeout else {})}
        for line in portal.lines(path, **params):
            click.echo(line)
        return
    answer = portal.get(path, lines=lines)
    if fmt in ("json", "yaml"):
        emit(answer, fmt)
        return
    if answer["pending"]:
        click.echo(f"(no lines yet: workload {answer['workload']} is {answer['status']}; try again shortly)", err=True)
    several = len(answer["pods"]) > 1
    for pod in answer["pods"]:
        for line in pod["lines"]:
            click.echo(f"{pod['pod']} | {line}" if several else line)
        if pod["error"]:
            click.echo(f"[{pod['pod']}: {pod['error']}]", err=True)
        if pod.get("exit_code"):
            reason = f" ({pod['exit_reason']})" if pod.get("exit_reason") else ""
            click.echo(f"[{pod['pod']}: exited with code {pod['exit_code']}{reason}]", err=True)


@cli.command()
@click.argument("workload_id")
@command
def stop(workload_id: str, fmt: str) -> None:
    """Stop a workload: its Job and pods are deleted and its GPUs go back to the queue."""
    workload = api().post(f"workloads/{_id(workload_id)}/stop/")
    emit(workload, fmt, columns=_LIST_COLUMNS, wide=_WIDE_COLUMNS, rows=[workload])


# --- usage, quota, templates ---------------------------------------------------------------------------------------


def _month(text: str | None) -> tuple[str, str]:
    today = datetime.now().astimezone().date()
    year, month = today.year, today.month
    if text:
        try:
            year, month = (int(part) for part in text.split("-"))
            date(year, month, 1)
        except ValueError:
            raise CliError(f"--month takes YYYY-MM, not {text!r}", USAGE) from None
    following = (year + month // 12, month % 12 + 1)
    return f"{year:04d}-{month:02d}-01", f"{following[0]:04d}-{following[1]:02d}-01"


@cli.command()
@click.option("--month", help="YYYY-MM; default: this month.")
@click.option("--by", "group_by", type=click.Choice(["project", "department", "user", "pool"]), default="project",
              show_default=True)
@click.option("--csv", "as_csv", is_flag=True, help="The showback CSV instead.")
@command
def usage(month: str | None, group_by: str, as_csv: bool, fmt: str) -> None:
    """GPU-hours of a month (physical card hours), within deserved quota and borrowed."""
    start, end = _month(month)
    portal = api()
    if as_csv:
        click.echo(portal.text("usage/csv/", group_by=group_by, start=start, end=end), nl=False)
        return
    report = portal.get("usage/", group_by=group_by, start=start, end=end)
    emit(report, fmt, rows=[*report["rows"], {**report["total"], "name": "total"}], title=f"GPU-hours {start} to {end}",
         columns=[("NAME", lambda r: r["name"]), ("GPU-HOURS", lambda r: r["gpu_hours"]),
                  ("WITHIN QUOTA", lambda r: r["gpu_hours_within_quota"]),
                  ("BORROWED", lambda r: r["gpu_hours_borrowed"]), ("DESERVED", lambda r: r["deserved_gpu_hours"]),
                  ("COST", lambda r: r["cost"])],
         wide=[("USED / DESERVED", lambda r: r["used_over_deserved"]),
               ("UTILISATION", lambda r: r["gpu_utilisation"]), ("IDLE GPU-HOURS", lambda r: r["idle_gpu_hours"])])


@cli.command()
@command
def quota(fmt: str) -> None:
    """Deserved quota, limit and use per pool for the departments and projects you may see."""
    answer = api().get("usage/quota/")
    rows = [{"pool": pool["pool"], "level": level, **figures}
            for pool in answer["pools"] for department in pool["departments"]
            for level, figures in [("department", department)] + [("project", p) for p in department["projects"]]]
    emit(answer, fmt, rows=rows, columns=[
        ("POOL", lambda r: r["pool"]), ("LEVEL", lambda r: r["level"]), ("NAME", lambda r: r["slug"]),
        ("DESERVED", lambda r: r["deserved"]), ("LIMIT", lambda r: r["limit"] if r["limit"] is not None else "none"),
        ("USED", lambda r: r["used"]), ("BORROWED", lambda r: r["borrowed"]), ("PENDING", lambda r: r["pending"])],
         wide=[("LENT", lambda r: r["lent"]), ("WEIGHTED SHARE", lambda r: r["weighted_share"])])


@cli.command()
@command
def templates(fmt: str) -> None:
    """The workload templates (`gpu submit -t NAME` starts from one)."""
    rows = list(api().pages("templates/"))
    emit(rows, fmt, columns=[("NAME", lambda t: t["name"]), ("KIND", lambda t: t["kind"]),
                             ("DESCRIPTION", lambda t: t["description"]), ("VALUES", lambda t: t["submission"])])


# --- the cluster as Kueue sees it, and what workloads attach -------------------------------------------------------


def _state(row: dict[str, Any]) -> str:
    return "active" if row["active"] else (row.get("active_reason") or "inactive")


@cli.command()
@click.option("--local", is_flag=True, help="The LocalQueues (per project namespace) instead of the ClusterQueues.")
@command
def queues(local: bool, fmt: str) -> None:
    """Kueue's queues of the projects you may see, with their counts (and, for ClusterQueues, quota in GPU units)."""
    if local:
        rows = list(api().pages("local-queues/"))
        emit(rows, fmt, columns=[
            ("NAMESPACE", lambda q: q["namespace"]), ("NAME", lambda q: q["name"]),
            ("PROJECT", lambda q: q["project_slug"]), ("CLUSTER QUEUE", lambda q: q["cluster_queue"]),
            ("PENDING", lambda q: q["pending_workloads"]), ("ADMITTED", lambda q: q["admitted_workloads"]),
            ("STATE", _state)], wide=[("RESERVING", lambda q: q["reserving_workloads"]),
                                      ("MESSAGE", lambda q: q["active_message"])])
        return
    rows = list(api().pages("cluster-queues/"))
    emit(rows, fmt, columns=[
        ("NAME", lambda q: q["name"]), ("POOL", lambda q: q["node_pool"]), ("PROJECT", lambda q: q["project_slug"]),
        ("KIND", lambda q: q["kind"]), ("NOMINAL", lambda q: q["nominal"]), ("USED", lambda q: q["used"]),
        ("PENDING", lambda q: q["pending_workloads"]), ("ADMITTED", lambda q: q["admitted_workloads"]),
        ("STATE", _state)], wide=[
        ("COHORT", lambda q: q["cohort"]), ("BORROWED (KUEUE)", lambda q: q["borrowed"]),
        ("LENDING", lambda q: q["lending"]), ("RESERVING", lambda q: q["reserving_workloads"]),
        ("WEIGHTED SHARE", lambda q: q["weighted_share"])])


@cli.command()
@command
def cohorts(fmt: str) -> None:
    """Each pool's cohort tree as far as you may see it, with its subtree's quota and use in GPU units."""
    rows = list(api().pages("cohorts/"))
    emit(rows, fmt, columns=[
        ("COHORT", lambda c: "  " * c["depth"] + c["name"]), ("POOL", lambda c: c["node_pool"]),
        ("LEVEL", lambda c: c["level"]), ("NOMINAL", lambda c: c["nominal"]), ("USED", lambda c: c["used"]),
        ("PENDING", lambda c: c["pending"]), ("ADMITTED", lambda c: c["admitted"])], wide=[
        ("PARENT", lambda c: c["parent"]), ("QUEUES", lambda c: c["queues"]),
        ("BORROWED (KUEUE)", lambda c: c["borrowed"]), ("WEIGHTED SHARE", lambda c: c["weighted_share"])])


@cli.command()
@command
def flavors(fmt: str) -> None:
    """The node pools as Kueue's ResourceFlavors: resource, cut, nodes and allocatable units."""
    rows = list(api().pages("flavors/"))
    emit(rows, fmt, columns=[
        ("POOL", lambda f: f["node_pool"]), ("RESOURCE", lambda f: f["gpu_resource"]), ("CUT", lambda f: f["cut"]),
        ("NODES", lambda f: f"{f['schedulable_nodes']}/{f['nodes']}"),
        ("ALLOCATABLE", lambda f: f"{f['schedulable_allocatable']}/{f['allocatable']}"),
        ("CAPACITY", lambda f: f["capacity"])], wide=[
        ("NODE LABELS", lambda f: f["node_labels"]), ("TAINTS", lambda f: f["node_taints"]),
        ("USED", lambda f: f["used"]), ("PENDING", lambda f: f["pending"]), ("ADMITTED", lambda f: f["admitted"])])


@cli.command()
@click.argument("pool", required=False)
@command
def nodes(pool: str | None, fmt: str) -> None:
    """The nodes of every pool (or of POOL): GPU product, cards, allocatable units and state."""
    rows = list(api().pages("nodes/", node_pool=pool))
    emit(rows, fmt, columns=[
        ("NAME", lambda n: n["name"]), ("POOL", lambda n: n["node_pool"]), ("GPU", lambda n: n["gpu_product"]),
        ("CARDS", lambda n: n["gpu_count"]), ("ALLOCATABLE", lambda n: n["allocatable_gpus"]),
        ("STATE", lambda n: n["state"])], wide=[
        ("MEMORY GIB", lambda n: n["gpu_memory_gib"]), ("MIG", lambda n: n["mig_slices"] or None),
        ("REPLICAS", lambda n: n["replicas_per_card"]), ("TAINTS", lambda n: n["taints"] or None)])


@cli.command()
@command
def credentials(fmt: str) -> None:
    """Your credentials: names and keys (never values), what `credentials` in a job file names."""
    rows = list(api().pages("credentials/"))
    emit(rows, fmt, columns=[("PROJECT", lambda c: c["project_slug"]), ("NAME", lambda c: c["name"]),
                             ("KEYS", lambda c: ", ".join(c["keys"]))],
         wide=[("SECRET", lambda c: c["secret_name"]), ("WRITTEN", lambda c: c["applied_at"]),
               ("ERROR", lambda c: c["apply_error"] or None)])


@cli.command(name="data-sources")
@command
def data_sources(fmt: str) -> None:
    """The data sources of the projects you submit to or manage: what `data_sources` in a job file names."""
    rows = list(api().pages("data-sources/"))
    emit(rows, fmt, columns=[("PROJECT", lambda d: d["project_slug"]), ("NAME", lambda d: d["name"]),
                             ("SOURCE", lambda d: d["source"]), ("MOUNT", lambda d: d["mount_path"]),
                             ("READ-ONLY", lambda d: d["read_only"])],
         wide=[("DESCRIPTION", lambda d: d["description"] or None)])


def main() -> None:
    """The console script (`gpu`); named so whatever runs it, so its shell completion answers to _GPU_COMPLETE."""
    cli(prog_name="gpu")
