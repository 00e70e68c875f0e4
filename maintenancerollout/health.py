"""Whether a node and the workloads it carried are healthy again, read from cached objects.

A rolling maintenance must not take the next node while the last one is still coming back, or
while an app it moved is short of replicas: that is how a "one node at a time" patch run turns
into an outage. These checks are pure functions over the objects the controller's caches hold,
so they cost no request and read the same whether the manager just started or ran for weeks.

- A node is healthy when `Ready=True` and it carries neither `node.kubernetes.io/unreachable` nor
  `node.kubernetes.io/not-ready` (the node lifecycle controller lifts them a moment after Ready
  turns True; a pod scheduled in between would be evicted again).
- A workload is back when it has as many available replicas as it wants: `availableReplicas`
  against `spec.replicas` for Deployments and ReplicaSets, `availableReplicas` (or
  `readyReplicas` on servers that predate it) for StatefulSets, `numberAvailable` against
  `desiredNumberScheduled` for DaemonSets. A workload deleted meanwhile is not waited for: there
  is nothing left to come back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]
# (kind, namespace, name) -> the object from a cache, or None.
Lookup = Callable[[str, str, str], Obj | None]

UNHEALTHY_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet")


@dataclass(frozen=True, slots=True)
class Verdict:
    healthy: bool
    message: str


def node_health(node: Obj | None) -> Verdict:
    """`Ready=True` and untainted by the node lifecycle controller, with what is wrong otherwise."""
    if node is None:
        return Verdict(False, "the node does not exist")
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        why = (ready or {}).get("message") or (ready or {}).get("reason") or "no Ready condition"
        state = (ready or {}).get("status") or "Unknown"
        return Verdict(False, f"Ready={state}: {why}")
    taints = sorted(
        {
            str(t.get("key"))
            for t in (node.get("spec") or {}).get("taints") or []
            if t.get("key") in UNHEALTHY_TAINTS
        }
    )
    if taints:
        return Verdict(False, f"Ready, but still tainted {', '.join(taints)}")
    return Verdict(True, "Ready")


def boot_id(node: Obj | None) -> str:
    """`status.nodeInfo.bootID`: a new one means the machine restarted."""
    if node is None:
        return ""
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")


def workload_ref(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def parse_ref(ref: str) -> tuple[str, str, str] | None:
    parts = ref.split("/", 2)
    if len(parts) != 3 or parts[0] not in WORKLOAD_KINDS or not parts[2]:
        return None
    return parts[0], parts[1], parts[2]


def _controller(obj: Obj) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def workloads_of(pods: Iterable[Obj], lookup: Lookup) -> tuple[str, ...]:
    """The workloads behind `pods`, as `Kind/namespace/name`: a ReplicaSet's pods count for its
    Deployment when it has one, since that is what users scale and watch."""
    found: set[str] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        ref = _controller(pod)
        if ref is None:
            continue
        kind, name, ns = (
            str(ref.get("kind") or ""),
            str(ref.get("name") or ""),
            str(meta.get("namespace") or ""),
        )
        if kind == "ReplicaSet":
            rs = lookup("ReplicaSet", ns, name)
            parent = _controller(rs) if rs is not None else None
            if parent is not None and parent.get("kind") == "Deployment":
                kind, name = "Deployment", str(parent.get("name") or "")
        if kind in WORKLOAD_KINDS and name:
            found.add(workload_ref(kind, ns, name))
    return tuple(sorted(found))


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def available(kind: str, obj: Obj) -> tuple[int, int]:
    """(available, desired) as its own status counts them."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if kind == "DaemonSet":
        return _int(status.get("numberAvailable")), _int(status.get("desiredNumberScheduled"))
    desired = _int(spec.get("replicas"), 1)
    if kind == "StatefulSet":
        have = status.get("availableReplicas")
        return (_int(have) if have is not None else _int(status.get("readyReplicas"))), desired
    return _int(status.get("availableReplicas")), desired


def workloads_health(refs: Iterable[str], lookup: Lookup) -> Verdict:
    """Every workload in `refs` at its desired available count (deleted ones are not waited for)."""
    short: list[str] = []
    checked = 0
    for ref in refs:
        parsed = parse_ref(ref)
        if parsed is None:
            continue
        kind, ns, name = parsed
        obj = lookup(kind, ns, name)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            continue
        checked += 1
        have, want = available(kind, obj)
        if have < want:
            short.append(f"{kind} {ns}/{name} {have}/{want} available")
    if short:
        more = f" (and {len(short) - 5} more)" if len(short) > 5 else ""
        return Verdict(False, "; ".join(short[:5]) + more)
    return Verdict(True, f"{checked} workloads at their desired available count")
