"""What every namespace of a real cluster holds without anyone creating it, and the
`default/kubernetes` Service.

- KCM's service-account controller (`pkg/controller/serviceaccount`): a `default`
  ServiceAccount in each active namespace, made again when deleted. (No token Secret: since
  1.24 none is generated.)
- KCM's root-CA publisher (`pkg/controller/certificates/rootcacertpublisher`): a
  `kube-root-ca.crt` ConfigMap with the cluster CA under `ca.crt` and its description
  annotation, made again when deleted and put back when its data or annotation is changed.
- kube-apiserver's bootstrap controller: the `kubernetes` Service in `default`
  (first IP of the service range, port 443 named https to the server's port), made again when
  deleted.

Each is event-driven from the namespace, service-account, config-map and service watches;
a namespace that is terminating gets nothing new.
"""

from __future__ import annotations

from collections.abc import Callable

from localcluster import errors
from localcluster.keyed import KeyedLoop, watch_storage
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj
from localcluster.storage import StoredEvent

DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the "
    "internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)
KUBERNETES_SERVICE_IP = "10.96.0.1"


def kubernetes_service(port: int) -> Obj:
    """The Service `bootstrap.Controller` keeps for the API server."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    }


class KubernetesService:
    """Keeps `default/kubernetes` (the API server's own controller, so it runs in bare clusters too)."""

    def __init__(self, objects: ObjectAPI, port: Callable[[], int]) -> None:
        self.objects = objects
        self._port = port
        self._rt = objects.registry.require("", "v1", "services")

    def ensure(self) -> None:
        if self.objects.storage.get("services", "default", "kubernetes") is not None:
            return
        try:
            self.objects.create(self._rt, "default", kubernetes_service(self._port()))
        except errors.StatusError as exc:
            if exc.code not in (403, 404, 409):
                raise

    async def run(self) -> None:
        self.ensure()
        await watch_storage(self.objects.storage, "services", self._on_service)

    def _on_service(self, ev: StoredEvent) -> None:
        if ev.type == "DELETED" and ev.namespace == "default" and ev.obj["metadata"]["name"] == "kubernetes":
            self.ensure()


class NamespaceDefaults:
    """The service-account controller and the root-CA publisher, keyed by namespace."""

    def __init__(self, objects: ObjectAPI, root_ca: str) -> None:
        self.objects = objects
        self.root_ca = root_ca
        self._sa_rt = objects.registry.require("", "v1", "serviceaccounts")
        self._cm_rt = objects.registry.require("", "v1", "configmaps")
        self.loop: KeyedLoop[str] = KeyedLoop(self.sync)

    async def run(self) -> None:
        watches = [
            ("namespaces", self._on_namespace),
            ("serviceaccounts", self._on_named(DEFAULT_SERVICE_ACCOUNT, deleted_only=True)),
            ("configmaps", self._on_named(ROOT_CA_CONFIGMAP, deleted_only=False)),
        ]
        await self.loop.watch_and_run(self.objects.storage, watches)

    def _on_namespace(self, ev: StoredEvent) -> None:
        if ev.type != "DELETED":
            self.loop.add(ev.obj["metadata"]["name"])

    def _on_named(self, name: str, *, deleted_only: bool) -> Callable[[StoredEvent], None]:
        marker = f'"name":"{name}"'.encode()

        def handle(ev: StoredEvent) -> None:
            if (
                (ev.type == "DELETED" or not deleted_only)
                and marker in ev.raw
                and ev.obj["metadata"]["name"] == name
            ):
                self.loop.add(ev.namespace)

        return handle

    def sync(self, namespace: str) -> float | None:
        storage = self.objects.storage
        entry = storage.get("namespaces", "", namespace)
        if entry is None:
            return None
        ns = entry.load()
        if (
            ns["metadata"].get("deletionTimestamp")
            or (ns.get("status") or {}).get("phase", "Active") != "Active"
        ):
            return None
        try:
            self._ensure_service_account(namespace)
            self._ensure_root_ca(namespace)
        except errors.StatusError as exc:
            if exc.code == 409:
                return 0.05
            if exc.code not in (403, 404):
                return 5.0  # refused otherwise: try again later, never crash the cluster
        return None

    def ensure_default_service_account(self, namespace: str) -> None:
        """This controller's work for one namespace, done now: what the ServiceAccount admission
        plugin waits for when a pod comes before `default` does (nothing in a namespace that is
        missing or terminating)."""
        entry = self.objects.storage.get("namespaces", "", namespace)
        if entry is None:
            return
        ns = entry.load()
        if (
            ns["metadata"].get("deletionTimestamp")
            or (ns.get("status") or {}).get("phase", "Active") != "Active"
        ):
            return
        self._ensure_service_account(namespace)

    def _ensure_service_account(self, namespace: str) -> None:
        if self.objects.storage.get("serviceaccounts", namespace, DEFAULT_SERVICE_ACCOUNT) is None:
            self.objects.create(self._sa_rt, namespace, {"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}})

    def _ensure_root_ca(self, namespace: str) -> None:
        data = {"ca.crt": self.root_ca}
        entry = self.objects.storage.get("configmaps", namespace, ROOT_CA_CONFIGMAP)
        if entry is None:
            self.objects.create(
                self._cm_rt,
                namespace,
                {
                    "metadata": {
                        "name": ROOT_CA_CONFIGMAP,
                        "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
                    },
                    "data": data,
                },
            )
            return
        cm = entry.load()
        annotations = cm["metadata"].get("annotations") or {}
        if cm.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        cm["data"] = data
        cm["metadata"]["annotations"] = {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}
        self.objects.update(self._cm_rt, namespace, ROOT_CA_CONFIGMAP, cm)
