"""The ServiceAccount admission plugin's refusal: a pod naming a ServiceAccount that does not
exist is 403 Forbidden (`plugin/pkg/admission/serviceaccount`).

The real plugin looks the account up in its informer, then in the API (ten tries over one to
two seconds for `default`, which KCM's service-account controller is about to create in a new
namespace). Here that controller's work is done at once instead: a missing `default` is created
on the spot in an active namespace, which is where the real retries end up, without a pod
racing a fresh namespace. Installed only where that controller runs, as a real control plane
without it (the bare tier) disables the plugin.
"""

from __future__ import annotations

from collections.abc import Callable

from localcluster import errors
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj, ResourceType

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
DEFAULT = "default"


class ServiceAccountAdmission:
    """`ensure_default(namespace)` is the service-account controller's sync of one namespace."""

    def __init__(self, objects: ObjectAPI, ensure_default: Callable[[str], None]) -> None:
        self.objects = objects
        self._ensure_default = ensure_default

    def install(self) -> None:
        """First among the mutating plugins that read other objects, as in the real plugin order
        (before Priority and ResourceQuota)."""
        self.objects.mutating_admission.insert(0, self.admit)

    def admit(self, rt: ResourceType, obj: Obj) -> None:
        if rt.storage_key != "pods":
            return
        meta = obj["metadata"]
        if MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}):
            return  # static pods' mirrors are the kubelet's, never refused
        spec = obj.get("spec") or {}
        namespace, account = str(meta.get("namespace") or ""), str(spec.get("serviceAccountName") or DEFAULT)
        storage = self.objects.storage
        if storage.get("serviceaccounts", namespace, account) is not None:
            return
        if account == DEFAULT:
            try:
                self._ensure_default(namespace)
            except errors.StatusError:
                pass  # the namespace is going away: refused below, as the real retries end
            if storage.get("serviceaccounts", namespace, account) is not None:
                return
        # the admission runs before the name is generated: a generated pod is named by its prefix
        name = (
            str(meta.get("generateName") or meta.get("name") or "")
            if _generated(meta)
            else str(meta.get("name") or "")
        )
        raise errors.forbidden(
            "pods",
            name,
            f'error looking up service account {namespace}/{account}: serviceaccount "{account}" not found',
        )


def _generated(meta: Obj) -> bool:
    prefix = meta.get("generateName")
    name = str(meta.get("name") or "")
    return bool(prefix) and name.startswith(str(prefix)) and len(name) == len(str(prefix)) + 5
