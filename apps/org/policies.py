"""Policies (docs/architecture.md, Policies): the rules of one policy's own fields, the merge of the organisation's,
a department's and a project's policies field by field, the contradictions between a scope and the scope above, and
the violations of a submission. Pure: no queries (the selectors and services hand in the rows).

Image patterns are shell-style globs matched by `fnmatch.fnmatchcase`, restricted to `*` and `?` over the characters
of an image reference and at most `MAX_IMAGE_PATTERN` characters: no regular expressions, so no pattern can take
catastrophic time. A narrower scope's pattern counts as within the scope above when one of the above's patterns
matches every image it matches (`glob_within`: `nvcr.io/nvidia/*` is within `nvcr.io/*`; `*` is within nothing but
`*`; `team-*` is not within `team-?`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Policy

# The audit labels a policy may require, by the name it gives them, and the submission's field of each.
LABEL_FIELDS = {"model": "model_label", "data_class": "data_class"}
MAX_IMAGE_PATTERNS = 50
MAX_IMAGE_PATTERN = 200
IMAGE_PATTERN = re.compile(r"^[A-Za-z0-9._:/@*?-]+$")
MAX_PRIORITY_CLASSES = 100
POD_SECURITY_ORDER = {"baseline": 0, "restricted": 1}
# The fields a policy sets (empty: inherited), in the order pages list them.
POLICY_FIELDS = ("required_labels", "max_gpus_per_workload", "max_runtime_seconds", "default_runtime_seconds",
                 "allowed_images", "allowed_priority_classes", "default_priority_class", "max_notebook_idle_minutes",
                 "pod_security")
# Limits a narrower scope may only lower: field -> how a message names the amount.
_CEILINGS = {"max_gpus_per_workload": "GPUs per workload", "max_runtime_seconds": "seconds of runtime",
             "max_notebook_idle_minutes": "idle minutes for a notebook"}
INSTALLATION = "the portal's MANIFEST_POD_SECURITY setting"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _names(values: Iterable[str]) -> str:
    return ", ".join(values)


def _string_list_errors(value: Any, limit: int) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return ["Give a list of strings."]
    if len(value) > limit:
        return [f"Give at most {limit}."]
    if len(set(value)) != len(value):
        return ["Give each once."]
    return None


def image_pattern_errors(patterns: Any) -> list[str]:
    """Every problem of a list of image patterns (None: inherited, fine)."""
    if patterns is None:
        return []
    errors = _string_list_errors(patterns, MAX_IMAGE_PATTERNS)
    if errors:
        return errors
    if not patterns:
        return ["Give at least one pattern, or leave the field empty to inherit."]
    return [f"{pattern!r} is not an image pattern: use at most {MAX_IMAGE_PATTERN} characters of an image reference "
            "with * and ? as wildcards (no regular expressions), e.g. nvcr.io/nvidia/*."
            for pattern in patterns if len(pattern) > MAX_IMAGE_PATTERN or not IMAGE_PATTERN.match(pattern)]


def policy_field_errors(policy: Policy) -> dict[str, list[str]]:
    """The rules of a policy's own fields (the scope above is `contradiction_errors`'); every one of them."""
    errors: dict[str, list[str]] = {}
    labels = policy.required_labels
    if labels is not None:
        problems = _string_list_errors(labels, len(LABEL_FIELDS))
        unknown = [] if problems else [name for name in labels if name not in LABEL_FIELDS]
        if unknown:
            problems = [f"{_names(unknown)}: not an audit label; the labels are {_names(LABEL_FIELDS)}."]
        if problems:
            errors["required_labels"] = problems
    problems = image_pattern_errors(policy.allowed_images)
    if problems:
        errors["allowed_images"] = problems
    classes = policy.allowed_priority_classes
    if classes is not None:
        problems = _string_list_errors(classes, MAX_PRIORITY_CLASSES)
        if not problems and not classes:
            problems = ["Allow at least one priority class, or leave the field empty to inherit."]
        if problems:
            errors["allowed_priority_classes"] = problems
    if (policy.default_runtime_seconds is not None and policy.max_runtime_seconds is not None
            and policy.default_runtime_seconds > policy.max_runtime_seconds):
        errors["default_runtime_seconds"] = [
            f"The default runtime cannot be above this policy's maximum ({policy.max_runtime_seconds} seconds)."]
    default = policy.default_priority_class
    if default is not None and isinstance(classes, list) and classes and default.name not in classes:
        errors["default_priority_class"] = [f"{default.name} is not one of the classes this policy allows."]
    return errors


@dataclass(frozen=True)
class EffectivePolicy:
    """What applies to one scope: each field's value (None: no limit) and the policy it comes from."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return self.values.get(name)

    def source(self, name: str) -> str:
        return self.sources.get(name, "")

    @property
    def pod_security(self) -> str:
        return str(self.values["pod_security"])

    def allows_priority_class(self, name: str) -> bool:
        allowed = self.get("allowed_priority_classes")
        return allowed is None or name in allowed

    def image_allowed(self, image: str) -> bool:
        patterns = self.get("allowed_images")
        return patterns is None or any(fnmatchcase(image, pattern) for pattern in patterns)


def _is_set(policy: Policy, name: str) -> bool:
    if name == "default_priority_class":
        return policy.default_priority_class_id is not None
    if name == "pod_security":
        return bool(policy.pod_security)
    return getattr(policy, name) is not None


def merge(policies: Sequence[Policy], *, pod_security: str) -> EffectivePolicy:
    """The policies from the widest scope to the nearest, merged: the nearest that sets a field wins for it.
    `pod_security` is the installation's profile, which applies where no policy sets one."""
    values: dict[str, Any] = dict.fromkeys(POLICY_FIELDS)
    values["pod_security"] = pod_security
    sources = {"pod_security": INSTALLATION}
    for policy in policies:
        for name in POLICY_FIELDS:
            if _is_set(policy, name):
                values[name], sources[name] = getattr(policy, name), policy.scope_text()
    return EffectivePolicy(values=values, sources=sources)


def glob_within(narrow: str, wide: str) -> bool:
    """Whether every text the glob `narrow` matches is matched by the glob `wide` (both of `*` and `?` only).

    Matching `narrow`'s text with `wide` is not enough: `wide`'s `?` would match a `*` of `narrow`, which stands for
    any number of characters. Here `wide` runs as an automaton over `narrow`'s pieces: a literal character is matched
    by the same character, `?` or `*`; a `?` by `?` or `*`; a `*` only by `*`. Conservative: a pair such as `?*`
    within `*?` (both "one or more") is refused, never a pattern that allows more. The states are an int's bits, so
    the longest patterns allowed take a few hundred integer operations, whatever their wildcards."""
    wide = re.sub(r"\*+", "*", wide)  # a run of stars is one star; the closure below then needs one step
    stars = sum(1 << position for position, char in enumerate(wide) if char == "*")
    accept = 1 << len(wide)

    def closure(states: int) -> int:
        return states | ((states & stars) << 1)  # a star may match nothing

    def matching(piece: str) -> int:
        return sum(1 << position for position, char in enumerate(wide)
                   if char == piece or (char == "?" and piece != "*"))

    states = closure(1)
    for piece in narrow:
        states = closure(((states & matching(piece)) << 1) | (states & stars))
        if not states:
            return False
    return bool(states & accept)


def _pattern_within(pattern: str, above: Sequence[str]) -> bool:
    return any(glob_within(pattern, wider) for wider in above)


def contradiction_errors(policy: Policy, above: EffectivePolicy) -> dict[str, list[str]]:
    """Where `policy` allows more than the scope above it (`above`: what applies there), each field named; a
    narrower scope may only narrow."""
    errors: dict[str, list[str]] = {}
    own = policy.scope_text()

    def refuse(name: str, message: str) -> None:
        errors.setdefault(name, []).append(message)

    for name, unit in _CEILINGS.items():
        value, ceiling = getattr(policy, name), above.get(name)
        if value is not None and ceiling is not None and value > ceiling:
            refuse(name, f"{_capital(above.source(name))} allows at most {ceiling} {unit}; {own} cannot allow "
                         f"{value}.")
    ceiling = policy.max_runtime_seconds if policy.max_runtime_seconds is not None else above.get(
        "max_runtime_seconds")
    default = policy.default_runtime_seconds
    if default is not None and ceiling is not None and default > ceiling and policy.max_runtime_seconds is None:
        refuse("default_runtime_seconds", f"{_capital(above.source('max_runtime_seconds'))} allows at most "
                                          f"{ceiling} seconds of runtime; {own}'s default cannot be {default}.")
    wider = above.get("allowed_images")
    if isinstance(policy.allowed_images, list) and wider is not None:
        outside = [pattern for pattern in policy.allowed_images if not _pattern_within(pattern, wider)]
        if outside:
            refuse("allowed_images", f"{_capital(above.source('allowed_images'))} allows images matching "
                                     f"{_names(wider)} only; {_names(outside)} goes beyond that.")
    wider = above.get("allowed_priority_classes")
    if isinstance(policy.allowed_priority_classes, list) and wider is not None:
        outside = [name for name in policy.allowed_priority_classes if name not in wider]
        if outside:
            refuse("allowed_priority_classes", f"{_capital(above.source('allowed_priority_classes'))} allows the "
                                               f"priority classes {_names(wider)} only, not {_names(outside)}.")
    allowed = policy.allowed_priority_classes if policy.allowed_priority_classes is not None else above.get(
        "allowed_priority_classes")
    default_class = policy.default_priority_class
    if default_class is not None and allowed is not None and default_class.name not in allowed \
            and policy.allowed_priority_classes is None:
        refuse("default_priority_class", f"{_capital(above.source('allowed_priority_classes'))} allows the priority "
                                         f"classes {_names(allowed)} only, not {default_class.name}.")
    if policy.pod_security and POD_SECURITY_ORDER[policy.pod_security] < POD_SECURITY_ORDER[above.pod_security]:
        refuse("pod_security", f"{_capital(above.source('pod_security'))} requires the {above.pod_security} profile; "
                               f"{own} cannot lower it to {policy.pod_security}.")
    required = above.get("required_labels")
    if isinstance(policy.required_labels, list) and required:
        dropped = [name for name in required if name not in policy.required_labels]
        if dropped:
            refuse("required_labels", f"{_capital(above.source('required_labels'))} requires the labels "
                                      f"{_names(required)}; {own} cannot drop {_names(dropped)}.")
    return errors


def violations(effective: EffectivePolicy, *, units: int | None = None, images: Sequence[tuple[str, str]] = (),
               runtime_seconds: int | None = None, priority_class: str | None = None,
               idle_minutes: int | None = None, labels: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Every way a submission breaks `effective`, under the field each belongs to; None or absent: not known (not
    checked). `images`: (field, image reference) pairs, so a manifest names each container's path."""
    errors: dict[str, list[str]] = {}

    def refuse(name: str, source: str, message: str) -> None:
        errors.setdefault(name, []).append(f"{_capital(effective.source(source))} {message}")

    limit = effective.get("max_gpus_per_workload")
    if units is not None and limit is not None and units > limit:
        refuse("gpus", "max_gpus_per_workload", f"allows at most {limit} GPUs per workload; this one asks for "
                                                f"{units}.")
    for name, image in images:
        if image and not effective.image_allowed(image):
            refuse(name, "allowed_images", f"allows images matching {_names(effective.get('allowed_images'))} only; "
                                           f"{image} matches none.")
    limit = effective.get("max_runtime_seconds")
    if runtime_seconds is not None and limit is not None and runtime_seconds > limit:
        refuse("max_runtime_seconds", "max_runtime_seconds", f"allows a runtime of at most {limit} seconds; give "
                                                             f"{limit} or less.")
    if priority_class is not None and not effective.allows_priority_class(priority_class):
        refuse("priority_class", "allowed_priority_classes",
               f"allows the priority classes {_names(effective.get('allowed_priority_classes'))} only, not "
               f"{priority_class}.")
    limit = effective.get("max_notebook_idle_minutes")
    if idle_minutes is not None and limit is not None and idle_minutes > limit:
        refuse("notebook_idle_timeout_minutes", "max_notebook_idle_minutes",
               f"allows a notebook at most {limit} idle minutes.")
    for label in effective.get("required_labels") or ():
        name = LABEL_FIELDS[label]
        if labels is not None and name in labels and not labels[name]:
            refuse(name, "required_labels", f"requires the {label} audit label.")
    return errors
