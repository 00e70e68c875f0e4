"""`LocalCluster`: the embedded API server, started and stopped as an async context manager.

    async with LocalCluster(nodes=3) as cluster:
        kube = cluster.client()

One background task owns a task group for the cluster's actors (CRD and namespace controllers,
scheduler, kubelets, garbage collector, the StatefulSet and DaemonSet controllers, the
per-namespace defaults); aiohttp serves connections on the loop, writes a real kubeconfig to a
temp directory so `kubectl --kubeconfig` and `apiclient.config.build_api_client` work
unchanged, and creates the namespaces every cluster has. `nodes=N` registers N simulated
kubelets (`node-1`..`node-N`, 110 pods allocatable), or N static Ready nodes without kubelets.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import anyio
import yaml
from aiohttp import web
from anyio.abc import TaskGroup

from apiclient import KubeClient
from apiclient.config import build_api_client
from controller_manager.servingcert import CertKey, generate_self_signed, server_context
from kubeutil.timestamps import format_time, utcnow
from localcluster.admission import configuration as webhook_configuration
from localcluster.admission.caller import CallError
from localcluster.admission.dispatcher import ValidatingAdmission, user_info
from localcluster.auth.layer import USER_KEY, AuthLayer
from localcluster.auth.tokens import ADMIN_TOKEN, ANONYMOUS
from localcluster.builtin import register_builtins
from localcluster.builtin.scheduling import system_priority_classes
from localcluster.crd import CRDController
from localcluster.cronjob import CronJobController
from localcluster.daemonset import DaemonSetController
from localcluster.endpoints import EndpointsController
from localcluster.eventttl import EventTTL
from localcluster.eviction import install as install_eviction
from localcluster.faults import Faults
from localcluster.gc import GarbageCollector
from localcluster.job import JobController
from localcluster.kubelet import KubeletConfig, Kubelets, lift_not_ready_taint, node_conditions, node_labels
from localcluster.namespacedefaults import KubernetesService, NamespaceDefaults
from localcluster.namespaces import NamespaceController
from localcluster.objects import SYSTEM_NAMESPACES, ObjectAPI
from localcluster.podgc import QUARANTINE_SECONDS, PodGC
from localcluster.podlogs import install as install_logs
from localcluster.quota import Admission, QuotaController
from localcluster.registry import Registry
from localcluster.requestlog import RequestLog
from localcluster.rest import RestHandlers
from localcluster.rootca import make_root_ca
from localcluster.scheduler import Scheduler
from localcluster.server import build_app
from localcluster.serviceaccountadmission import ServiceAccountAdmission
from localcluster.statefulset import StatefulSetController
from localcluster.storage import COMPACTION_INTERVAL, DEFAULT_WINDOW, Storage
from localcluster.volumebinder import VolumeBinder


class BackgroundActor(Protocol):
    """A controller or behaviour of the cluster: `run` works until cancelled."""

    async def run(self) -> None: ...


def node_object(name: str, *, pods: int = 110) -> dict[str, Any]:
    """A Ready node no kubelet keeps alive: its conditions are the kubelet's, so a controller
    reading it cannot tell it from a registered one until its heartbeats go stale."""
    capacity = {"cpu": "8", "memory": "32Gi", "pods": str(pods), "ephemeral-storage": "100Gi"}
    conditions = node_conditions(
        ready=True, not_ready_message="", pressure={}, old=[], now=format_time(utcnow())
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels(name)},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "nodeInfo": {"kubeletVersion": "v1.32.0", "operatingSystem": "linux", "architecture": "amd64"},
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }


class LocalCluster:
    def __init__(
        self,
        *,
        nodes: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        watch_window: int = DEFAULT_WINDOW,
        bookmark_interval: float = 10.0,
        scheduler: bool = True,
        kubelets: bool = True,
        gc: bool = True,
        speed: float = 1.0,
        pod_start_delay: float = 1.0,
        termination_cap: float = 2.0,
        run_seconds: float = 1.0,
        max_pods: int = 110,
        fault_seed: int = 0,
        authz: bool = False,
        tls: bool | None = None,
        controllers: bool = True,
        pod_gc_quarantine: float = QUARANTINE_SECONDS,
        compaction_interval: float = COMPACTION_INTERVAL,
        pod_events: bool = True,
    ) -> None:
        self.nodes = nodes
        self.host = host
        self.port = port
        self.registry = Registry()
        register_builtins(self.registry)
        self.storage = Storage(window=watch_window)
        self.compaction_interval = compaction_interval
        self.event_ttl = EventTTL(self.storage)
        self.objects = ObjectAPI(self.registry, self.storage)
        self.crds = CRDController(self.registry, self.storage, self.objects)
        self.objects.on_removed.append(self._cascade_namespace)
        self.app: web.Application
        self.rest: RestHandlers
        self.app, self.rest = build_app(self.registry, self.objects, bookmark_interval=bookmark_interval)
        # Who is asking and may they (RBAC); enforced only with `authz=True`, the APIs served always.
        self.auth = AuthLayer(self.registry, self.objects, enforce=authz)
        self.auth.install(self.app, self.rest)
        # kubectl sends bearer tokens over HTTPS only: an enforcing cluster serves TLS.
        self.tls = authz if tls is None else tls
        self._serving_pair: CertKey | None = generate_self_signed() if self.tls else None
        # A living cluster: each behaviour can be switched off by a test that drives it by hand
        self.requests = RequestLog()  # outermost, so it sees the injected failures too
        self.app.middlewares.append(self.requests.middleware)
        self.faults = Faults(self, seed=fault_seed)
        self.app.middlewares.append(self.faults.middleware)
        # ValidatingWebhookConfigurations are served and their webhooks called, as kube-apiserver's
        # ValidatingAdmissionWebhook plugin (on by default there too); free while none exists
        webhook_configuration.register(self.registry)
        self.admission = ValidatingAdmission(self.registry, self.storage, self._resolve_service)
        self.rest.admission = self.admission
        self.rest.user_of = lambda request: user_info(request.get(USER_KEY, ANONYMOUS))
        self.eviction = install_eviction(self.rest, self.objects)
        self.logs = install_logs(self.rest, self.objects)
        # the scheduler's and kubelets' Events for each pod (Scheduled, Pulled, Started, ...): off for
        # benchmark worlds of 100,000 pods, where they would be most of the writes
        self.scheduler = Scheduler(self.objects, events=pod_events) if scheduler else None
        self.kubelets = Kubelets(
            self.objects,
            KubeletConfig(
                speed=speed,
                pod_start_delay=pod_start_delay,
                termination_cap=termination_cap,
                max_pods=max_pods,
                events=pod_events,
                run_seconds=run_seconds,
            ),
        )
        self._kubelets_enabled = kubelets
        self.gc = GarbageCollector(self.objects) if gc else None
        self.namespaces = NamespaceController(self.objects)
        self.kubernetes_service = KubernetesService(self.objects, lambda: self.port or 443)
        # KCM's controllers the embedded cluster simulates (besides the garbage collector); off
        # for tests of the API alone, as the real tier's bare control plane runs none of them
        # the CA that verifies this server when it serves TLS, else one made for the cluster
        self.root_ca = self._serving_ca().decode() if self._serving_pair is not None else make_root_ca()
        self.pod_gc = PodGC(self.objects, quarantine=pod_gc_quarantine)
        # the admission plugins that read other objects (LimitRanger, Priority, ResourceQuota)
        Admission(self.objects).install()
        namespace_defaults = NamespaceDefaults(self.objects, self.root_ca)
        if controllers:  # the plugin waits for this controller's `default` ServiceAccounts
            ServiceAccountAdmission(self.objects, namespace_defaults.ensure_default_service_account).install()
        self.jobs = JobController(self.objects)
        self.cronjobs = CronJobController(self.objects)
        self.controllers: list[BackgroundActor] = (
            [
                StatefulSetController(self.objects),
                DaemonSetController(self.objects),
                namespace_defaults,
                self.pod_gc,
                self.jobs,
                self.cronjobs,
                EndpointsController(self.objects),
                QuotaController(self.objects),
                VolumeBinder(self.objects),
            ]
            if controllers
            else []
        )
        self._runner: web.AppRunner | None = None
        self._tmp: str | None = None
        self._tg: TaskGroup | None = None
        self._background: asyncio.Task[None] | None = None
        self.url = ""
        self.kubeconfig_path = ""
        self._bootstrap()

    def _bootstrap(self) -> None:
        ns_type = self.registry.require("", "v1", "namespaces")
        for name in SYSTEM_NAMESPACES:
            self.objects.create(ns_type, None, {"metadata": {"name": name}})
        pc_type = self.registry.require("scheduling.k8s.io", "v1", "priorityclasses")
        for priority_class in system_priority_classes():
            self.objects.create(pc_type, None, priority_class)
        self.auth.bootstrap()
        for i in range(1, self.nodes + 1):
            if self._kubelets_enabled:
                self.kubelets.add_node(f"node-{i}")
            else:
                self.objects.create(self.registry.require("", "v1", "nodes"), None, node_object(f"node-{i}"))
                lift_not_ready_taint(self.objects, f"node-{i}")

    def _resolve_service(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        """Where a webhook's `clientConfig.service` is reached: no pod network here, so the
        Service's port `port` leads to its targetPort on this cluster's host (a webhook server
        the test or the developer runs there)."""
        entry = self.storage.get("services", namespace, name)
        if entry is None:
            raise CallError(f'service "{name}" not found')
        for entry_port in (entry.load().get("spec") or {}).get("ports") or ():
            if entry_port.get("port") == port:
                target = entry_port.get("targetPort")
                return self.host, target if isinstance(target, int) and target > 0 else port
        raise CallError(f'no service port {port} found for service "{name}"')

    def _cascade_namespace(self, rt: Any, obj: dict[str, Any]) -> None:
        """Namespace deletion removes what it contains (the namespace controller's job, done at once)."""
        if rt.storage_key != "namespaces":
            return
        ns = obj["metadata"]["name"]
        for other in self.registry.all():
            if not other.namespaced:
                continue
            for entry in list(self.storage.iter_entries(other.storage_key, ns)):
                if self.storage.get(other.storage_key, ns, entry.name) is not None:
                    self.storage.remove(other.storage_key, entry.load())

    async def __aenter__(self) -> LocalCluster:
        runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0, handle_signals=False)
        await runner.setup()
        context = server_context(self._serving_pair) if self._serving_pair is not None else None
        site = web.TCPSite(runner, self.host, self.port, backlog=1024, ssl_context=context)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]  # the bound port, when self.port was 0
        self.url = f"{'https' if context is not None else 'http'}://{self.host}:{self.port}"
        self.kubernetes_service.ensure()
        self._tmp = tempfile.mkdtemp(prefix="localcluster-")
        self.kubeconfig_path = str(Path(self._tmp) / "kubeconfig")
        await anyio.Path(self.kubeconfig_path).write_text(yaml.safe_dump(self.kubeconfig()))
        self._background = asyncio.create_task(self._run_background(), name="localcluster-background")
        return self

    async def _run_background(self) -> None:
        """One task owns the task group of background actors, so `__aenter__` and `__aexit__`
        may run in different tasks (pytest fixtures do) and still cancel everything."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.storage.run_compactor, self.compaction_interval)
            tg.start_soon(self.event_ttl.run)
            tg.start_soon(self.crds.run)
            tg.start_soon(self.namespaces.run)
            tg.start_soon(self.kubernetes_service.run)
            for controller in self.controllers:
                tg.start_soon(controller.run)
            behaviours: tuple[BackgroundActor | None, ...] = (
                self.scheduler,
                self.gc,
                self.kubelets if self._kubelets_enabled else None,
            )
            for behaviour in behaviours:
                if behaviour is not None:
                    tg.start_soon(behaviour.run)
            self._tg = tg

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.storage.close_all_watches()
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
        if self._runner is not None:
            await self._runner.cleanup()
        await self.admission.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def kubeconfig(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": self._cluster_entry()}],
            "users": [{"name": "local", "user": {"token": ADMIN_TOKEN}}],
            "contexts": [
                {"name": "local", "context": {"cluster": "local", "user": "local", "namespace": "default"}}
            ],
            "current-context": "local",
            "preferences": {},
        }

    def _serving_ca(self) -> bytes:
        """The CA certificate (PEM) that follows the serving certificate in the served chain."""
        assert self._serving_pair is not None
        pem = self._serving_pair.cert_pem
        return pem[pem.index(b"-----END CERTIFICATE-----") + 26 :].strip() + b"\n"

    def _cluster_entry(self) -> dict[str, str]:
        entry = {"server": self.url}
        if self._serving_pair is not None:
            entry["certificate-authority-data"] = base64.b64encode(self._serving_ca()).decode()
        return entry

    def kubeconfig_for_token(self, token: str) -> dict[str, Any]:
        """A kubeconfig for another identity (a service account's token, a static user's)."""
        config = self.kubeconfig()
        config["users"] = [{"name": "local", "user": {"token": token}}]
        return config

    async def client(self, *, qps: float = 1000.0, burst: int = 2000) -> KubeClient:
        """A `KubeClient` built from the kubeconfig, as the product builds its own."""
        api_client = await build_api_client(kubeconfig=self.kubeconfig_path)
        return KubeClient(api_client, qps=qps, burst=burst)
