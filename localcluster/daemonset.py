"""The DaemonSet controller, simulated in-process as KCM runs it (`pkg/controller/daemon`).

- `NodeShouldRunDaemonPod`: a node runs the daemon pod when the template's nodeName (if any),
  nodeSelector and required node affinity match it and the pod, with the tolerations every
  daemon pod gets (`AddOrUpdateDaemonPodTolerations`: not-ready and unreachable NoExecute,
  disk/memory/PID pressure and unschedulable NoSchedule, network-unavailable with
  hostNetwork), tolerates its NoSchedule and NoExecute taints. A pod already there stays while
  only NoSchedule taints are untolerated. So a cordoned node keeps, and gets, its daemon pod.
- Pods are created as KCM creates them: `<ds>-` plus a random suffix, the template's labels plus
  `controller-revision-hash` and `pod-template-generation`, a controller ownerReference, and
  node affinity `matchFields metadata.name In [node]` in place of the template's required
  terms; the scheduler binds them (it lets them onto unschedulable nodes by their toleration).
- A node with several daemon pods keeps the oldest; a failed pod is deleted and made again; a
  pod on a node that should not run one is deleted; an unbound pod for a node that is gone too.
- RollingUpdate without surge deletes old pods within maxUnavailable, unavailable ones first,
  and manage makes their replacements; with maxSurge a new pod starts beside each old one (up to
  maxSurge nodes at a time) and the old one goes once the new one is available; OnDelete leaves them.
- Status: desired/current/misscheduled/ready/available/unavailable/updated counts and
  observedGeneration, written only when they change.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
from collections.abc import Callable, Iterable
from typing import Any

from kubeutil.nodeaffinity import pod_matches_node
from kubeutil.taints import NO_EXECUTE, NO_SCHEDULE, node_taints, tolerations_tolerate_taint
from localcluster import podstate
from localcluster.builtin.apps import TEMPLATE_GENERATION
from localcluster.builtin.base import get_int
from localcluster.keyed import PodOwnerController, write_status
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj
from localcluster.revisions import Revisions, controller_ref, fnv32a, safe_encode
from localcluster.storage import StoredEvent

REVISION_LABEL = "controller-revision-hash"
TEMPLATE_GENERATION_LABEL = "pod-template-generation"

#: Seconds before a sync the API refused (an invalid pod, say) is tried again.

_DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


def _hash(data: bytes, collisions: int) -> str:
    """`controller.ComputeHash`: FNV-1a of the template, then the collision count."""
    return safe_encode(fnv32a(data + (str(collisions).encode() if collisions else b"")))


def add_daemon_tolerations(spec: Obj) -> None:
    """`AddOrUpdateDaemonPodTolerations`: each default replaces an equal one or is appended."""
    tolerations = spec.setdefault("tolerations", [])
    wanted = list(_DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append(("node.kubernetes.io/network-unavailable", "NoSchedule"))
    for key, effect in wanted:
        toleration = {"key": key, "operator": "Exists", "effect": effect}
        for i, existing in enumerate(tolerations):
            if (
                existing.get("key"),
                existing.get("operator", "Equal"),
                existing.get("value", ""),
                existing.get("effect"),
            ) == (key, "Exists", "", effect):
                tolerations[i] = toleration
                break
        else:
            tolerations.append(toleration)


def target_node(pod: Obj) -> str | None:
    """`GetTargetNodeName`: spec.nodeName, or the node its affinity's matchFields name."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchFields") or []:
            if (
                expr.get("key") == "metadata.name"
                and expr.get("operator") == "In"
                and len(expr.get("values") or []) == 1
            ):
                return str(expr["values"][0])
    return None


def should_run(template_spec: Obj, node: Obj) -> tuple[bool, bool]:
    """`NodeShouldRunDaemonPod` -> (should run, should continue running)."""
    if template_spec.get("nodeName") and template_spec["nodeName"] != node["metadata"]["name"]:
        return False, False
    spec = copy.deepcopy(template_spec)
    add_daemon_tolerations(spec)
    if not pod_matches_node(spec, node):
        return False, False
    tolerations = spec.get("tolerations") or []
    untolerated = [
        t
        for t in node_taints(node)
        if t.get("effect") in (NO_SCHEDULE, NO_EXECUTE) and not tolerations_tolerate_taint(tolerations, t)
    ]
    if untolerated:
        return False, not any(t.get("effect") == NO_EXECUTE for t in untolerated)
    return True, True


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    """`intstr.GetScaledValueFromIntOrPercent`."""
    if isinstance(value, int):
        return value
    text = str(value or "0")
    if text.endswith("%"):
        try:
            percent = int(text[:-1])
        except ValueError:
            return 0
        scaled = percent * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    try:
        return int(text)
    except ValueError:
        return 0


class DaemonSetController(PodOwnerController):
    def __init__(self, objects: ObjectAPI) -> None:
        super().__init__(
            objects, objects.registry.require("apps", "v1", "daemonsets"), "daemonset-controller"
        )
        self.revisions = Revisions(objects)
        #: What `NodeShouldRunDaemonPod` reads of each node (name, labels, taints), from the node watch.
        self._nodes: dict[str, Obj] = {}

    def _more_watches(self) -> Iterable[tuple[str, Callable[[StoredEvent], None]]]:
        return [("nodes", self._on_node)]

    def _on_node(self, ev: StoredEvent) -> None:
        """A node that comes, goes or changes its labels or taints may change every set;
        heartbeats and readiness do not (KCM's `shouldIgnoreNodeUpdate`)."""
        name = ev.obj["metadata"]["name"]
        if ev.type == "DELETED":
            changed = self._nodes.pop(name, None) is not None
        else:
            meta, spec = ev.obj["metadata"], ev.obj.get("spec") or {}
            slim = {
                "metadata": {"name": name, "labels": dict(meta.get("labels") or {})},
                "spec": {"taints": list(spec.get("taints") or [])},
            }
            changed = self._nodes.get(name) != slim
            self._nodes[name] = slim
        if changed:
            for entry in list(self.objects.storage.iter_entries(self._owner_rt.storage_key)):
                self.loop.add((entry.namespace, entry.name))

    # -- the reconcile --------------------------------------------------------------------
    def _pods_by_node(self, ds: Obj) -> dict[str | None, list[Obj]]:
        out: dict[str | None, list[Obj]] = {}
        for pod in self._pods(ds):
            out.setdefault(target_node(pod), []).append(pod)
        for pods in out.values():
            pods.sort(key=podstate.creation_order)
        return out

    def _sync(self, ds: Obj) -> float | None:
        spec = ds.get("spec") or {}
        history = self.revisions.sync(ds, hash_label=REVISION_LABEL, hash_of=_hash, annotations=True)
        digest = str(history.update["metadata"]["labels"][REVISION_LABEL])
        template_spec = (spec.get("template") or {}).get("spec") or {}
        verdicts = {name: should_run(template_spec, node) for name, node in sorted(self._nodes.items())}
        if not ds["metadata"].get("deletionTimestamp"):
            self._manage(ds, verdicts, digest)
            if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate":
                self._rolling_update(ds, verdicts, digest)
        by_node = self._pods_by_node(ds)
        again = self._write_status(ds, verdicts, by_node, digest)
        live = {history.update["metadata"]["name"]}
        hashes = {
            (p["metadata"].get("labels") or {}).get(REVISION_LABEL) for pods in by_node.values() for p in pods
        }
        live.update(
            r["metadata"]["name"]
            for r in history.revisions
            if (r["metadata"].get("labels") or {}).get(REVISION_LABEL) in hashes
        )
        self.revisions.truncate(
            history.revisions, live, get_int(ds, "spec", "revisionHistoryLimit", default=10)
        )
        return again

    def _manage(self, ds: Obj, verdicts: dict[str, tuple[bool, bool]], digest: str) -> None:
        """`manage` + `podsShouldBeOnNode`: create where missing, delete where not wanted."""
        by_node = self._pods_by_node(ds)
        to_create: list[str] = []
        to_delete: list[Obj] = []
        for node, (run, keep) in verdicts.items():
            pods = by_node.get(node, [])
            if run and not pods:
                to_create.append(node)
            elif keep:
                running = []
                for pod in pods:
                    if podstate.is_terminating(pod):
                        continue
                    if podstate.phase(pod) == "Failed":
                        to_delete.append(pod)
                    else:
                        running.append(pod)
                if not _surge(ds):
                    to_delete.extend(running[1:])  # keep the oldest
                else:
                    to_delete.extend(_surplus_with_surge(ds, running, digest))
            elif pods:
                to_delete.extend(p for p in pods if not podstate.is_terminating(p))
        for owner, pods in by_node.items():
            if owner is None or owner not in verdicts:
                to_delete.extend(
                    p
                    for p in pods
                    if not (p.get("spec") or {}).get("nodeName") and not podstate.is_terminating(p)
                )
        for node in to_create:
            self._create_pod(ds, self._new_pod(ds, node, digest))
        for pod in to_delete:
            self._delete_pod(ds, pod)

    def _rolling_update(self, ds: Obj, verdicts: dict[str, tuple[bool, bool]], digest: str) -> None:
        """`rollingUpdate` without surge: old pods go within maxUnavailable, unavailable first."""
        spec = ds.get("spec") or {}
        min_ready = get_int(ds, "spec", "minReadySeconds")
        now = dt.datetime.now(dt.UTC)
        by_node = self._pods_by_node(ds)
        desired = [n for n, (run, _) in verdicts.items() if run]
        rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
        max_surge = _scaled(rolling.get("maxSurge", 0), len(desired), round_up=True)
        max_unavailable = _scaled(rolling.get("maxUnavailable", 1), len(desired), round_up=True)
        if desired and max_unavailable == 0 and max_surge == 0:
            max_unavailable = 1
        if max_surge:
            self._rolling_update_surge(ds, verdicts, by_node, digest, max_surge)
            return
        unavailable = 0
        replace_now: list[Obj] = []
        candidates: list[Obj] = []
        for node in sorted(set(desired) | {n for n in by_node if n is not None}):
            pods = [p for p in by_node.get(node, []) if not podstate.is_terminating(p)]
            if len(pods) > 1 or not pods:
                unavailable += 1
                continue
            pod = pods[0]
            if _updated(pod, digest):
                if not podstate.is_available(pod, min_ready, now):
                    unavailable += 1
            elif not podstate.is_available(pod, min_ready, now):
                replace_now.append(pod)
            elif unavailable < max_unavailable:
                candidates.append(pod)
        budget = min(max(max_unavailable - unavailable, 0), len(candidates))
        for pod in replace_now + candidates[:budget]:
            self._delete_pod(ds, pod)

    def _rolling_update_surge(
        self,
        ds: Obj,
        verdicts: dict[str, tuple[bool, bool]],
        by_node: dict[str | None, list[Obj]],
        digest: str,
        max_surge: int,
    ) -> None:
        """`rollingUpdate` with maxSurge: a new pod beside each old one, up to maxSurge at a
        time (at once where the old one is unavailable); the old one goes when the new one is
        available. The manage loop keeps at most those two per node."""
        min_ready = get_int(ds, "spec", "minReadySeconds")
        now = dt.datetime.now(dt.UTC)
        old_to_delete: list[Obj] = []
        allowed: list[str] = []
        candidates: list[str] = []
        surging = 0
        nodes = {n for n, (run, _) in verdicts.items() if run} | {n for n in by_node if n is not None}
        for node in sorted(nodes):
            found = _updated_and_old(by_node.get(node, []), digest)
            if found is None:
                surging += 1  # excess pods: the manage loop cleans up, count it as surging
                continue
            new, old = found
            if old is None:
                continue
            if new is None:
                if not podstate.is_available(old, min_ready, now):
                    if not verdicts.get(node, (False, False))[0]:
                        old_to_delete.append(old)
                    else:
                        allowed.append(node)
                elif surging < max_surge:
                    candidates.append(node)
                continue
            if not podstate.is_available(new, min_ready, now):
                surging += 1
                continue
            old_to_delete.append(old)
        budget = min(max(max_surge - surging, 0), len(candidates))
        for node in allowed + candidates[:budget]:
            self._create_pod(ds, self._new_pod(ds, node, digest))
        for pod in old_to_delete:
            self._delete_pod(ds, pod)

    def _new_pod(self, ds: Obj, node: str, digest: str) -> Obj:
        """`CreatePodTemplate` + `ReplaceDaemonSetPodNodeNameNodeAffinity` for one node."""
        meta = ds["metadata"]
        template = copy.deepcopy((ds.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        labels = dict(tmeta.get("labels") or {})
        generation = (meta.get("annotations") or {}).get(TEMPLATE_GENERATION)
        if generation is not None:
            labels[TEMPLATE_GENERATION_LABEL] = generation
        labels[REVISION_LABEL] = digest
        pod_meta: Obj = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [controller_ref(ds)],
        }
        for key in ("annotations", "finalizers"):
            if tmeta.get(key):
                pod_meta[key] = tmeta[key]
        spec = template.get("spec") or {}
        add_daemon_tolerations(spec)
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        affinity = spec.setdefault("affinity", {})
        node_affinity = affinity.setdefault("nodeAffinity", {})
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        required["nodeSelectorTerms"] = [term]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}

    def _write_status(
        self,
        ds: Obj,
        verdicts: dict[str, tuple[bool, bool]],
        by_node: dict[str | None, list[Obj]],
        digest: str,
    ) -> float | None:
        """`updateDaemonSetStatus`; counters that are omitempty in Go are left out at zero."""
        min_ready = get_int(ds, "spec", "minReadySeconds")
        now = dt.datetime.now(dt.UTC)
        desired = current = misscheduled = ready = available = updated = 0
        wait: float | None = None
        for node, (run, _) in verdicts.items():
            pods = by_node.get(node) or []
            if not run:
                misscheduled += bool(pods)
                continue
            desired += 1
            if not pods:
                continue
            current += 1
            pod = sorted(pods, key=lambda p: (podstate.creation_order(p)[0], podstate.phase(p) != "Running"))[
                0
            ]
            if podstate.is_ready(pod):
                ready += 1
                left = podstate.available_in(pod, min_ready, now)
                if left is not None and left <= 0:
                    available += 1
                elif left is not None:
                    wait = left if wait is None else min(wait, left)
            updated += _updated(pod, digest)
        old = ds.get("status") or {}
        status: dict[str, Any] = {
            "currentNumberScheduled": current,
            "numberMisscheduled": misscheduled,
            "desiredNumberScheduled": desired,
            "numberReady": ready,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        for key, value in (
            ("updatedNumberScheduled", updated),
            ("numberAvailable", available),
            ("numberUnavailable", desired - available),
        ):
            if value:
                status[key] = value
        for key in ("collisionCount", "conditions"):
            if old.get(key) is not None:
                status[key] = old[key]
        write_status(self.objects, self._owner_rt, ds, status)
        return None if wait is None else wait + 0.01


def _surge(ds: Obj) -> bool:
    """`AllowsSurge`: a RollingUpdate with a maxSurge above 0 (counted against one node)."""
    strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return False
    return _scaled((strategy.get("rollingUpdate") or {}).get("maxSurge", 0), 1, round_up=True) > 0


def _surplus_with_surge(ds: Obj, running: list[Obj], digest: str) -> list[Obj]:
    """With surge, a node keeps its oldest updated pod and its oldest old pod, and the old one
    only while it is Ready and the updated one not yet available (`podsShouldBeOnNode`)."""
    newest: Obj | None = None
    oldest_old: Obj | None = None
    surplus: list[Obj] = []
    for pod in running:  # oldest first
        if _updated(pod, digest) and newest is None:
            newest = pod
        elif not _updated(pod, digest) and oldest_old is None:
            oldest_old = pod
        else:
            surplus.append(pod)
    if newest is not None and oldest_old is not None:
        min_ready = get_int(ds, "spec", "minReadySeconds")
        if not podstate.is_ready(oldest_old) or podstate.is_available(
            newest, min_ready, dt.datetime.now(dt.UTC)
        ):
            surplus.append(oldest_old)
    return surplus


def _updated_and_old(pods: list[Obj], digest: str) -> tuple[Obj | None, Obj | None] | None:
    """`findUpdatedPodsOnNode`: the node's live updated pod and old pod; None if it has two of either."""
    new: Obj | None = None
    old: Obj | None = None
    for pod in pods:
        if podstate.is_terminating(pod):
            continue
        if _updated(pod, digest):
            if new is not None:
                return None
            new = pod
        else:
            if old is not None:
                return None
            old = pod
    return new, old


def _updated(pod: Obj, digest: str) -> bool:
    """`IsPodUpdated`: the revision hash matches. (Go also compares `pod-template-generation`
    with `fmt.Sprint` of a *pointer*, which never matches, so the hash alone decides.)"""
    return (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) == digest
