"""The PersistentVolume binder, simulated in-process (KCM's `persistentvolume-binder`) for
claims that bind at once (`volumeBindingMode: Immediate`, the only mode simulated).

A Pending claim binds to the smallest Available volume that satisfies it: the same storage
class (`""` or absent on both), every requested access mode, enough capacity, and the claim's
`spec.selector` if any (or the volume the claim names in `spec.volumeName`). Binding writes
both sides as the binder does: the volume's `claimRef` and `Bound` phase, the claim's
`volumeName`, the `pv.kubernetes.io/bind-completed` annotation and a `Bound` status with the
volume's capacity and access modes. A volume with no claim is `Available`; one whose claim is
gone is `Released`. Dynamic provisioning is not simulated: a claim with no matching volume
stays Pending.
"""

from __future__ import annotations

from decimal import Decimal

from kubeutil import selectors
from localcluster import errors, quantity
from localcluster.builtin.base import get_path
from localcluster.keyed import KeyedLoop
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj
from localcluster.storage import StoredEvent

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
_ALL = ("", "*")  # one key: every pass looks at all claims and volumes


class VolumeBinder:
    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self._pv_rt = objects.registry.require("", "v1", "persistentvolumes")
        self._pvc_rt = objects.registry.require("", "v1", "persistentvolumeclaims")
        self.loop: KeyedLoop[tuple[str, str]] = KeyedLoop(self.sync)

    async def run(self) -> None:
        watches = [("persistentvolumes", self._on_event), ("persistentvolumeclaims", self._on_event)]
        await self.loop.watch_and_run(self.objects.storage, watches)

    def _on_event(self, ev: StoredEvent) -> None:
        self.loop.add(_ALL)

    def sync(self, key: tuple[str, str]) -> float | None:
        try:
            self._sync()
        except errors.StatusError as exc:
            return 0.05 if exc.code in (404, 409) else 5.0
        return None

    def _sync(self) -> None:
        volumes = [e.load() for e in self.objects.storage.iter_entries("persistentvolumes")]
        claims = {
            (e.namespace, e.name): e.load()
            for e in self.objects.storage.iter_entries("persistentvolumeclaims")
        }
        for volume in volumes:
            ref = get_path(volume, "spec", "claimRef")
            claim = claims.get((ref.get("namespace", ""), ref.get("name", ""))) if ref else None
            if ref and claim is not None and ref.get("uid") not in (None, claim["metadata"]["uid"]):
                claim = None
            phase = "Available" if not ref else "Bound" if claim is not None else "Released"
            if get_path(volume, "status", "phase") != phase:
                volume["status"] = {"phase": phase}
                self.objects.update_status(self._pv_rt, None, volume["metadata"]["name"], volume)
        for claim in claims.values():
            if get_path(claim, "status", "phase") == "Pending" and not claim["metadata"].get(
                "deletionTimestamp"
            ):
                match = self._match(claim, volumes)
                if match is not None:
                    self._bind(match, claim)

    def _match(self, claim: Obj, volumes: list[Obj]) -> Obj | None:
        spec = claim.get("spec") or {}
        wanted = quantity.parse(get_path(spec, "resources", "requests", "storage")) or Decimal(0)
        modes = set(spec.get("accessModes") or [])
        selector = selectors.from_label_selector(spec.get("selector")) if spec.get("selector") else None
        best: tuple[Decimal, Obj] | None = None
        for volume in volumes:
            vspec = volume.get("spec") or {}
            ref = vspec.get("claimRef")
            if ref and (ref.get("namespace"), ref.get("name")) != (
                claim["metadata"]["namespace"],
                claim["metadata"]["name"],
            ):
                continue
            if spec.get("volumeName") and spec["volumeName"] != volume["metadata"]["name"]:
                continue
            if (vspec.get("storageClassName") or "") != (spec.get("storageClassName") or ""):
                continue
            if not modes <= set(vspec.get("accessModes") or []) or vspec.get(
                "volumeMode", "Filesystem"
            ) != spec.get("volumeMode", "Filesystem"):
                continue
            if selector is not None and not selector.matches(volume["metadata"].get("labels") or {}):
                continue
            size = quantity.parse(get_path(vspec, "capacity", "storage")) or Decimal(0)
            if size >= wanted and (best is None or size < best[0]):
                best = (size, volume)
        return best[1] if best is not None else None

    def _bind(self, volume: Obj, claim: Obj) -> None:
        cmeta = claim["metadata"]
        volume["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": cmeta["namespace"],
            "name": cmeta["name"],
            "uid": cmeta["uid"],
            "apiVersion": "v1",
            "resourceVersion": cmeta.get("resourceVersion", ""),
        }
        vmeta = volume["metadata"]
        annotations = vmeta.setdefault("annotations", {}) or {}
        annotations[BOUND_BY_CONTROLLER] = "yes"
        vmeta["annotations"] = annotations
        volume = self.objects.update(self._pv_rt, None, vmeta["name"], volume).load()
        volume["status"] = {"phase": "Bound"}
        self.objects.update_status(self._pv_rt, None, vmeta["name"], volume)
        claim["spec"]["volumeName"] = vmeta["name"]
        annotations = cmeta.setdefault("annotations", {}) or {}
        annotations.update({BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"})
        cmeta["annotations"] = annotations
        claim = self.objects.update(self._pvc_rt, cmeta["namespace"], cmeta["name"], claim).load()
        vspec = volume.get("spec") or {}
        claim["status"] = {
            "phase": "Bound",
            "accessModes": list(vspec.get("accessModes") or []),
            "capacity": dict(vspec.get("capacity") or {}),
        }
        self.objects.update_status(self._pvc_rt, cmeta["namespace"], cmeta["name"], claim)
