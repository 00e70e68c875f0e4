"""core/v1 PersistentVolumes and PersistentVolumeClaims: `SetDefaults_PersistentVolume(Claim)`,
the validation clients hit, and kubectl's columns. Binding is done by `localcluster.volumebinder`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from localcluster.builtin.base import SpecStrategy, columns, get_path
from localcluster.registry import FieldError, Obj, TableColumn

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_CLAIM_SPEC_IMMUTABLE = "spec is immutable after creation except resources.requests for bound claims"
_SHORT_MODES = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def access_modes_text(modes: Any) -> str:
    return ",".join(_SHORT_MODES.get(m, m) for m in modes or [])


def _validate_modes(modes: Any, path: str) -> list[FieldError]:
    if not modes:
        return [FieldError.required(path)]
    return [FieldError.not_supported(path, m, ACCESS_MODES) for m in modes if m not in ACCESS_MODES]


class _StorageStrategy(SpecStrategy, ABC):
    """What volumes and claims share: both are born Pending (the binder moves them on), default
    to a Filesystem volume mode and must name their access modes."""

    has_status_subresource = True
    tracks_generation = False
    initial_status = {"phase": "Pending"}
    # Defaults set before `volumeMode`, in the order Kubernetes' defaulting writes them.
    spec_defaults: tuple[tuple[str, str], ...] = ()

    def default_spec(self, spec: dict[str, Any]) -> None:
        for key, value in self.spec_defaults:
            spec.setdefault(key, value)
        spec.setdefault("volumeMode", "Filesystem")

    def validate_spec(self, spec: dict[str, Any], obj: Obj, old: Obj | None) -> list[FieldError]:
        return _validate_modes(spec.get("accessModes"), "spec.accessModes") + self.validate_volume(spec, old)

    @abstractmethod
    def validate_volume(self, spec: dict[str, Any], old: Obj | None) -> list[FieldError]:
        """What the kind checks beyond the access modes."""


class PersistentVolumeStrategy(_StorageStrategy):
    kind = "PersistentVolume"
    spec_defaults = (("persistentVolumeReclaimPolicy", "Retain"),)

    def validate_volume(self, spec: dict[str, Any], old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        if not get_path(spec, "capacity", "storage"):
            errs.append(FieldError.required("spec.capacity"))
        policy = spec.get("persistentVolumeReclaimPolicy")
        if policy not in ("Retain", "Recycle", "Delete"):
            errs.append(
                FieldError.not_supported(
                    "spec.persistentVolumeReclaimPolicy", policy, ("Delete", "Recycle", "Retain")
                )
            )
        sources = [
            k
            for k in spec
            if k
            in (
                "hostPath",
                "local",
                "nfs",
                "csi",
                "iscsi",
                "fc",
                "gcePersistentDisk",
                "awsElasticBlockStore",
                "azureDisk",
                "azureFile",
                "cephfs",
                "rbd",
                "flexVolume",
            )
        ]
        if not sources:
            errs.append(FieldError.required("spec", "must specify a volume type"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        claim = spec.get("claimRef") or {}
        cols = columns(
            ("Capacity", "string"),
            ("Access Modes", "string"),
            ("Reclaim Policy", "string"),
            ("Status", "string"),
            ("Claim", "string"),
            ("StorageClass", "string"),
            ("Reason", "string"),
            ("Age", "string"),
            ("VolumeMode", "string", 1),
        )
        return cols, [
            str(get_path(spec, "capacity", "storage", default="")),
            access_modes_text(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""),
            status.get("phase", ""),
            f"{claim['namespace']}/{claim['name']}" if claim.get("name") else "",
            spec.get("storageClassName", ""),
            status.get("reason", ""),
            None,
            spec.get("volumeMode", ""),
        ]


class PersistentVolumeClaimStrategy(_StorageStrategy):
    kind = "PersistentVolumeClaim"

    def validate_volume(self, spec: dict[str, Any], old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        if not get_path(spec, "resources", "requests", "storage"):
            errs.append(FieldError.required("spec.resources[storage]"))
        if old is not None:
            old_spec = old.get("spec") or {}
            for key in ("accessModes", "selector", "storageClassName", "volumeMode"):
                if spec.get(key) != old_spec.get(key):
                    errs.append(FieldError.forbidden("spec", _CLAIM_SPEC_IMMUTABLE))
                    break
            if spec.get("volumeName") != old_spec.get("volumeName") and old_spec.get("volumeName"):
                errs.append(FieldError.forbidden("spec", _CLAIM_SPEC_IMMUTABLE))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        bound = status.get("phase") == "Bound"
        cols = columns(
            ("Status", "string"),
            ("Volume", "string"),
            ("Capacity", "string"),
            ("Access Modes", "string"),
            ("StorageClass", "string"),
            ("Age", "string"),
            ("VolumeMode", "string", 1),
        )
        return cols, [
            status.get("phase", ""),
            spec.get("volumeName", ""),
            str(get_path(status, "capacity", "storage", default="")) if bound else "",
            access_modes_text(status.get("accessModes")) if bound else "",
            spec.get("storageClassName", ""),
            None,
            spec.get("volumeMode", ""),
        ]
