"""`aiokcm drain --dry-run`: what would happen to each pod, and why, without changing anything.

With the NodeMaintenance API the answer comes from the controller's own rules
(`controllers.nodemaintenance.drain.preview`): the pod's owner is looked up with a few GETs (its
ReplicaSet, that one's Deployment, a StatefulSet), the same objects the controller reads from its
caches. Without the API it is `kubectl drain`'s filters, as the fallback applies them. Either way
the PodDisruptionBudgets that cover a pod are named, since they decide when an eviction goes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from apiclient import ApiError, KubeClient
from apiclient.resources import (
    DAEMONSETS,
    DEPLOYMENTS,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    STATEFULSETS,
    Resource,
)
from controllers.common.controller_ref import get_controller_of
from controllers.nodemaintenance.drain import DrainOptions, Preview, kubectl_filter, preview
from controllers.nodemaintenance.workload import workload_of
from kubeutil.selectors import from_label_selector

Obj = Mapping[str, Any]
OWNER_KINDS: Mapping[str, Resource] = {
    "ReplicaSet": REPLICASETS,
    "Deployment": DEPLOYMENTS,
    "StatefulSet": STATEFULSETS,
    "DaemonSet": DAEMONSETS,
}


class Owners:
    """Pods' owners, listed once per kind and namespace (one request for a node's hundred pods
    rather than a GET each); None for an owner that does not exist."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._seen: dict[tuple[str, str, str], Obj | None] = {}
        self._errors: dict[tuple[str, str, str], str] = {}
        self._listed: set[tuple[str, str]] = set()

    async def fetch(self, kind: str, namespace: str, name: str) -> Obj | None:
        key = (kind, namespace, name)
        if key in self._seen:
            return self._seen[key]
        res = OWNER_KINDS.get(kind)
        obj: Obj | None = None
        if res is not None:
            if (kind, namespace) not in self._listed:
                self._listed.add((kind, namespace))
                try:
                    for item in await self.client.list_all(res, namespace=namespace):
                        self._seen[(kind, namespace, str(item["metadata"]["name"]))] = item
                except ApiError as exc:
                    if exc.status != 403:
                        raise
                    self._listed.discard((kind, namespace))  # allowed to get, not to list
            if (kind, namespace) in self._listed:
                obj = self._seen.get(key)
            else:
                try:
                    obj = await self.client.get(res, name, namespace=namespace)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            if obj is None:
                self._errors[key] = f'{res.plural}.{res.group} "{name}" not found'
        self._seen[key] = obj
        return obj

    def error(self, kind: str, namespace: str, name: str) -> str | None:
        return self._errors.get((kind, namespace, name))

    def lookup(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The synchronous view `workload_of` wants, over what `prefetch` fetched."""
        return self._seen.get((kind, namespace, name))

    async def prefetch(self, pod: Obj) -> None:
        """The pod's controller and, for a ReplicaSet, the Deployment behind it."""
        namespace = str((pod.get("metadata") or {}).get("namespace", ""))
        ref = get_controller_of(pod)
        if ref is None:
            return
        owner = await self.fetch(str(ref.get("kind")), namespace, str(ref.get("name")))
        parent = get_controller_of(owner) if owner is not None else None
        if parent is not None and parent.get("kind") == "Deployment":
            await self.fetch("Deployment", namespace, str(parent.get("name")))


async def budgets_for(client: KubeClient, pod: Obj, cache: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Names of the PodDisruptionBudgets whose selector matches `pod` (listed once per namespace)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace", ""))
    if namespace not in cache:
        cache[namespace] = await client.list_all(PODDISRUPTIONBUDGETS, namespace=namespace)
    labels = meta.get("labels") or {}
    return sorted(
        str(b["metadata"]["name"])
        for b in cache[namespace]
        if from_label_selector((b.get("spec") or {}).get("selector")).matches(labels)
    )


def _key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


async def node_pods(client: KubeClient, node: str, pod_selector: str | None) -> list[dict[str, Any]]:
    return await client.list_all(
        PODS, field_selector=f"spec.nodeName={node}", label_selector=pod_selector or None
    )


async def print_preview(
    client: KubeClient,
    nodes: Sequence[str],
    *,
    options: DrainOptions,
    timeout: float,
    out: TextIO,
    pod_selector: str | None,
    dry_run: bool = True,
    fates: dict[str, str] | None = None,
) -> dict[str, set[str]]:
    """The NodeMaintenance drain of `nodes`, pod by pod; returns the pods expected to leave, by node.

    `fates`, when given, gets each pod's expected verb (surge, evict, wait, block, skip) by key."""
    owners = Owners(client)
    pdbs: dict[str, list[dict[str, Any]]] = {}
    leaving: dict[str, set[str]] = {}
    for node in nodes:
        pods = sorted(await node_pods(client, node, pod_selector), key=_key)
        header = (
            f"node/{node} would be cordoned (dry run); {len(pods)} pods:"
            if dry_run
            else f"node/{node}: {len(pods)} pods:"
        )
        print(header, file=out)
        leaving[node] = set()
        for pod in pods:
            await owners.prefetch(pod)
            fate = preview(pod, options=options, workload=workload_of(pod, owners.lookup), timeout=timeout)
            await _print(client, out, node, pod, fate, pdbs)
            if fates is not None:
                fates[_key(pod)] = fate.verb
            if fate.verb != "skip":
                leaving[node].add(_key(pod))
    out.flush()
    return leaving


async def print_kubectl_preview(
    client: KubeClient,
    nodes: Sequence[str],
    *,
    force: bool,
    delete_emptydir_data: bool,
    ignore_daemonsets: bool,
    out: TextIO,
    pod_selector: str | None,
) -> None:
    """The fallback's (kubectl drain's) treatment of each pod on `nodes`."""
    owners = Owners(client)
    pdbs: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        pods = sorted(await node_pods(client, node, pod_selector), key=_key)
        print(f"node/{node} would be cordoned (dry run); {len(pods)} pods:", file=out)
        for pod in pods:
            error = await daemonset_error(owners, pod)
            verdict = kubectl_filter(
                pod,
                force=force,
                delete_emptydir_data=delete_emptydir_data,
                ignore_daemonsets=ignore_daemonsets,
                daemonset_error=error,
            )
            if verdict.delete:
                fate = Preview("evict", verdict.message or "evicted under its PodDisruptionBudget")
            elif verdict.kind == "Error":
                fate = Preview("block", verdict.message)
            else:
                fate = Preview("skip", verdict.message or "mirror (static) pod, managed by the kubelet")
            await _print(client, out, node, pod, fate, pdbs)
    out.flush()


async def daemonset_error(owners: Owners, pod: Obj) -> str | None:
    """kubectl's GET of a DaemonSet pod's DaemonSet: the error text, None when it exists (or n/a)."""
    ref = get_controller_of(pod)
    if ref is None or ref.get("kind") != "DaemonSet":
        return None
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    name = str(ref.get("name", ""))
    if await owners.fetch("DaemonSet", namespace, name) is not None:
        return None
    return owners.error("DaemonSet", namespace, name)


async def _print(
    client: KubeClient, out: TextIO, node: str, pod: Obj, fate: Preview, pdbs: dict[str, list[dict[str, Any]]]
) -> None:
    why = fate.why
    if fate.verb in ("evict", "wait"):
        names = await budgets_for(client, pod, pdbs)
        if names:
            why += f" (PodDisruptionBudget {', '.join(names)})"
    print(f"  {node}  {_key(pod)}  {fate.verb}: {why}", file=out)
