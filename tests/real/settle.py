"""When a side has finished reacting to a step, with pods becoming Ready one at a time.

Two clusters given the same change make the same writes only if they see the same events in the
same order: a rolling update scales in one step or two depending on whether two pods turned Ready
before or between two syncs, and each step bumps a ReplicaSet's generation. So the kubelets gate
readiness (`ApiKubelets(gate_readiness=True)`) and `settle` paces them: wait until the side is
quiet, let one pod pass its readiness probe (the same pod on both sides, chosen by its normalized
key), and again, until none is waiting.

"Quiet" is what the controllers publish: each Deployment, ReplicaSet and PDB has observed its
generation; a ReplicaSet's status counts exactly its pods and has its wanted replicas; a
Deployment's status sums its ReplicaSets'; no pod is unscheduled, starting or (unless the story
stops a kubelet, which leaves pods terminating for good) terminating; and the normalized view
has not changed for a short while. At the end `until` (a step's own condition) must hold; by
default, that every Deployment is complete, paused or past its progress deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

from apiclient import KubeClient
from realcluster import ApiKubelets
from tests.real.normalize import Raw, normalize, observe, pod_key

Obj = dict[str, Any]


def _owned(raw: Raw, owner: Obj, items: list[Obj]) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    return [
        o
        for o in items
        if any(
            r.get("uid") == uid and r.get("controller") for r in o["metadata"].get("ownerReferences") or []
        )
    ]


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _quiet(raw: Raw, *, allow_terminating: bool) -> bool:
    for obj in (*raw.deployments, *raw.replica_sets, *raw.pdbs):
        if (obj.get("status") or {}).get("observedGeneration") != obj["metadata"].get("generation"):
            return False
    for pod in raw.pods:
        if pod["metadata"].get("deletionTimestamp"):
            if not allow_terminating:
                return False
        elif (pod.get("status") or {}).get("phase") not in ("Running", "Succeeded", "Failed"):
            return False
    for rs in raw.replica_sets:
        st = rs.get("status") or {}
        pods = [p for p in _owned(raw, rs, raw.pods) if not p["metadata"].get("deletionTimestamp")]
        if (
            int(st.get("replicas") or 0) != len(pods)
            or len(pods) != int(rs["spec"].get("replicas", 1))
            or int(st.get("readyReplicas") or 0) != sum(map(_ready, pods))
        ):
            return False
    for d in raw.deployments:
        st, sets = d.get("status") or {}, _owned(raw, d, raw.replica_sets)
        for field in ("replicas", "readyReplicas", "availableReplicas"):
            if int(st.get(field) or 0) != sum(int((rs.get("status") or {}).get(field) or 0) for rs in sets):
                return False
    return True


def _done(raw: Raw) -> bool:
    for d in raw.deployments:
        spec, st = d["spec"], d.get("status") or {}
        timed_out = any(
            c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded"
            for c in st.get("conditions") or []
        )
        want = int(spec.get("replicas", 1))
        complete = all(
            int(st.get(f) or 0) == want for f in ("replicas", "updatedReplicas", "availableReplicas")
        )
        if not (spec.get("paused") or timed_out or complete):
            return False
    return True


def _waiting(raw: Raw, kubelets: ApiKubelets, namespace: str) -> list[tuple[str, str]]:
    """Gated pods of this namespace, by normalized key: the order is the same on both sides."""
    names = {p["metadata"]["name"]: p for p in raw.pods if not p["metadata"].get("deletionTimestamp")}
    held = [name for ns, name in list(kubelets.held) if ns == namespace and name in names]
    return sorted((pod_key(raw, names[name]), name) for name in held)


async def settle(
    client: KubeClient,
    kubelets: ApiKubelets,
    namespace: str,
    *,
    nodes: bool = False,
    allow_terminating: bool = False,
    until: Callable[[Raw], bool] | None = None,
    quiet: float = 0.4,
    final_quiet: float = 1.0,
    timeout: float = 90.0,
    every: float = 0.1,
) -> dict[str, Any]:
    """The normalized view once every gated pod is Ready, everything is quiet and `until` holds.

    Between releases `quiet` is enough: a reaction in flight shows as a status that does not add
    up yet. The end state waits `final_quiet`, for the PDBs, which nothing else waits on."""
    last: dict[str, Any] | None = None
    since = 0.0
    raw: Raw | None = None
    try:
        with anyio.fail_after(timeout):
            while True:
                raw = await observe(client, namespace, nodes=nodes)
                if _quiet(raw, allow_terminating=allow_terminating):
                    view = normalize(raw)
                    now = time.monotonic()
                    if view != last:
                        last, since = view, now
                    elif now - since >= quiet:
                        waiting = _waiting(raw, kubelets, namespace)
                        if waiting:
                            kubelets.release(namespace, waiting[0][1])
                            last = None
                        elif now - since >= final_quiet and (until(raw) if until is not None else _done(raw)):
                            return view
                else:
                    last = None
                await anyio.sleep(every)
    except TimeoutError:
        raise AssertionError(
            f"{namespace} did not settle in {timeout:.0f} s; last seen: "
            f"{normalize(raw) if raw is not None else None}"
        ) from None
