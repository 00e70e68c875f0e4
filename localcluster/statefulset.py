"""The StatefulSet controller, simulated in-process as KCM runs it
(`pkg/controller/statefulset/stateful_set_control.go`).

- Pods have stable names `<set>-<ordinal>` for ordinals start..start+replicas-1 (`spec.ordinals`), the labels
  `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and
  `controller-revision-hash` (the name of the revision they were made from), hostname = pod name,
  subdomain = `spec.serviceName`, and a controller ownerReference.
- OrderedReady: one missing pod is created per sync, and nothing further happens until every
  lower ordinal is Running and Ready (and available, with minReadySeconds); scale-down removes
  the highest ordinal first, one at a time, each gone before the next. Parallel does all at once.
- A failed (or succeeded) pod is deleted and made again under the same name once it is gone;
  a pod deleted by anyone is made again the same way.
- Revisions: the template's history is kept in ControllerRevisions; RollingUpdate deletes pods
  not at the update revision from the highest ordinal down to `partition`, one at a time, each
  replaced before the next; OnDelete leaves them. `status.currentRevision` moves to the update
  revision when every pod is updated and Ready.
- Status carries replicas, readyReplicas, currentReplicas, updatedReplicas, availableReplicas,
  the two revisions and observedGeneration, written only when it changes.

Not simulated: volumeClaimTemplates (no PVCs are served), adoption of orphaned pods, the
PVC retention policy.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from typing import Any

from localcluster import errors, podstate
from localcluster.builtin.base import get_int
from localcluster.keyed import PodOwnerController, write_status
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj
from localcluster.revisions import Revisions, controller_ref, fnv32, safe_encode, template_of

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
#: The label `history.NewControllerRevision` puts on a StatefulSet's revisions.
HISTORY_HASH_LABEL = "controller.kubernetes.io/hash"

#: Seconds before a sync the API refused (an invalid pod, say) is tried again.


def _hash(data: bytes, collisions: int) -> str:
    """`history.HashControllerRevision`: FNV-1 of the data, then the collision count."""
    return safe_encode(fnv32(data + (str(collisions).encode() if collisions else b"")))


def ordinal_of(set_name: str, pod_name: str) -> int:
    """`getOrdinal`: the number after the set's name, or -1 for a name of another shape."""
    match = re.fullmatch(re.escape(set_name) + r"-(\d+)", pod_name)
    return int(match.group(1)) if match else -1


def start_ordinal(sts: Obj) -> int:
    """`spec.ordinals.start` (0 when absent): the first ordinal of the set's range."""
    return max(get_int(sts, "spec", "ordinals", "start"), 0)


class StatefulSetController(PodOwnerController):
    def __init__(self, objects: ObjectAPI) -> None:
        super().__init__(
            objects, objects.registry.require("apps", "v1", "statefulsets"), "statefulset-controller"
        )
        self.revisions = Revisions(objects)

    # -- the reconcile --------------------------------------------------------------------
    def _sync(self, sts: Obj) -> float | None:
        meta = sts["metadata"]
        history = self.revisions.sync(sts, hash_label=HISTORY_HASH_LABEL, hash_of=_hash)
        update = history.update
        current_name = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in history.revisions if r["metadata"]["name"] == current_name), update)
        if not meta.get("deletionTimestamp"):
            self._act(sts, current, update)
        pods = self._pods(sts)
        again = self._write_status(sts, pods, current["metadata"]["name"], update["metadata"]["name"])
        live = {current["metadata"]["name"], update["metadata"]["name"]}
        live.update(str((p["metadata"].get("labels") or {}).get(REVISION_LABEL)) for p in pods)
        self.revisions.truncate(
            history.revisions, live, get_int(sts, "spec", "revisionHistoryLimit", default=10)
        )
        return again

    def _act(self, sts: Obj, current: Obj, update: Obj) -> None:
        """One round of `updateStatefulSet`: create, wait, delete, as the policy allows."""
        meta, spec = sts["metadata"], sts.get("spec") or {}
        name = meta["name"]
        replica_count = max(get_int(sts, "spec", "replicas", default=1), 0)
        start = start_ordinal(sts)
        monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        min_ready = get_int(sts, "spec", "minReadySeconds")
        now = dt.datetime.now(dt.UTC)
        replicas: list[Obj | None] = [None] * replica_count  # index = ordinal - start
        condemned: list[Obj] = []
        pod: Obj | None  # the loops below walk both the replicas (with gaps) and the condemned
        for pod in self._pods(sts):
            ordinal = ordinal_of(name, pod["metadata"]["name"])
            if start <= ordinal < start + replica_count:
                replicas[ordinal - start] = pod
            elif ordinal >= 0:
                condemned.append(pod)
        condemned.sort(key=lambda p: ordinal_of(name, p["metadata"]["name"]))
        unhealthy = [p for p in [*replicas, *condemned] if p is not None and not self._healthy(p)]
        first_unhealthy = unhealthy[0] if unhealthy else None

        for index, pod in enumerate(replicas):
            if (
                pod is not None
                and podstate.phase(pod) in ("Failed", "Succeeded")
                and not podstate.is_terminating(pod)
            ):
                self._delete(sts, pod)
                return  # made again once it is gone
            if pod is None:
                self._create(sts, self._new_pod(sts, current, update, start + index))
                if monotonic:
                    return
                continue
            if podstate.is_terminating(pod) and monotonic:
                return
            if not podstate.is_running_and_ready(pod) and monotonic:
                return
            if monotonic and not podstate.is_available(pod, min_ready, now):
                return

        for pod in reversed(condemned):
            if podstate.is_terminating(pod):
                if monotonic:
                    return
                continue
            if not podstate.is_running_and_ready(pod) and monotonic and pod is not first_unhealthy:
                return
            self._delete(sts, pod)
            if monotonic:
                return

        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type") == "OnDelete":
            return
        partition = get_int(strategy, "rollingUpdate", "partition")
        update_name = update["metadata"]["name"]
        for index in range(replica_count - 1, partition - 1, -1):
            pod = replicas[index]
            if pod is None:
                return
            if (pod["metadata"].get("labels") or {}).get(
                REVISION_LABEL
            ) != update_name and not podstate.is_terminating(pod):
                self._delete(sts, pod)
                return
            if not self._healthy(pod):
                return

    @staticmethod
    def _healthy(pod: Obj) -> bool:
        return podstate.is_running_and_ready(pod) and not podstate.is_terminating(pod)

    def _new_pod(self, sts: Obj, current: Obj, update: Obj, ordinal: int) -> Obj:
        """`newVersionedStatefulSetPod`: below the partition from the current revision, else the update one."""
        spec = sts.get("spec") or {}
        strategy = spec.get("updateStrategy") or {}
        partition = get_int(strategy, "rollingUpdate", "partition")
        below_partition = ordinal - start_ordinal(sts) < partition
        revision = (
            current
            if strategy.get("type", "RollingUpdate") == "RollingUpdate" and below_partition
            else update
        )
        template = (
            template_of(revision) if revision is not update else copy.deepcopy(spec.get("template") or {})
        )
        name = f"{sts['metadata']['name']}-{ordinal}"
        tmeta = template.get("metadata") or {}
        labels = dict(tmeta.get("labels") or {})
        labels.update(
            {
                POD_NAME_LABEL: name,
                POD_INDEX_LABEL: str(ordinal),
                REVISION_LABEL: revision["metadata"]["name"],
            }
        )
        meta: Obj = {
            "name": name,
            "generateName": f"{sts['metadata']['name']}-",
            "namespace": sts["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [controller_ref(sts)],
        }
        for key in ("annotations", "finalizers"):
            if tmeta.get(key):
                meta[key] = copy.deepcopy(tmeta[key])
        pod_spec = copy.deepcopy(template.get("spec") or {})
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}

    def _create(self, sts: Obj, pod: Obj) -> None:
        name, set_name = pod["metadata"]["name"], sts["metadata"]["name"]
        try:
            self.objects.create(self._pod_rt, pod["metadata"]["namespace"], pod)
        except errors.StatusError as exc:
            if exc.code != 409:
                self.events.event(
                    sts,
                    "Warning",
                    "FailedCreate",
                    f"create Pod {name} in StatefulSet {set_name} failed error: {exc.message}",
                )
                raise
            return
        self.events.event(
            sts, "Normal", "SuccessfulCreate", f"create Pod {name} in StatefulSet {set_name} successful"
        )

    def _delete(self, sts: Obj, pod: Obj) -> None:
        meta = pod["metadata"]
        self.objects.delete(self._pod_rt, meta["namespace"], meta["name"], preconditions={"uid": meta["uid"]})
        self.events.event(
            sts,
            "Normal",
            "SuccessfulDelete",
            f"delete Pod {meta['name']} in StatefulSet {sts['metadata']['name']} successful",
        )

    def _write_status(self, sts: Obj, pods: list[Obj], current: str, update: str) -> float | None:
        """`computeReplicaStatus` + `completeRollingUpdate`; written only when it changed."""
        spec = sts.get("spec") or {}
        min_ready = get_int(sts, "spec", "minReadySeconds")
        now = dt.datetime.now(dt.UTC)
        counts = {
            "replicas": 0,
            "readyReplicas": 0,
            "availableReplicas": 0,
            "currentReplicas": 0,
            "updatedReplicas": 0,
        }
        wait: float | None = None
        for pod in pods:
            if not podstate.phase(pod):
                continue
            counts["replicas"] += 1
            if podstate.is_running_and_ready(pod):
                counts["readyReplicas"] += 1
                left = podstate.available_in(pod, min_ready, now)
                if left is not None and left <= 0:
                    counts["availableReplicas"] += 1
                elif left is not None:
                    wait = left if wait is None else min(wait, left)
            if not podstate.is_terminating(pod):
                revision = (pod["metadata"].get("labels") or {}).get(REVISION_LABEL)
                counts["currentReplicas"] += revision == current
                counts["updatedReplicas"] += revision == update
        if (
            (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
            and counts["updatedReplicas"] == counts["replicas"]
            and counts["readyReplicas"] == counts["replicas"]
        ):
            counts["currentReplicas"] = counts["updatedReplicas"]
            current = update
        old = sts.get("status") or {}
        status: dict[str, Any] = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": counts["replicas"],
        }
        for key in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if counts[key]:
                status[key] = counts[key]
        status["currentRevision"] = current
        status["updateRevision"] = update
        if old.get("collisionCount") is not None:
            status["collisionCount"] = old["collisionCount"]
        status["availableReplicas"] = counts["availableReplicas"]
        for cond in ("conditions",):
            if old.get(cond):
                status[cond] = old[cond]
        write_status(self.objects, self._owner_rt, sts, status)
        return None if wait is None else wait + 0.01
