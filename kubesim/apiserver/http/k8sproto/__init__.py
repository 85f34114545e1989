"""Kubernetes' protobuf serialization (`application/vnd.kubernetes.protobuf`), decoded to the JSON form kubesim stores.

kubectl's generator commands (`create namespace|job|configmap|secret|serviceaccount|deployment`, `auth can-i`,
`auth whoami`, `create token`) send protobuf bodies. A body is the 4-byte magic `k8s\\0` then a runtime.Unknown
envelope whose typeMeta names the kind and whose `raw` is the object's message. The messages are built with the
`protobuf` package's descriptor API from `messages.py` (field numbers from Kubernetes' .proto files) and read with
its parser; the JSON mapping is kube's, not protobuf's canonical one: Time is RFC 3339, Quantity and IntOrString
are their string/int forms, int64 stays a number, bytes are base64 (Secret data), RawExtension and FieldsV1 embed
their JSON.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from kubesim.apiserver.http.k8sproto.messages import MESSAGES

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"
_PACKAGE = "kubesim.k8s"
_SCALARS = {
    "string": FieldDescriptor.TYPE_STRING,
    "bytes": FieldDescriptor.TYPE_BYTES,
    "bool": FieldDescriptor.TYPE_BOOL,
    "int32": FieldDescriptor.TYPE_INT32,
    "int64": FieldDescriptor.TYPE_INT64,
    "uint32": FieldDescriptor.TYPE_UINT32,
    "uint64": FieldDescriptor.TYPE_UINT64,
    "fixed64": FieldDescriptor.TYPE_FIXED64,
    "double": FieldDescriptor.TYPE_DOUBLE,
    "float": FieldDescriptor.TYPE_FLOAT,
}
# Groups whose Go package path is not the group's first label.
_GROUP_PACKAGES = {"": "core", "rbac.authorization.k8s.io": "rbac", "meta.k8s.io": None}

# Non-pointer integers Go always marshals, whose zero kube's JSON omits (metadata and status counters).
_ZERO_IS_UNSET = {"generation", "deletionGracePeriodSeconds", "observedGeneration", "nodePort", "count"}


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf object kubesim can read."""


def _local(full: str) -> str:
    """A message's name inside kubesim's one descriptor file (Kubernetes' packages flattened)."""
    return full.replace(".", "_")


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    file = descriptor_pb2.FileDescriptorProto(name="kubesim/k8s.proto", package=_PACKAGE, syntax="proto2")
    for full, rows in MESSAGES.items():
        msg = file.message_type.add(name=_local(full))
        for name, number, label, typ in rows:
            field = msg.field.add(name=name, number=number, json_name=name)
            field.label = (
                FieldDescriptor.LABEL_REPEATED
                if label == "repeated" or typ.startswith("map<")
                else FieldDescriptor.LABEL_OPTIONAL
            )
            if typ.startswith("map<"):
                key, value = typ[4:-1].split(",", 1)
                entry = msg.nested_type.add(name=name[0].upper() + name[1:] + "Entry")
                entry.options.map_entry = True
                _typed(entry.field.add(name="key", number=1, label=FieldDescriptor.LABEL_OPTIONAL), key)
                _typed(entry.field.add(name="value", number=2, label=FieldDescriptor.LABEL_OPTIONAL), value)
                field.type = FieldDescriptor.TYPE_MESSAGE
                field.type_name = f".{_PACKAGE}.{msg.name}.{entry.name}"
            else:
                _typed(field, typ)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


def _typed(field: descriptor_pb2.FieldDescriptorProto, typ: str) -> None:
    if typ in _SCALARS:
        field.type = _SCALARS[typ]
    else:
        field.type = FieldDescriptor.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{_local(typ)}"


def message_class(full: str) -> type[Message]:
    """The protobuf message class of a Kubernetes message (`k8s.io.api.core.v1.ConfigMap`)."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{_PACKAGE}.{_local(full)}"))


def _parse(full: str, data: bytes) -> Message:
    message = message_class(full)()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise ProtobufError(f"cannot decode {full.rsplit('.', 1)[-1]}: {exc}") from exc
    return message


def message_name(api_version: str, kind: str) -> str | None:
    """The protobuf message of a kind (`batch/v1`, `Job` -> k8s.io.api.batch.v1.Job), None if kubesim lacks it."""
    group, _, version = api_version.rpartition("/")
    package = _GROUP_PACKAGES.get(group, group.split(".", 1)[0])
    candidates = [f"k8s.io.api.{package}.{version}.{kind}", f"k8s.io.apimachinery.pkg.apis.meta.{version}.{kind}"]
    return next((c for c in candidates if c in MESSAGES), None)


def decode(body: bytes) -> dict:
    """A protobuf request body (magic + runtime.Unknown) as the JSON object kube would have received."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf magic number")
    envelope = _parse(UNKNOWN, body[len(MAGIC) :])
    api_version, kind = envelope.typeMeta.apiVersion, envelope.typeMeta.kind
    full = message_name(api_version, kind)
    if full is None:
        raise ProtobufError(f"kubesim cannot decode {kind} ({api_version}) from protobuf; send it as JSON")
    obj = to_json(_parse(full, envelope.raw))
    return {"apiVersion": api_version, "kind": kind, **obj}


def to_json(message: Message) -> dict:
    """A message as kube's JSON, with kube's encodings of its special types. Go's marshaller writes every
    non-pointer field, set or not; what Go's JSON encoding omits (empty strings, false, the zero Time, a few
    counters whose zero means unset) is left out, as a JSON client would have sent it."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _value(value_field, v) for k, v in value.items()}
        elif _repeated(field):
            out[field.name] = [_value(field, v) for v in value]
        else:
            converted = _value(field, value)
            if converted is None or converted == "" or converted is False:
                continue
            if converted == 0 and field.name in _ZERO_IS_UNSET:
                continue
            out[field.name] = converted
    return out


def _repeated(field: FieldDescriptor) -> bool:
    """protobuf 7 dropped FieldDescriptor.label for is_repeated; older releases have only label."""
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == FieldDescriptor.LABEL_REPEATED


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    if field.message_type is None:
        return value
    special = field.message_type.name
    if special.endswith(("_meta_v1_Time", "_meta_v1_MicroTime")):
        if not value.seconds and not value.nanos:
            return None
        moment = datetime.fromtimestamp(value.seconds + value.nanos / 1e9, UTC)
        if special.endswith("MicroTime"):
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if special.endswith("_resource_Quantity"):
        return value.string
    if special.endswith("_intstr_IntOrString"):
        return value.strVal if value.type == 1 else value.intVal
    if special.endswith("_meta_v1_Duration"):
        return f"{value.duration / 1e9:g}s"
    if special.endswith(("_runtime_RawExtension", "_meta_v1_FieldsV1")):
        raw = getattr(value, _raw_field(special))
        return json.loads(raw) if raw else {}
    return to_json(value)


def _raw_field(special: str) -> str:
    """The bytes field of an embedded JSON message: RawExtension's `raw`, FieldsV1's `Raw` (as go-to-protobuf names
    them)."""
    return "Raw" if special.endswith("_meta_v1_FieldsV1") else "raw"


def encode(obj: dict) -> bytes | None:
    """A stored object as a protobuf response body (magic + runtime.Unknown); None for a kind without a message.
    Fields the message lacks are left out, as kube's protobuf serializer has nowhere to put them."""
    full = message_name(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    if full is None:
        return None
    message = message_class(full)()
    _fill(message, {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
    envelope = message_class(UNKNOWN)()
    envelope.typeMeta.apiVersion = obj["apiVersion"]
    envelope.typeMeta.kind = obj["kind"]
    envelope.raw = message.SerializeToString()
    envelope.contentEncoding = ""
    envelope.contentType = ""
    return MAGIC + envelope.SerializeToString()


def _fill(message: Message, data: dict) -> None:
    fields = message.DESCRIPTOR.fields_by_name
    for key, value in data.items():
        field = fields.get(key)
        if field is None or value is None:
            continue
        target = getattr(message, key)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for k, v in (value or {}).items():
                if value_field.message_type is None:
                    target[k] = _scalar(value_field, v)
                else:
                    _fill_value(target[k], v)
        elif _repeated(field):
            for item in value or []:
                if field.message_type is None:
                    target.append(_scalar(field, item))
                else:
                    _fill_value(target.add(), item)
        elif field.message_type is None:
            setattr(message, key, _scalar(field, value))
        else:
            _fill_value(target, value)


def _fill_value(message: Message, value: Any) -> None:
    special = message.DESCRIPTOR.name
    message.SetInParent()
    if special.endswith(("_meta_v1_Time", "_meta_v1_MicroTime")):
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        message.seconds = int(moment.timestamp())
        message.nanos = moment.microsecond * 1000
    elif special.endswith("_resource_Quantity"):
        message.string = str(value)
    elif special.endswith("_intstr_IntOrString"):
        if isinstance(value, str):
            message.type, message.strVal = 1, value
        else:
            message.type, message.intVal = 0, int(value)
    elif special.endswith(("_runtime_RawExtension", "_meta_v1_FieldsV1")):
        setattr(message, _raw_field(special), json.dumps(value).encode())
    elif isinstance(value, dict) and not special.endswith("_meta_v1_Duration"):
        _fill(message, value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64decode(value)
    if field.type == FieldDescriptor.TYPE_STRING:
        return str(value)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return bool(value)
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return float(value)
    return int(value)


def wants_protobuf(accept: str) -> bool:
    """The client prefers protobuf (kubectl: `application/vnd.kubernetes.protobuf,application/json`)."""
    return accept.split(",", 1)[0].split(";", 1)[0].strip() == MEDIA_TYPE
