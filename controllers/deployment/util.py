"""Pure Deployment arithmetic, as `pkg/controller/deployment/util/deployment_util.go`.

Everything here is a function of plain-dict objects and returns plain values: no I/O, so the
strategies (`rolling`, `recreate`), the scaler (`sync`) and the evacuation planner can be
tested without a cluster. Names follow the Go helpers they port so the two can be read side by
side: the revision and replicas annotations, proportional scaling (`get_proportion`), the
pod-template hash and the sort orders the controller relies on. The strategy's surge and
unavailability budget (`resolve_fenceposts`, `max_surge`, ...) is in
`controllers.common.deploymentstrategy`, because the NodeMaintenance drain reads it too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

import orjson

from controllers.common.deploymentstrategy import is_rolling_update, max_surge, max_unavailable, replicas
from controllers.common.evacuation import (
    EVACUATION_READY_ANNOTATION,
    REPLICAS_TO_EVACUATE_ANNOTATION,
)
from kubeutil.strconv import parse_int
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]
_O = TypeVar("_O", bound=Mapping[str, Any])

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"

DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"
MAX_INT32 = 2**31 - 1
# `--deployment-controller-revision-history-max-chars` has no flag here; KCM's default.
REVISION_HISTORY_LIMIT_CHARS = 2000

# Annotations a Deployment never copies to its ReplicaSets (and a rollback never copies back).
# The evacuation ones are per-object status: the Deployment's total must not leak into a
# ReplicaSet, and a ReplicaSet's mark must not leak into its Deployment.
ANNOTATIONS_TO_SKIP = frozenset(
    {
        LAST_APPLIED_ANNOTATION,
        REVISION_ANNOTATION,
        REVISION_HISTORY_ANNOTATION,
        DESIRED_REPLICAS_ANNOTATION,
        MAX_REPLICAS_ANNOTATION,
        ROLLBACK_TO_ANNOTATION,
        REPLICAS_TO_EVACUATE_ANNOTATION,
        EVACUATION_READY_ANNOTATION,
    }
)


# -- accessors ------------------------------------------------------------------------------


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def uid_of(obj: Obj) -> str:
    return str(meta(obj).get("uid", ""))


def annotations_of(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def status_int(obj: Obj, field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def min_available(d: Obj) -> int:
    """`MinAvailable`: how many pods must stay available during a rollout; 0 unless RollingUpdate."""
    if not is_rolling_update(d):
        return 0
    return replicas(d) - max_unavailable(d)


def min_ready_seconds(d: Obj) -> int:
    return int((d.get("spec") or {}).get("minReadySeconds") or 0)


def progress_deadline_seconds(d: Obj) -> int | None:
    value = (d.get("spec") or {}).get("progressDeadlineSeconds")
    return None if value is None else int(value)


def has_progress_deadline(d: Obj) -> bool:
    value = progress_deadline_seconds(d)
    return value is not None and value != MAX_INT32


def revision_history_limit(d: Obj) -> int | None:
    value = (d.get("spec") or {}).get("revisionHistoryLimit")
    return None if value is None else int(value)


def is_paused(d: Obj) -> bool:
    return bool((d.get("spec") or {}).get("paused"))


# -- revisions ------------------------------------------------------------------------------


def revision(obj: Obj) -> int:
    """`Revision`: the `deployment.kubernetes.io/revision` annotation as Go's `ParseInt` reads it;
    0 when absent or not a number (the callers skip a revision Go fails to parse, which is the
    same as counting it 0 for the highest and second highest)."""
    raw = annotations_of(obj).get(REVISION_ANNOTATION)
    if raw is None:
        return 0
    value = parse_int(str(raw))
    return 0 if value is None else value


def rollback_to(d: Obj) -> int | None:
    """`getRollbackTo`: the revision the `deprecated.deployment.rollback.to` annotation asks for
    (0 meaning the previous one), or None when it is absent, empty or not an int64."""
    raw = annotations_of(d).get(ROLLBACK_TO_ANNOTATION)
    if not raw:
        return None
    return parse_int(str(raw))


def max_revision(rss: Iterable[Obj]) -> int:
    return max((revision(rs) for rs in rss), default=0)


def last_revision(rss: Iterable[Obj]) -> int:
    """`LastRevision`: the second highest revision (what `rollout undo` goes back to)."""
    top = second = 0
    for rs in rss:
        v = revision(rs)
        if v >= top:
            top, second = v, top
        elif v > second:
            second = v
    return second


def copy_deployment_annotations_to_replica_set(d: Obj, rs_annotations: MutableMapping[str, str]) -> bool:
    """Copy the Deployment's annotations but the skipped ones; return whether any changed."""
    changed = False
    for key, value in annotations_of(d).items():
        if key in ANNOTATIONS_TO_SKIP or rs_annotations.get(key) == value:
            continue
        rs_annotations[key] = value
        changed = True
    return changed


def set_new_replica_set_annotations(
    d: Obj,
    rs_annotations: MutableMapping[str, str],
    new_revision: int,
    *,
    exists: bool,
    history_limit_chars: int = REVISION_HISTORY_LIMIT_CHARS,
) -> bool:
    """`SetNewReplicaSetAnnotations`: copy annotations, raise the revision, keep revision history.

    A new ReplicaSet's revision only ever grows. When an existing one gets a higher revision it
    is being rolled back to, and its previous revision goes into `revision-history` (trimmed to
    `history_limit_chars`, oldest first).
    """
    changed = copy_deployment_annotations_to_replica_set(d, rs_annotations)
    old_raw = rs_annotations.get(REVISION_ANNOTATION)
    had_revision = old_raw is not None
    old_revision = parse_int(old_raw or "")
    if old_revision is None:
        if old_raw:
            # Go gives up here and reports no change, whatever the copy above changed.
            return False
        old_revision = 0
    if old_revision < new_revision:
        rs_annotations[REVISION_ANNOTATION] = str(new_revision)
        changed = True
        if had_revision:
            # Rolled back to: keep the revisions this ReplicaSet served before.
            history = rs_annotations.get(REVISION_HISTORY_ANNOTATION, "")
            old_revisions = history.split(",")
            if not old_revisions[0]:
                rs_annotations[REVISION_HISTORY_ANNOTATION] = old_raw or ""
            else:
                total = len(history) + len(old_raw or "") + 1
                start = 0
                while total > history_limit_chars and start < len(old_revisions):
                    total -= len(old_revisions[start]) + 1
                    start += 1
                if total <= history_limit_chars:
                    rs_annotations[REVISION_HISTORY_ANNOTATION] = ",".join(
                        [*old_revisions[start:], old_raw or ""]
                    )
    if not exists and set_replicas_annotations(rs_annotations, replicas(d), replicas(d) + max_surge(d)):
        changed = True
    return changed


def set_replicas_annotations(
    rs_annotations: MutableMapping[str, str], desired: int, max_replicas: int
) -> bool:
    """Record the Deployment size (and size + surge) this ReplicaSet was last scaled for."""
    changed = False
    for key, value in (
        (DESIRED_REPLICAS_ANNOTATION, str(desired)),
        (MAX_REPLICAS_ANNOTATION, str(max_replicas)),
    ):
        if rs_annotations.get(key) != value:
            rs_annotations[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs: Obj, desired: int, max_replicas: int) -> bool:
    ann = annotations_of(rs)
    return ann.get(DESIRED_REPLICAS_ANNOTATION) != str(desired) or ann.get(MAX_REPLICAS_ANNOTATION) != str(
        max_replicas
    )


def _int_annotation(obj: Obj, key: str) -> int | None:
    """`getNonNegativeInt32FromAnnotation`: a decimal in [0, MaxInt32], else absent.

    Go parses with `strconv.ParseUint(v, 10, 32)` and refuses what exceeds MaxInt32, so a
    sign, spaces, underscores, a negative or an overflowing value all count as no annotation;
    Python's `int()` would accept the first three and let a hand-edited negative
    `max-replicas` make proportional scaling divide by a negative number.
    """
    raw = annotations_of(obj).get(key)
    if raw is None or not raw.isascii() or not raw.isdigit():
        return None
    value = int(raw)
    return value if value <= MAX_INT32 else None


def desired_replicas_annotation(rs: Obj) -> int | None:
    return _int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)


def max_replicas_annotation(rs: Obj) -> int | None:
    return _int_annotation(rs, MAX_REPLICAS_ANNOTATION)


# -- proportional scaling -------------------------------------------------------------------


def _round_half_away(value: float) -> int:
    """`integer.RoundToInt32`: round half away from zero."""
    return int(value + 0.5) if value >= 0 else int(value - 0.5)


def replica_set_fraction(rs: Obj, d: Obj) -> int:
    """`getReplicaSetFraction`: how many replicas `rs` gains (or loses) in a proportional scale."""
    if replicas(d) == 0:
        return -replicas(rs)
    deployment_max = replicas(d) + max_surge(d)
    before = max_replicas_annotation(rs)
    if not before:
        # No annotation (someone created the ReplicaSet by hand): fall back to the current size.
        before = status_int(d, "replicas")
        if before == 0:
            return 0
    new_size = replicas(rs) * deployment_max / before
    return _round_half_away(new_size) - replicas(rs)


def get_proportion(rs: Obj | None, d: Obj, to_add: int, added: int) -> int:
    """`GetProportion`: this ReplicaSet's share of `to_add`, never overshooting what is left."""
    if rs is None or replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_sizes(d: Obj, active_rss: Sequence[Obj]) -> dict[str, int]:
    """The body of `scale()` for a rolling Deployment with several active ReplicaSets.

    Spreads the difference between the allowed size (replicas + surge) and the current total
    over the active ReplicaSets in proportion to their size (larger first; newer first when
    scaling up, older first when scaling down), the leftover going to the first one.
    """
    total = sum(replicas(rs) for rs in active_rss)
    allowed = replicas(d) + max_surge(d) if replicas(d) > 0 else 0
    to_add = allowed - total
    ordered = list(active_rss)
    if to_add > 0:
        ordered.sort(key=lambda rs: (-replicas(rs), _newer_key(rs)))
    elif to_add < 0:
        ordered.sort(key=lambda rs: (-replicas(rs), creation_key(rs)))
    sizes: dict[str, int] = {}
    added = 0
    for rs in ordered:
        if to_add != 0:
            proportion = get_proportion(rs, d, to_add, added)
            sizes[name_of(rs)] = replicas(rs) + proportion
            added += proportion
        else:
            sizes[name_of(rs)] = replicas(rs)
    if ordered and to_add != 0:
        first = name_of(ordered[0])
        sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


# -- the pod-template hash ------------------------------------------------------------------

_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv32a(data: bytes, h: int = _FNV32_OFFSET) -> int:
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode(s: str) -> str:
    """`rand.SafeEncodeString`: map each character onto consonants and digits (no bad words)."""
    return "".join(_SAFE_ALPHANUMS[ord(c) % len(_SAFE_ALPHANUMS)] for c in s)


def compute_hash(template: Obj, collision_count: int | None) -> str:
    """`controller.ComputeHash`: FNV-32a of the pod template plus the collision count.

    Kubernetes hashes Go's `%#v`-style deep dump of the typed template (`hashutil.DeepHashObject`),
    which Python cannot reproduce byte for byte, so the hash here is taken over a canonical JSON
    (sorted keys, no whitespace) of the template. Names therefore differ from the ones KCM would
    pick for the same template, but keep every property that matters: stable across restarts,
    equal templates give equal hashes, and `status.collisionCount` (appended as 8 bytes with the
    little-endian uint32 first, as Go writes it) moves the name away from a colliding ReplicaSet.
    """
    h = fnv32a(orjson.dumps(template, option=orjson.OPT_SORT_KEYS))
    if collision_count is not None:
        h = fnv32a(struct.pack("<I", collision_count & 0xFFFFFFFF) + b"\0\0\0\0", h)
    return safe_encode(str(h))


def semantic(value: Any) -> Any:
    """A JSON value as Go's typed `apiequality.Semantic.DeepEqual` sees it: a null, an empty
    map or list and an absent field are the same (a zero struct or nil map decodes from each),
    so they are all dropped. Clients that send a template through Go types (kubectl rollout
    undo) add `creationTimestamp: null` and `resources: {}`; the stored one may lack them."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = semantic(item)
            if item is not None and item != {} and item != []:
                out[key] = item
        return out
    if isinstance(value, list):
        return [semantic(item) for item in value]
    return value


def _template_without_hash(template: Obj | None) -> dict[str, Any]:
    """`semantic` builds new containers, so the cached template is never copied whole: only the
    three levels down to the labels are, to drop the hash label before normalizing."""
    t = dict(template or {})
    metadata = t.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("labels"), dict):
        labels = dict(metadata["labels"])
        labels.pop(POD_TEMPLATE_HASH_LABEL, None)
        t["metadata"] = {**metadata, "labels": labels}
    normal: dict[str, Any] = semantic(t)
    return normal


def equal_ignore_hash(t1: Obj | None, t2: Obj | None) -> bool:
    """`EqualIgnoreHash`: templates semantically equal once the `pod-template-hash` label is ignored."""
    return _template_without_hash(t1) == _template_without_hash(t2)


def template_of(obj: Obj) -> Obj:
    return (obj.get("spec") or {}).get("template") or {}


# -- finding ReplicaSets --------------------------------------------------------------------


def creation_key(obj: Obj) -> tuple[str, str]:
    """`ReplicaSetsByCreationTimestamp`: oldest first, ties by name."""
    ts = parse_time(meta(obj).get("creationTimestamp"))
    return (ts.isoformat() if ts else "", name_of(obj))


class _Descending:
    """A name that sorts backwards, for the "newest first" orders."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __lt__(self, other: _Descending) -> bool:
        return self.name > other.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.name == other.name

    def __hash__(self) -> int:
        return hash(self.name)


def _newer_key(obj: Obj) -> tuple[float, _Descending]:
    """`ReplicaSetsByCreationTimestamp` reversed: newest first, and so ties by name backwards."""
    ts = parse_time(meta(obj).get("creationTimestamp"))
    return (-(ts.timestamp() if ts else float("-inf")), _Descending(name_of(obj)))


def revision_key(obj: Obj) -> tuple[int, tuple[str, str]]:
    """`ReplicaSetsByRevision`: lowest revision first, ties by creation."""
    return (revision(obj), creation_key(obj))


def find_new_replica_set(d: Obj, rss: Iterable[Obj]) -> Obj | None:
    """`FindNewReplicaSet`: the oldest ReplicaSet whose template equals the Deployment's."""
    wanted = _template_without_hash(template_of(d))
    for rs in sorted(rss, key=creation_key):
        if _template_without_hash(template_of(rs)) == wanted:
            return rs
    return None


def find_old_replica_sets(new_rs: Obj | None, rss: Iterable[Obj]) -> list[Obj]:
    new_uid = uid_of(new_rs) if new_rs is not None else None
    return [rs for rs in rss if uid_of(rs) != new_uid]


def filter_active(rss: Iterable[_O | None]) -> list[_O]:
    """`FilterActiveReplicaSets`: ReplicaSets with replicas > 0."""
    return [rs for rs in rss if rs is not None and replicas(rs) > 0]


def find_active_or_latest(new_rs: _O | None, old_rss: Sequence[_O]) -> _O | None:
    """`FindActiveOrLatest`: the only active ReplicaSet, else the newest when none is active."""
    if new_rs is None and not old_rss:
        return None
    newest_first = sorted(old_rss, key=creation_key, reverse=True)
    active = filter_active([*newest_first, new_rs])
    if len(active) == 0:
        return new_rs if new_rs is not None else newest_first[0]
    if len(active) == 1:
        return active[0]
    return None


def replica_count(rss: Iterable[Obj | None]) -> int:
    return sum(replicas(rs) for rs in rss if rs is not None)


def actual_replica_count(rss: Iterable[Obj | None]) -> int:
    return sum(status_int(rs, "replicas") for rs in rss if rs is not None)


def ready_replica_count(rss: Iterable[Obj | None]) -> int:
    return sum(status_int(rs, "readyReplicas") for rs in rss if rs is not None)


def available_replica_count(rss: Iterable[Obj | None]) -> int:
    return sum(status_int(rs, "availableReplicas") for rs in rss if rs is not None)


def is_saturated(d: Obj, rs: Obj | None) -> bool:
    """`IsSaturated`: the new ReplicaSet alone runs the whole Deployment, all available."""
    if rs is None:
        return False
    # `strconv.Atoi`, not the non-negative parse the scaler uses: a sign is accepted here.
    desired = parse_int(annotations_of(rs).get(DESIRED_REPLICAS_ANNOTATION, ""))
    return (
        desired == replicas(d)
        and replicas(rs) == replicas(d)
        and status_int(rs, "availableReplicas") == replicas(d)
    )


def new_rs_new_replicas(d: Obj, all_rss: Sequence[Obj | None], new_rs: Obj) -> int:
    """`NewRSNewReplicas`: how far the new ReplicaSet may grow now."""
    if not is_rolling_update(d):
        return replicas(d)
    surge = max_surge(d)
    current = replica_count(all_rss)
    max_total = replicas(d) + surge
    if current >= max_total:
        return replicas(new_rs)
    scale_up = min(max_total - current, replicas(d) - replicas(new_rs))
    return replicas(new_rs) + scale_up
