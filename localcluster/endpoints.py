"""The Endpoints and EndpointSlice controllers, simulated in-process as KCM runs them
(`pkg/controller/endpoint`, `pkg/controller/endpointslice`).

For every Service with a selector, the pods it selects that have an IP (not terminal) are
published twice, as the two controllers do:
- the Endpoints object named after the Service: Ready pods under `addresses`, the others under
  `notReadyAddresses`, the Service's ports with each `targetPort` resolved (a named port from
  the pod's containers);
- one EndpointSlice (`<service>-<suffix>`, labels `kubernetes.io/service-name` and
  `endpointslice.kubernetes.io/managed-by`, owned by the Service) with each pod's address and
  `ready` / `serving` / `terminating` conditions.
Each is written only when it changed; a Service losing its selector loses both (the slice by
the controller, the Endpoints likewise), and a deleted Service's go with it through the garbage
collector (slices) or at once (Endpoints, as the endpoints controller deletes them).

Not simulated: slices of more than one address family or over 100 endpoints (one slice holds
all), topology hints, `publishNotReadyAddresses` of headless services is honoured for
Endpoints only.
"""

from __future__ import annotations

from typing import Any

from kubeutil import selectors
from localcluster import errors, podstate
from localcluster.builtin.base import get_path
from localcluster.keyed import KeyedLoop, retry_after
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj, ResourceType
from localcluster.revisions import controller_ref
from localcluster.storage import StoredEvent

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
Key = tuple[str, str]


def _target_port(service_port: Obj, pod: Obj) -> int | None:
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in get_path(pod, "spec", "containers", default=[]):
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == service_port.get(
                "protocol", "TCP"
            ):
                return int(port.get("containerPort", 0))
    return None


def _target_ref(pod: Obj) -> Obj:
    meta = pod["metadata"]
    return {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}


class EndpointsController:
    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self._svc_rt = objects.registry.require("", "v1", "services")
        self._ep_rt = objects.registry.require("", "v1", "endpoints")
        self._slice_rt = objects.registry.require("discovery.k8s.io", "v1", "endpointslices")
        self.loop: KeyedLoop[Key] = KeyedLoop(self.sync)

    async def run(self) -> None:
        await self.loop.watch_and_run(
            self.objects.storage, [("services", self._on_service), ("pods", self._on_pod)]
        )

    def _on_service(self, ev: StoredEvent) -> None:
        self.loop.add((ev.namespace, ev.obj["metadata"]["name"]))

    def _on_pod(self, ev: StoredEvent) -> None:
        for entry in self.objects.storage.iter_entries("services", ev.namespace):
            if b'"selector"' in entry.raw:
                self.loop.add((entry.namespace, entry.name))

    def sync(self, key: Key) -> float | None:
        try:
            self._sync(*key)
        except errors.StatusError as exc:
            return retry_after(exc)
        return None

    def _sync(self, namespace: str, name: str) -> None:
        entry = self.objects.storage.get("services", namespace, name)
        service = entry.load() if entry is not None else None
        selector = get_path(service, "spec", "selector")
        if service is None or not selector or service["metadata"].get("deletionTimestamp"):
            if self.objects.storage.get("endpoints", namespace, name) is not None and (
                service is None or not selector
            ):
                self._delete(self._ep_rt, namespace, name)
            for old in self._slices(namespace, name):
                self._delete(self._slice_rt, namespace, old["metadata"]["name"])
            return
        wanted = selectors.from_label_selector({"matchLabels": selector})
        pods = [
            e.load() for e in self.objects.storage.iter_entries("pods", namespace) if wanted.matches(e.labels)
        ]
        pods = [
            p
            for p in pods
            if get_path(p, "status", "podIP") and podstate.phase(p) not in ("Succeeded", "Failed")
        ]
        pods.sort(key=lambda p: p["metadata"]["name"])
        self._write_endpoints(service, pods)
        self._write_slice(service, pods)

    def _write_endpoints(self, service: Obj, pods: list[Obj]) -> None:
        meta = service["metadata"]
        publish_all = bool(get_path(service, "spec", "publishNotReadyAddresses"))
        subsets: list[Obj] = []
        for service_port in get_path(service, "spec", "ports", default=[]):
            ready: list[Obj] = []
            not_ready: list[Obj] = []
            port_number = None
            for pod in pods:
                port_number = _target_port(service_port, pod)
                if port_number is None or podstate.is_terminating(pod):
                    continue
                address = {"ip": pod["status"]["podIP"], "targetRef": _target_ref(pod)}
                if get_path(pod, "spec", "nodeName"):
                    address["nodeName"] = pod["spec"]["nodeName"]
                (ready if podstate.is_ready(pod) or publish_all else not_ready).append(address)
            if not ready and not not_ready:
                continue
            port: Obj = {"port": port_number, "protocol": service_port.get("protocol", "TCP")}
            if service_port.get("name"):
                port["name"] = service_port["name"]
            subset: Obj = {}
            if ready:
                subset["addresses"] = ready
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            subset["ports"] = [port]
            subsets.append(subset)
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "labels": dict(meta.get("labels") or {}),
            },
        }
        if subsets:
            body["subsets"] = subsets
        entry = self.objects.storage.get("endpoints", meta["namespace"], meta["name"])
        if entry is None:
            self.objects.create(self._ep_rt, meta["namespace"], body)
            return
        old = entry.load()
        if (
            old.get("subsets") == body.get("subsets")
            and (old["metadata"].get("labels") or {}) == body["metadata"]["labels"]
        ):
            return
        old["metadata"]["labels"] = body["metadata"]["labels"]
        old.pop("subsets", None)
        if subsets:
            old["subsets"] = subsets
        self.objects.update(self._ep_rt, meta["namespace"], meta["name"], old)

    def _slices(self, namespace: str, service: str) -> list[Obj]:
        return [
            e.load()
            for e in self.objects.storage.iter_entries("endpointslices.discovery.k8s.io", namespace)
            if e.labels.get(SERVICE_NAME_LABEL) == service and e.labels.get(MANAGED_BY_LABEL) == MANAGED_BY
        ]

    def _write_slice(self, service: Obj, pods: list[Obj]) -> None:
        meta = service["metadata"]
        endpoints: list[Obj] = []
        for pod in pods:
            terminating = podstate.is_terminating(pod)
            ready = podstate.is_ready(pod)
            endpoint: Obj = {
                "addresses": [pod["status"]["podIP"]],
                "conditions": {
                    "ready": ready and not terminating,
                    "serving": ready,
                    "terminating": terminating,
                },
                "targetRef": _target_ref(pod),
            }
            if get_path(pod, "spec", "nodeName"):
                endpoint["nodeName"] = pod["spec"]["nodeName"]
            endpoints.append(endpoint)
        ports: list[Obj] = []
        for service_port in get_path(service, "spec", "ports", default=[]):
            number = next((n for p in pods if (n := _target_port(service_port, p)) is not None), None)
            ports.append(
                {
                    "name": service_port.get("name", ""),
                    "protocol": service_port.get("protocol", "TCP"),
                    "port": number,
                }
            )
        labels = {
            **(meta.get("labels") or {}),
            SERVICE_NAME_LABEL: meta["name"],
            MANAGED_BY_LABEL: MANAGED_BY,
        }
        existing = self._slices(meta["namespace"], meta["name"])
        for extra in existing[1:]:
            self._delete(self._slice_rt, meta["namespace"], extra["metadata"]["name"])
        body: dict[str, Any] = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports,
        }
        if not existing:
            body["metadata"] = {
                "generateName": f"{meta['name']}-",
                "namespace": meta["namespace"],
                "labels": labels,
                "ownerReferences": [controller_ref(service)],
            }
            self.objects.create(self._slice_rt, meta["namespace"], body)
            return
        old = existing[0]
        if (
            old.get("endpoints") == endpoints
            and old.get("ports") == ports
            and old["metadata"].get("labels") == labels
        ):
            return
        old.update(endpoints=endpoints, ports=ports)
        old["metadata"]["labels"] = labels
        self.objects.update(self._slice_rt, meta["namespace"], old["metadata"]["name"], old)

    def _delete(self, rt: ResourceType, namespace: str, name: str) -> None:
        try:
            self.objects.delete(rt, namespace, name)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
