"""What the differential suite compares: one namespace's workload objects, with only what
legitimately differs between two control planes taken out.

Two clusters given the same changes never agree on names the controllers make up (a ReplicaSet is
named after a hash of its template, and aiokcm's hash is not Go's; pods get random suffixes),
on uids, resourceVersions, managedFields or timestamps. Everything else a controller writes must
match: `metadata.generation`, revision annotations, spec.replicas it scales, every status field,
condition types, statuses, reasons and messages.

- A ReplicaSet a Deployment made is named `<deployment>[<image>|<digest>]`, the digest taken over
  its pod template without `pod-template-hash`; that name and its hash are then replaced wherever
  they appear (labels, owner references, condition messages).
- A pod the test created keeps its name; a pod a controller created is `<owner>/*`.
- Annotations under `maintenance.aiokcm.io/` are aiokcm's own (the proposal's status fields).
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODES, PODDISRUPTIONBUDGETS, PODS, REPLICASETS, Resource

Obj = dict[str, Any]
HASH_LABEL = "pod-template-hash"
OWN_ANNOTATIONS = "maintenance.aiokcm.io/"
TIME_FIELDS = ("lastUpdateTime", "lastTransitionTime", "lastHeartbeatTime", "lastProbeTime", "timeAdded")


@dataclass
class Raw:
    """One side's objects, as listed."""

    deployments: list[Obj]
    replica_sets: list[Obj]
    pdbs: list[Obj]
    pods: list[Obj]
    nodes: list[Obj]


async def observe(client: KubeClient, namespace: str, *, nodes: bool) -> Raw:
    """Each kind listed from kube-apiserver's watch cache (`resourceVersion=0`), as informers list.

    `settle` polls this ten times a second on both sides; a quorum read costs the server and etcd
    about 1.9 ms of CPU a list against 0.55 ms from the cache, which trails etcd by milliseconds,
    far inside the quiet time a view must hold before it counts."""

    async def items(res: Resource, ns: str | None = namespace) -> list[Obj]:
        return list((await client.list(res, namespace=ns, resource_version="0")).get("items") or [])

    return Raw(
        deployments=await items(DEPLOYMENTS),
        replica_sets=await items(REPLICASETS),
        pdbs=await items(PODDISRUPTIONBUDGETS),
        pods=await items(PODS),
        nodes=await items(NODES, None) if nodes else [],
    )


def _template_key(deployment: str, template: Mapping[str, Any]) -> str:
    t = copy.deepcopy(dict(template))
    labels = (t.get("metadata") or {}).get("labels") or {}
    labels.pop(HASH_LABEL, None)
    images = ",".join(c.get("image", "") for c in (t.get("spec") or {}).get("containers") or [])
    digest = hashlib.sha1(orjson.dumps(t, option=orjson.OPT_SORT_KEYS)).hexdigest()[:8]
    return f"{deployment}[{images}|{digest}]"


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _renames(raw: Raw) -> dict[str, str]:
    """Deployment-made ReplicaSet names (`<deployment>-<hash>`, owned or orphaned) and hashes ->
    stable keys, longest first."""
    names: dict[str, str] = {}
    for rs in raw.replica_sets:
        name = rs["metadata"]["name"]
        pod_hash = (rs["metadata"].get("labels") or {}).get(HASH_LABEL)
        if not pod_hash or not name.endswith("-" + pod_hash):  # not named by a Deployment
            continue
        key = _template_key(name.removesuffix("-" + pod_hash), rs["spec"]["template"])
        names[name] = key
        names[pod_hash] = f"hash({key})"
    return dict(sorted(names.items(), key=lambda kv: -len(kv[0])))


def _rename(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for old, new in names.items():
            if old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {_rename(k, names): _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


def _conditions(conditions: list[Obj] | None) -> list[Obj]:
    out = [{k: v for k, v in c.items() if k not in TIME_FIELDS} for c in conditions or []]
    return sorted(out, key=lambda c: str(c.get("type")))


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in ann.items() if not k.startswith(OWN_ANNOTATIONS)}


def _owner(obj: Mapping[str, Any]) -> str | None:
    ref = _controller(obj)
    return f"{ref['kind']}/{ref['name']}" if ref else None


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod["metadata"]
    if meta.get("generateName") and meta["name"].startswith(meta["generateName"]):
        return f"{_owner(pod) or meta['generateName']}/*"
    return str(meta["name"])


def pod_key(raw: Raw, pod: Mapping[str, Any]) -> str:
    """The pod's name if the test gave it one, else its controller's normalized name and `/*`."""
    result: str = _rename(_pod_key(pod), _renames(raw))
    return result


def normalize(raw: Raw) -> dict[str, Any]:
    """The comparable view of one side."""
    names = _renames(raw)
    out: dict[str, Any] = {"deployments": {}, "replicasets": {}, "pdbs": {}, "pods": {}, "nodes": {}}
    for d in raw.deployments:
        status = dict(d.get("status") or {})
        status["conditions"] = _conditions(status.get("conditions"))
        out["deployments"][d["metadata"]["name"]] = {
            "generation": d["metadata"].get("generation"),
            "annotations": _annotations(d),
            "status": status,
        }
    for rs in raw.replica_sets:
        status = dict(rs.get("status") or {})
        status["conditions"] = _conditions(status.get("conditions"))
        refs = [
            {k: r.get(k) for k in ("kind", "name", "controller", "blockOwnerDeletion")}
            for r in rs["metadata"].get("ownerReferences") or []
        ]
        out["replicasets"][rs["metadata"]["name"]] = {
            "generation": rs["metadata"].get("generation"),
            "annotations": _annotations(rs),
            "labels": rs["metadata"].get("labels") or {},
            "owners": refs,
            "replicas": rs["spec"].get("replicas"),
            "status": status,
        }
    for pdb in raw.pdbs:
        status = dict(pdb.get("status") or {})
        status["conditions"] = _conditions(status.get("conditions"))
        status["disruptedPods"] = len(status.get("disruptedPods") or {})
        out["pdbs"][pdb["metadata"]["name"]] = {
            "generation": pdb["metadata"].get("generation"),
            "status": status,
        }
    pods: Counter[str] = Counter()
    for pod in raw.pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        ready = next(
            (c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None
        )
        fields = {
            "owner": _owner(pod),
            "labels": meta.get("labels") or {},
            "phase": status.get("phase"),
            "ready": ready,
            "terminating": bool(meta.get("deletionTimestamp")),
        }
        if raw.nodes and not meta.get("generateName"):  # where the story pins pods to nodes
            fields["node"] = (pod.get("spec") or {}).get("nodeName")
        pods[orjson.dumps({"pod": _pod_key(pod), **fields}, option=orjson.OPT_SORT_KEYS).decode()] += 1
    out["pods"] = dict(sorted(pods.items()))
    for node in raw.nodes:
        spec, status = node.get("spec") or {}, node.get("status") or {}
        taints = sorted(
            ({k: t.get(k) for k in ("key", "value", "effect")} for t in spec.get("taints") or []),
            key=lambda t: (t["key"], t["effect"]),
        )
        out["nodes"][node["metadata"]["name"]] = {
            "taints": taints,
            "unschedulable": bool(spec.get("unschedulable")),
            "conditions": _conditions(status.get("conditions")),
        }
    result: dict[str, Any] = _rename(out, names)
    return result


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Readable paths where `got` (aiokcm) differs from `want` (KCM)."""
    if isinstance(want, dict) and isinstance(got, dict):
        diffs: list[str] = []
        for key in sorted(set(want) | set(got), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in got:
                diffs.append(f"{where}: KCM has {want[key]!r}, aiokcm nothing")
            elif key not in want:
                diffs.append(f"{where}: aiokcm has {got[key]!r}, KCM nothing")
            else:
                diffs += differences(want[key], got[key], where)
        return diffs
    return [] if want == got else [f"{path}: KCM {want!r}, aiokcm {got!r}"]
