"""Reaching a running notebook: its names, its token, and Connect.

Each notebook has a token derived from SECRET_KEY and its id (apps.core.sealed.derived_token): the worker writes it
into a Kubernetes Secret the notebook's container reads (JUPYTER_TOKEN, by reference), and the web process derives
the same token when its owner connects, so it is stored nowhere in the portal. Connect depends on
settings.NOTEBOOK_EXPOSE (README "Notebooks, data and credentials"):

- `proxy` (embedded mode, kubesim): the portal relays the owner's requests to the notebook through the API server's
  service proxy, adding the token (Jupyter's `token` parameter); the browser never sees the token. This is
  the one place the web process talks to the cluster (read-only, as `kubectl proxy` would); the relayed pages are
  sandboxed (CSP `sandbox`) so nothing the notebook serves runs with the portal's origin.
- `ingress` / `httproute`: the worker publishes `<job>.<NOTEBOOK_BASE_DOMAIN>`; Connect redirects the owner there
  with the token, which Jupyter exchanges for its own cookie.

The same relay carries an inference service's endpoint (docs/architecture.md, Inference services) to the members of
its project in proxy mode, through the Service the worker puts in front of its replicas; a model server takes no
token, so none is added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from django.conf import settings

from apps.core import kueue_names
from apps.core.sealed import derived_token

TOKEN_KEY = "token"  # noqa: S105 - the key inside the Secret, not a token
TOKEN_ENV = "JUPYTER_TOKEN"  # noqa: S105 - what the Jupyter docker-stacks images read their token from
PORT_NAME = "http"
SERVICE_PORT = 80
RELAYED_REQUEST_HEADERS = ("accept", "content-type", "x-requested-with")
RELAYED_RESPONSE_HEADERS = ("content-type", "last-modified", "etag")
PROXY_TIMEOUT = 15.0


def token(workload_id: int) -> str:
    return derived_token("notebook", str(workload_id))


def token_secret_name(workload_id: int) -> str:
    return f"{kueue_names.job_name(workload_id)}-token"


def host(workload_id: int) -> str:
    return f"{kueue_names.job_name(workload_id)}.{settings.NOTEBOOK_BASE_DOMAIN}"


def inference_host(workload_id: int) -> str:
    """Where an Ingress or HTTPRoute publishes an inference service (settings.INFERENCE_EXPOSE)."""
    return f"{kueue_names.job_name(workload_id)}.{settings.INFERENCE_BASE_DOMAIN}"


def external_url(workload_id: int) -> str:
    """Where an Ingress or HTTPRoute publishes the notebook, with the token Jupyter logs the owner in with."""
    return f"https://{host(workload_id)}/lab?token={token(workload_id)}"


class NotANotebookPath(ValueError):
    """A relayed path that would climb out of the notebook's proxy ('..') and reach other API paths."""


def service_proxy_path(namespace: str, workload_id: int, path: str) -> str:
    """The API server path of `path` inside the notebook; every segment is quoted and '.' / '..' are refused, so a
    relayed request can never name anything but the notebook's own pages."""
    segments = [segment for segment in path.split("/") if segment]
    if any(segment in (".", "..") for segment in segments):
        raise NotANotebookPath(path)
    quoted = "/".join(quote(segment, safe="") for segment in segments)
    return f"/api/v1/namespaces/{namespace}/services/{kueue_names.job_name(workload_id)}:{PORT_NAME}/proxy/{quoted}"


@dataclass(frozen=True)
class Relayed:
    status: int
    body: bytes
    headers: dict[str, str]


class NotebookUnreachable(Exception):
    """The API server (or the notebook behind it) did not answer."""


_client: Any = None


def _api_client() -> Any:
    """The kubeconfig named by settings.KUBECONFIG, else in-cluster credentials (imported late: web processes that
    never connect a notebook do not pay for the kubernetes client)."""
    global _client
    if _client is None:
        from kubernetes import client, config

        configuration = client.Configuration()
        if settings.KUBECONFIG:
            config.load_kube_config(config_file=str(settings.KUBECONFIG), client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
        _client = client.ApiClient(configuration=configuration)
    return _client


def forget_client() -> None:
    """Tests point the web process at another kubesim."""
    global _client
    _client = None


def relay(*, namespace: str, workload_id: int, method: str, path: str, query: list[tuple[str, str]],
          headers: dict[str, str], body: bytes, with_token: bool = True) -> Relayed:
    """One request of the owner's browser, sent to the notebook through the service proxy with its token (an
    inference service's endpoint: `with_token=False`, the query as it came)."""
    api = _api_client()
    configuration = api.configuration
    auth = configuration.get_api_key_with_prefix("authorization")
    sent = {name: value for name, value in headers.items() if name.lower() in RELAYED_REQUEST_HEADERS}
    # The API server keeps the Authorization header for itself (it authenticates the portal), so the notebook's token
    # travels as Jupyter's `token` query parameter, added here and never shown to the browser.
    fields = [(key, value) for key, value in query if key != "token"] + [("token", token(workload_id))] \
        if with_token else query
    url = f"{configuration.host}{service_proxy_path(namespace, workload_id, path)}"
    if fields:
        url = f"{url}?{urlencode(fields)}"
    try:
        response = api.rest_client.pool_manager.request(
            method, url, body=None if method in ("GET", "HEAD") else body,
            headers={**sent, **({"Authorization": auth} if auth else {})},
            timeout=PROXY_TIMEOUT, redirect=False, preload_content=True)
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        raise NotebookUnreachable(str(exc)) from exc
    kept = {name: value for name, value in response.headers.items() if name.lower() in RELAYED_RESPONSE_HEADERS}
    return Relayed(status=response.status, body=response.data, headers=kept)
