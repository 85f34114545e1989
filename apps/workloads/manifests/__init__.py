"""Manifests submitted through the portal: any kind it observes, checked whole before anything is recorded
(parsing, schema, metadata, pod templates, pod security), then prepared with the portal's names and labels; an
example of each kind to start from, and where in the text each refusal points."""

from .checks import MAX_OBJECT_BYTES, Checked, Target, check_manifest
from .errors import ManifestErrors
from .examples import EXAMPLE_KINDS, example_manifest
from .locate import Located, locate_errors
from .parsing import MAX_MANIFEST_BYTES, parse_manifest
from .podsecurity import BASELINE, PROFILES, RESTRICTED
from .prepare import portal_labels, prepared_manifest, submitted_manifest
from .schemas import MANIFEST_KIND_VALUES, MANIFEST_KINDS, ManifestKind, manifest_kind_of

__all__ = [
    "BASELINE",
    "EXAMPLE_KINDS",
    "MANIFEST_KINDS",
    "MANIFEST_KIND_VALUES",
    "MAX_MANIFEST_BYTES",
    "MAX_OBJECT_BYTES",
    "PROFILES",
    "RESTRICTED",
    "Checked",
    "Located",
    "ManifestErrors",
    "ManifestKind",
    "Target",
    "check_manifest",
    "example_manifest",
    "locate_errors",
    "manifest_kind_of",
    "parse_manifest",
    "portal_labels",
    "prepared_manifest",
    "submitted_manifest",
]
