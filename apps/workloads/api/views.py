"""The workloads API: submit, list, read, stop, submit again, keep a notebook alive and read logs. Reads come from
`workloads_for` (unseen rows: 404); writes go through the services, which check everything again and decide the rules.

Workloads are addressed by id only. A name is a label the owner picks (a DNS label, shown everywhere beside the id):
it need not be unique, since "submit again" keeps it and the Job's name comes from the id, so two workloads of one
name are told apart by id (`gpu list` shows both).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch, QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.access import Action, can, can_anywhere
from apps.core.api import AsciiIntegerField, AuthenticatedAPIRequest, StrictIdLookupMixin, validation_error_detail
from apps.core.api_lists import StrictJSONParser, form_error_detail
from apps.core.csv_export import csv_response
from apps.core.http import MAX_ID, parse_id, parse_int
from apps.org.models import DataSource
from apps.workloads import kubectl, manifests, services, table
from apps.workloads import logs as workload_logs
from apps.workloads.filters import WorkloadFilterSet
from apps.workloads.history import kueue_message_scoped
from apps.workloads.logs import TAIL_LINES
from apps.workloads.models import PORTAL_KIND_CHOICES, Credential, Kind, Status, Workload, WorkloadEvent
from apps.workloads.selectors import annotate_live, preemptions_seen_by, preemptors_visible, workload_list

from . import logs as api_logs
from .logs import MAX_FOLLOW_SECONDS
from .serializers import (
    API_FIELD_NAMES,
    ManifestSubmitSerializer,
    WorkloadDetailSerializer,
    WorkloadDryRunSerializer,
    WorkloadSerializer,
    WorkloadSubmitSerializer,
)

IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,100}")
OUTSIDE_RESUBMIT = ("This workload was submitted outside the portal: there is no submission of it to repeat. Submit "
                    "it again the way it was submitted (kubectl, its pipeline), or submit a new workload.")


class BulkStopSerializer(serializers.Serializer):
    ids = serializers.ListField(child=AsciiIntegerField(min_value=1, max_value=MAX_ID), allow_empty=False,
                                min_length=1, max_length=services.BULK_STOP_LIMIT,
                                help_text=f"Ids of the workloads to stop, at most {services.BULK_STOP_LIMIT}.")


class IdempotencyKeyReused(exceptions.APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "idempotency_key_reused"


def request_digest(data: Any) -> str:
    """A fingerprint of a submission's body, to tell a retry (same body) from a key reused for another one."""
    if hasattr(data, "lists"):  # a form-encoded body: every value of every key
        data = dict(data.lists())
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str, separators=(",", ":")).encode()).hexdigest()


def idempotency_key(request: Request) -> str | None:
    """The request's `Idempotency-Key` (1 to 100 visible ASCII characters), None without one; 400 otherwise."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise exceptions.ValidationError({"Idempotency-Key": [
            "Send 1 to 100 visible ASCII characters, e.g. a UUID, one per submission."]})
    return key


def api_errors(error: DjangoValidationError) -> dict[str, Any]:
    """A service ValidationError keyed by the API's field names (labels nested, memory for memory_gib, ...)."""
    detail = validation_error_detail(error)
    errors: dict[str, Any] = {}
    for field, messages in detail.items():
        name = API_FIELD_NAMES.get(field, field)
        if isinstance(name, tuple):
            parent, child = name
            errors.setdefault(parent, {}).setdefault(child, []).extend(messages)
        else:
            errors.setdefault(name, []).extend(messages)
    return errors


def _with_attachments(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    """Data source and credential names in two queries per page (never a credential's sealed values)."""
    return queryset.prefetch_related(Prefetch("data_sources", queryset=DataSource.objects.only("id", "name")),
                                     Prefetch("credentials", queryset=Credential.objects.only("id", "name")))


def _merge(errors: dict[str, Any], more: dict[str, Any]) -> None:
    """Add `more` (field -> messages, nested for labels) to `errors` of the same shape."""
    for name, messages in more.items():
        if isinstance(messages, dict) and isinstance(errors.get(name, {}), dict):
            _merge(errors.setdefault(name, {}), messages)
        elif isinstance(messages, dict):
            errors[name].extend(message for nested in messages.values() for message in nested)
        else:
            errors.setdefault(name, []).extend(messages)


IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 100, "pattern": f"^{IDEMPOTENCY_KEY.pattern}$"},
    OpenApiParameter.HEADER, required=False,
    description="Makes a retry safe: the same key from the same user answers the workload the first request "
                "made (201, the same body, header Idempotent-Replayed: true) and submits nothing; the same "
                "key with another body answers 422. 1 to 100 visible ASCII characters, e.g. a UUID.")


class LogsSerializer(serializers.Serializer):
    workload = serializers.IntegerField()
    status = serializers.CharField()
    pending = serializers.BooleanField(help_text="No lines read yet (the pods are starting, or the first read is on "
                                                 "its way): ask again in a few seconds.")
    pods = inline_serializer("PodLogTail", fields={
        "pod": serializers.CharField(), "lines": serializers.ListField(child=serializers.CharField()),
        "error": serializers.CharField(help_text="Why the log could not be read; empty when it was."),
        "exit_code": serializers.IntegerField(allow_null=True, help_text="The main container's exit code once it "
                                                                          "has terminated; null while it runs."),
        "exit_reason": serializers.CharField(help_text="Kubernetes' reason for that end (Completed, Error, "
                                                       "OOMKilled ...); empty while it runs."),
        "fetched_at": serializers.DateTimeField()}, many=True)


DRY_RUN_PARAMETER = OpenApiParameter(
    "dry_run", OpenApiTypes.BOOL, OpenApiParameter.QUERY, required=False,
    description="true: check the submission as a submission is checked and answer what it would be (200), or every "
                "refusal (400, as without it), recording and creating nothing: no workload, no history, no audit "
                "row, nothing for the worker, no cluster call; an Idempotency-Key is not used up. Kubernetes' "
                "`dryRun=All` for this endpoint. Default false.")


# A submission is one of two bodies, told apart by `kind`: the portal's own forms (training, notebook, batch) or a
# Kubernetes manifest ("manifest"); both are documented, so clients and the schema's fuzzing meet both.
SUBMISSION = PolymorphicProxySerializer(
    component_name="Submission", resource_type_field_name="kind",
    serializers={**{kind: WorkloadSubmitSerializer for kind, _ in PORTAL_KIND_CHOICES},
                 "manifest": ManifestSubmitSerializer})


@extend_schema_view(
    create=extend_schema(
        request=SUBMISSION,
        parameters=[IDEMPOTENCY_KEY_PARAMETER, DRY_RUN_PARAMETER],
        responses={201: WorkloadDetailSerializer,
                   200: OpenApiResponse(response=WorkloadDryRunSerializer,
                                        description="dry_run=true: what the submission would be; nothing recorded."),
                   422: OpenApiResponse(description="The Idempotency-Key was used for another request.")},
        description=(
            "Submit a training job, notebook or batch job, or a Kubernetes manifest of any kind the portal observes "
            "(`\"kind\": \"manifest\"` with its text in `manifest`). The row is saved as `submitting` and the worker "
            "creates the Kueue-labelled object after commit. Refusals say why, keyed by field; a manifest's own "
            "refusals are under `manifest`, each led by its field path in the object (`spec.template.spec."
            "containers[0].image: required.`). A project you may not see reads as not existing (400); one you see "
            "but may not submit to answers 403. With `dry_run=true` nothing is recorded: the answer is what would "
            "be submitted."
        ),
    ),
)
class WorkloadViewSet(StrictIdLookupMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      viewsets.GenericViewSet):
    """Your own workloads and every workload in the projects you may see, newest first.

    Filters and ordering: `WorkloadFilterSet` (the list page's too); without `scope` the API lists everything."""

    request: AuthenticatedAPIRequest
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilterSet

    def get_serializer_class(self) -> type:
        if self.action in ("create", "metadata"):  # OPTIONS describes the submission form
            return WorkloadSubmitSerializer
        if self.action == "list":
            return WorkloadSerializer
        return WorkloadDetailSerializer

    def get_queryset(self) -> QuerySet[Workload]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no signed-in user
            return Workload.objects.none()
        queryset = _with_attachments(workload_list(user=self.request.user, detail=self.action != "list"))
        if self.action == "list":
            return queryset
        return queryset.prefetch_related(Prefetch("events", queryset=WorkloadEvent.objects.select_related("actor")))

    def _detail(self, workload: Workload) -> dict[str, Any]:
        fresh = _with_attachments(workload_list(user=self.request.user, detail=True)).prefetch_related(
            Prefetch("events", queryset=WorkloadEvent.objects.select_related("actor"))).get(pk=workload.pk)
        return WorkloadDetailSerializer(self._with_live_state(fresh), context=self.get_serializer_context()).data

    def _with_live_state(self, workload: Workload) -> Workload:
        """Attach the "why am I waiting" explanation and the preemptions (preemptors the user may not see: null)."""
        annotate_live([workload], viewer=self.request.user)
        # The events are prefetched: ask for the preemptors only when there was a preemption.
        found = preemptions_seen_by(workload=workload, user=self.request.user) if any(
            e.to_status == Status.PREEMPTED for e in workload.events.all()) else []
        for preemption in found:
            if not (preemption["preemptor"] or {}).get("visible"):
                preemption["preemptor"] = None
        # Kueue's own messages name a preemptor by UID and cohort path: kept only for one the user may see.
        events = list(workload.events.all())
        visible = preemptors_visible([workload.status_message, *(e.message for e in events),
                                      *(p["message"] for p in found)], user=self.request.user)
        if visible is not None:
            workload.status_message = kueue_message_scoped(workload.status_message, visible_job_uids=visible)
            for event in events:
                event.message = kueue_message_scoped(event.message, visible_job_uids=visible)
            for preemption in found:
                preemption["message"] = kueue_message_scoped(preemption["message"], visible_job_uids=visible)
        workload.preemption_list = found
        return workload

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The page of rows with why each waits, for this user: a fixed number of queries however many rows."""
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        rows = annotate_live(list(page if page is not None else queryset), viewer=self.request.user)
        data = self.get_serializer(rows, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        workload = self._with_live_state(self.get_object())
        return Response(self.get_serializer(workload).data)

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        # Also asked by OPTIONS (DRF's metadata), which then offers the submission form only to those who may submit.
        if request.method == "POST" and not self.detail and not can_anywhere(request.user, Action.SUBMIT):
            self.permission_denied(request, message="You may not submit work in any project.")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        dry_run = request.query_params.get("dry_run", "false").lower()
        if dry_run not in ("true", "false", "1", "0"):
            raise exceptions.ValidationError({"dry_run": ["Use true or false."]})
        return self._submit(request.data, dry_run=dry_run in ("true", "1"))

    def _submit(self, data: Any, *, dry_run: bool = False) -> Response:
        """Submit `data` (a submission body): every refusal at once, once per Idempotency-Key; with `dry_run`, what
        it would be, recording nothing."""
        request = self.request
        user = request.user
        if isinstance(data, Mapping) and data.get("kind") == "manifest":
            return self._submit_manifest(data, dry_run=dry_run)
        serializer = WorkloadSubmitSerializer(data=data, context=self.get_serializer_context())
        # The project first: a project the user sees but may not submit to is a 403 whatever else is wrong.
        if isinstance(data, Mapping) and "project" in data:
            try:
                project = serializer.fields["project"].run_validation(data["project"])
            except exceptions.ValidationError:
                project = None  # reported with the other field errors below
            if project is not None and not can(user, Action.SUBMIT, project):
                self.permission_denied(request, message="You may not submit work in this project.")
        key = idempotency_key(request)
        if not serializer.is_valid():
            # Every field's messages in one 400: the shape errors, then the service's refusals of the other fields.
            errors = {name: list(messages) if isinstance(messages, list) else dict(messages)
                      for name, messages in serializer.errors.items()}
            known, unknown = serializer.known_values()
            _merge(errors, serializer.named_errors)
            try:
                services.workload_check(actor=user, unknown=unknown, **known)
            except DjangoValidationError as error:
                _merge(errors, api_errors(error))
            raise exceptions.ValidationError(errors)
        if dry_run:
            try:
                draft = services.workload_validate(actor=user, **serializer.validated_data)
            except DjangoValidationError as error:
                raise exceptions.ValidationError(api_errors(error)) from error
            return Response(WorkloadDryRunSerializer(draft).data)
        try:
            workload, created = services.workload_submit_once(
                actor=user, submission_key=f"api:{key}" if key else None,
                submission_digest=request_digest(data) if key else "", **serializer.validated_data)
        except services.SubmissionKeyReused as error:
            raise IdempotencyKeyReused(error.messages[0]) from error
        except DjangoValidationError as error:
            raise exceptions.ValidationError(api_errors(error)) from error
        if not created:
            return Response(self._detail(workload), status=status.HTTP_201_CREATED,
                            headers={"Idempotent-Replayed": "true"})
        return Response(self._created(workload), status=status.HTTP_201_CREATED)

    def _created(self, workload: Workload) -> dict[str, Any]:
        """The detail of a workload this request just submitted, from the row the service wrote instead of read back
        (the read, its four prefetches and its cluster events were a quarter of the submission's CPU,
        docs/architecture.md, Serving the portal): the service leaves its event and attachments on it as
        prefetched, and a new submission has nothing else yet (no utilisation, forecast, cluster events, stop or
        preemption). Tests hold it equal to a read."""
        Workload.utilisation.related.set_cached_value(workload, None)
        Workload.forecast.related.set_cached_value(workload, None)
        workload.cluster_event_lines = []
        return WorkloadDetailSerializer(self._with_live_state(workload), context=self.get_serializer_context()).data

    def _submit_manifest(self, data: Mapping[str, Any], *, dry_run: bool = False) -> Response:
        """Submit a Kubernetes manifest (`"kind": "manifest"`): every refusal at once, each of the manifest's led by
        its field path; once per Idempotency-Key. A dry run is `services.workload_manifest_validate`, the checks the
        submission makes first, and stops there."""
        request = self.request
        serializer = ManifestSubmitSerializer(data=data, context=self.get_serializer_context())
        if "project" in data:
            try:
                project = serializer.fields["project"].run_validation(data["project"])
            except exceptions.ValidationError:
                project = None
            if project is not None and not can(request.user, Action.SUBMIT, project):
                self.permission_denied(request, message="You may not submit work in this project.")
        key = idempotency_key(request)
        if not serializer.is_valid():
            errors = {name: list(messages) if isinstance(messages, list) else dict(messages)
                      for name, messages in serializer.errors.items()}
            text = data.get("manifest")
            if "manifest" not in errors and isinstance(text, str):
                try:
                    manifests.parse_manifest(text)
                except manifests.ManifestErrors as error:
                    _merge(errors, error.errors)
            raise exceptions.ValidationError(errors)
        fields = {name: value for name, value in serializer.validated_data.items() if name != "kind"}
        if dry_run:
            try:
                draft, _ = services.workload_manifest_validate(actor=request.user, **fields)
            except DjangoValidationError as error:
                raise exceptions.ValidationError(api_errors(error)) from error
            return Response(WorkloadDryRunSerializer(draft).data)
        try:
            workload, created = services.workload_submit_manifest_once(
                actor=request.user, submission_key=f"api:{key}" if key else None,
                submission_digest=request_digest(data) if key else "", **fields)
        except services.SubmissionKeyReused as error:
            raise IdempotencyKeyReused(error.messages[0]) from error
        except DjangoValidationError as error:
            raise exceptions.ValidationError(api_errors(error)) from error
        headers = {} if created else {"Idempotent-Replayed": "true"}
        return Response(self._detail(workload), status=status.HTTP_201_CREATED, headers=headers)

    @extend_schema(
        request=None,
        responses={202: WorkloadDetailSerializer, 400: OpenApiResponse(description="Nothing to stop."),
                   403: OpenApiResponse(description="You see the workload but may not stop it.")},
        description=(
            "Ask for a workload to stop: it becomes `stopping` and the worker deletes its Job. Owners stop their "
            "own work; team leads and admins anything in their scope."
        ),
    )
    @action(detail=True, methods=["post"])
    def stop(self, request: AuthenticatedAPIRequest, pk: str | None = None) -> Response:
        workload = self.get_object()
        services.workload_stop(actor=request.user, workload=workload)
        return Response(self._detail(workload), status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="workloads_bulk_stop",
        request=BulkStopSerializer,
        responses={202: WorkloadSerializer(many=True),
                   400: OpenApiResponse(description="One of them has nothing to stop; nothing was stopped."),
                   403: OpenApiResponse(description="You may not stop one of them; nothing was stopped."),
                   404: OpenApiResponse(description="One of the ids is no workload you may see.")},
        description=(
            "Stop several workloads at once, all or none: each becomes `stopping` as with `{id}/stop/`. Refused "
            "whole when one is not yours to stop (403, naming it) or has nothing to stop (400)."
        ),
    )
    # The stopped rows themselves, not a page of a filtered list: neither paginated nor filtered.
    @action(detail=False, methods=["post"], url_path="stop", url_name="bulk-stop", pagination_class=None,
            filter_backends=[])
    def bulk_stop(self, request: AuthenticatedAPIRequest) -> Response:
        body = BulkStopSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ids = set(body.validated_data["ids"])
        workloads = list(workload_list(user=request.user).filter(pk__in=ids))
        if len(workloads) != len(ids):
            missing = sorted(ids - {w.pk for w in workloads})
            raise exceptions.NotFound(f"No such workload: {', '.join(map(str, missing))}; nothing was stopped.")
        services.workloads_stop(actor=request.user, workloads=workloads)
        rows = annotate_live(list(workload_list(user=request.user).filter(pk__in=ids)), viewer=request.user)
        return Response(WorkloadSerializer(rows, many=True, context=self.get_serializer_context()).data,
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="workloads_export_csv",
        responses={(200, "text/csv"): OpenApiTypes.STR},
        description="The filtered list (the same filters and ordering as the list) as CSV, every column of the "
                    "list page, unpaginated (at most 50,000 rows).",
    )
    @action(detail=False, methods=["get"], url_path="export", url_name="export")
    def export(self, request: AuthenticatedAPIRequest) -> StreamingHttpResponse:
        filterset = WorkloadFilterSet(request.query_params, queryset=self.get_queryset(), request=request)
        if not filterset.valid_unpaginated():
            raise exceptions.ValidationError(form_error_detail(filterset.errors))
        return csv_response(table.export_rows(filterset.qs, viewer=request.user), "workloads.csv")

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: WorkloadDetailSerializer,
                   422: OpenApiResponse(description="The Idempotency-Key was used for another request.")},
        description=(
            "Submit a workload again: the same request as this one (project, kind, name, image, command, size, "
            "policy, labels), with `resubmitted_from` set to it, changed by the fields the body gives (any field of "
            "a submission, e.g. {\"gpus\": 2}; an empty body submits it as it was). Checked and answered like a "
            "submission. Work submitted outside the portal has no submission to repeat (400)."
        ),
    )
    # JSON only: a form body cannot tell "no changes" from a body that is no object at all (the schema's promise).
    @action(detail=True, methods=["post"], parser_classes=[StrictJSONParser])
    def resubmit(self, request: AuthenticatedAPIRequest, pk: str | None = None) -> Response:
        source = self.get_object()
        if source.from_outside:
            raise exceptions.ValidationError({"non_field_errors": [OUTSIDE_RESUBMIT]})
        changes = request.data  # {} for an empty body
        if not isinstance(changes, Mapping):
            raise exceptions.ValidationError({"non_field_errors": [
                "Send a JSON object of the fields to change, or nothing."]})
        if "resubmitted_from" in changes and parse_id(changes["resubmitted_from"]) != source.pk:
            raise exceptions.ValidationError({"resubmitted_from": [
                f"A resubmission comes from the workload in its URL ({source.pk}); leave this out."]})
        earlier = submission_of(source)
        if "gpus" in changes and "gpu_fraction" not in changes:  # whole GPUs asked for instead of a fraction
            earlier.pop("gpu_fraction", None)
        elif changes.get("gpu_fraction") not in (None, "") and "gpus" not in changes:  # a fraction instead
            earlier["gpus"] = 0
        return self._submit({**earlier, **dict(changes.items()), "resubmitted_from": source.pk})

    @extend_schema(
        request=None,
        responses={200: WorkloadDetailSerializer},
        description=(
            "Keep a notebook up: its idle timeout starts again now. Only the owner may; only notebooks have one "
            "(anything else: 400)."
        ),
    )
    @action(detail=True, methods=["post"], url_path="keep-alive")
    def keep_alive(self, request: AuthenticatedAPIRequest, pk: str | None = None) -> Response:
        workload = self.get_object()
        if workload.kind != Kind.NOTEBOOK:
            raise exceptions.ValidationError({"non_field_errors": ["Only notebooks have an idle timeout."]})
        services.workload_touch(actor=request.user, workload=workload)
        return Response(self._detail(workload))

    @extend_schema(
        parameters=[
            OpenApiParameter("lines", {"type": "integer", "minimum": 1, "maximum": TAIL_LINES},
                             description=f"The last N lines of each pod (1 to {TAIL_LINES}; default all the tail "
                                         "holds)."),
            OpenApiParameter("follow", OpenApiTypes.BOOL, description="Stream the lines as they come (text/plain) "
                             "until the workload has finished and its last lines were read, or `timeout`."),
            OpenApiParameter("timeout", {"type": "integer", "minimum": 1, "maximum": MAX_FOLLOW_SECONDS},
                             description=f"Following: stop after this many seconds "
                             f"(1 to {MAX_FOLLOW_SECONDS}; default {MAX_FOLLOW_SECONDS})."),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(response=LogsSerializer, description=(
                "The stored tail of each pod; with follow=true a text/plain stream of lines (`<pod> | <line>` when "
                "the workload has several pods over its life), ending with `[<name> <status>]` (`[<name> failed: "
                "exit code N]` when a pod failed) when the workload has finished.")),
            (200, "text/plain"): OpenApiResponse(response=OpenApiTypes.STR, description="follow=true: the lines."),
        },
        description=(
            f"The pods' logs: the last {TAIL_LINES} lines of each pod, as the worker last read them (reading them "
            "asks for a fresh read when one is due, at most every few seconds while the workload runs; the first read "
            "of a running workload waits a few seconds for it), with the main container's `exit_code` and "
            "`exit_reason` once it has terminated. `pending`: no lines read yet. The portal reads the logs of its own "
            "work only: for work submitted outside it, 400."
        ),
    )
    @action(detail=True, methods=["get"])
    def logs(self, request: AuthenticatedAPIRequest, pk: str | None = None) -> Response | StreamingHttpResponse:
        workload = self.get_object()
        if workload.from_outside:
            raise exceptions.ValidationError({"non_field_errors": [kubectl.logs_hint(workload)]})
        params = request.query_params
        errors: dict[str, list[str]] = {}
        lines = _bounded(params, "lines", 1, TAIL_LINES, errors)
        timeout = _bounded(params, "timeout", 1, MAX_FOLLOW_SECONDS, errors)
        following = params.get("follow", "false").lower()
        if following not in ("true", "false", "1", "0"):
            errors["follow"] = ["Use true or false."]
        if errors:
            raise exceptions.ValidationError(errors)
        wait = api_logs.client_waiter(request.META)
        if following in ("true", "1"):
            response = StreamingHttpResponse(
                api_logs.follow(workload_id=workload.pk, timeout=timeout or MAX_FOLLOW_SECONDS,
                                multi_pod=workload.pods_over_life > 1, sleep=wait),
                content_type="text/plain; charset=utf-8")
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # a proxy in front must pass the lines on as they come
            return response
        workload_logs.workload_logs_refresh_request(workload=workload)
        return Response(api_logs.tails_payload(workload, api_logs.first_read(workload=workload, wait=wait), lines))


def _bounded(params: Any, name: str, lowest: int, highest: int, errors: dict[str, list[str]]) -> int | None:
    raw = params.get(name)
    if raw is None:
        return None
    number = parse_int(raw)
    if number is None or not lowest <= number <= highest:
        errors[name] = [f"Use a whole number from {lowest} to {highest}."]
    return number


def submission_of(workload: Workload) -> dict[str, Any]:
    """What was asked for `workload`, as a submission body (the fields of its kind, as the API names them); for a
    manifest submission, the manifest as its submitter gave it and how it ran."""
    if workload.kind in manifests.MANIFEST_KIND_VALUES and workload.manifest:
        return {"project": workload.project_id, "kind": "manifest", "manifest": manifests.submitted_manifest(workload),
                "node_pool": workload.node_pool.slug,
                "priority_class": workload.priority_class.name if workload.priority_class else None,
                "preemptible": workload.preemptible, "max_runtime_seconds": workload.max_runtime_seconds,
                "labels": {"model": workload.model_label, "data_class": workload.data_class}}
    return {
        "project": workload.project_id, "kind": workload.kind, "name": workload.name, "image": workload.image,
        "command": list(workload.command or []), "args": list(workload.args or []), "env": list(workload.env or []),
        "node_pool": workload.node_pool.slug, "gpus": workload.gpus,
        **({"gpu_fraction": str(workload.gpu_fraction)} if workload.gpu_fraction is not None else {}),
        "cpu": str(workload.cpu), "memory": str(workload.memory_gib), "pods": workload.pods,
        "completions": workload.completions, "parallelism": workload.parallelism,
        "priority_class": workload.priority_class.name if workload.priority_class else None,
        "preemptible": workload.preemptible, "max_runtime_seconds": workload.max_runtime_seconds,
        "labels": {"model": workload.model_label, "data_class": workload.data_class},
        "idle_timeout_minutes": workload.notebook_idle_timeout_minutes, "port": workload.notebook_port,
        "shm": str(workload.shm_gib) if workload.shm_gib is not None else None,
        "data_sources": [source.name for source in workload.data_sources.all()],
        "credentials": [credential.name for credential in workload.credentials.all()],
        **({"framework": workload.framework, **workload.framework_settings} if workload.kind == Kind.TRAINING else {}),
    }
