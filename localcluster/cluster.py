"""`LocalCluster`: the embedded API server, started and stopped as an async context manager.

    async with LocalCluster(nodes=3) as cluster:
        kube = cluster.client()

One background task owns a task group for the cluster's actors (the CRD controller now, part
2's scheduler and kubelets later); aiohttp serves connections on the loop, writes a real kubeconfig to a temp
directory so `kubectl --kubeconfig` and `apiclient.config.build_api_client` work unchanged, and
creates the namespaces every cluster has. `nodes=N` creates N Ready nodes (`node-1`..`node-N`,
110 pods allocatable); part 2 replaces them with simulated kubelets.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import yaml
from aiohttp import web
from anyio.abc import TaskGroup

from apiclient import KubeClient
from apiclient.config import build_api_client
from localcluster.builtin import register_builtins
from localcluster.crd import CRDController
from localcluster.eviction import install as install_eviction
from localcluster.faults import Faults
from localcluster.gc import GarbageCollector
from localcluster.kubelet import KubeletConfig, Kubelets
from localcluster.namespaces import NamespaceController
from localcluster.objects import SYSTEM_NAMESPACES, ObjectAPI
from localcluster.registry import Registry
from localcluster.requestlog import RequestLog
from localcluster.rest import RestHandlers
from localcluster.scheduler import Scheduler
from localcluster.server import build_app
from localcluster.storage import DEFAULT_WINDOW, Storage


def node_object(name: str, *, pods: int = 110) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    capacity = {"cpu": "8", "memory": "32Gi", "pods": str(pods), "ephemeral-storage": "100Gi"}
    conditions = [
        {"type": t, "status": "False", "reason": f"Kubelet Has No{t}", "message": "", "lastHeartbeatTime": now, "lastTransitionTime": now}
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                       "lastHeartbeatTime": now, "lastTransitionTime": now})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
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
        max_pods: int = 110,
        fault_seed: int = 0,
    ) -> None:
        self.nodes = nodes
        self.host = host
        self.port = port
        self.registry = Registry()
        register_builtins(self.registry)
        self.storage = Storage(window=watch_window)
        self.objects = ObjectAPI(self.registry, self.storage)
        self.crds = CRDController(self.registry, self.storage, self.objects)
        self.objects.on_removed.append(self._cascade_namespace)
        self.app: web.Application
        self.rest: RestHandlers
        self.app, self.rest = build_app(self.registry, self.objects, bookmark_interval=bookmark_interval)
        # A living cluster: each behaviour can be switched off by a test that drives it by hand
        self.requests = RequestLog()  # outermost, so it sees the injected failures too
        self.app.middlewares.append(self.requests.middleware)
        self.faults = Faults(self, seed=fault_seed)
        self.app.middlewares.append(self.faults.middleware)
        self.eviction = install_eviction(self.rest, self.objects)
        self.scheduler = Scheduler(self.objects) if scheduler else None
        self.kubelets = Kubelets(self.objects, KubeletConfig(
            speed=speed, pod_start_delay=pod_start_delay, termination_cap=termination_cap, max_pods=max_pods))
        self._kubelets_enabled = kubelets
        self.gc = GarbageCollector(self.objects) if gc else None
        self.namespaces = NamespaceController(self.objects)
        self._runner: web.AppRunner | None = None
        self._tmp: str | None = None
        self._tg: TaskGroup | None = None
        self._background: asyncio.Task[None] | None = None
        self.url = ""
        self.kubeconfig_path = ""
        self._bootstrap()

    def _bootstrap(self) -> None:
        ns_type = self.registry.get("", "v1", "namespaces")
        node_type = self.registry.get("", "v1", "nodes")
        assert ns_type is not None and node_type is not None
        for name in SYSTEM_NAMESPACES:
            self.objects.create(ns_type, None, {"metadata": {"name": name}})
        for i in range(1, self.nodes + 1):
            if self._kubelets_enabled:
                self.kubelets.add_node(f"node-{i}")
            else:
                self.objects.create(node_type, None, node_object(f"node-{i}"))

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
        site = web.TCPSite(runner, self.host, self.port, backlog=1024)
        await site.start()
        self._runner = runner
        sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
        self.port = sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        self._tmp = tempfile.mkdtemp(prefix="localcluster-")
        self.kubeconfig_path = str(Path(self._tmp) / "kubeconfig")
        await anyio.Path(self.kubeconfig_path).write_text(yaml.safe_dump(self.kubeconfig()))
        self._background = asyncio.create_task(self._run_background(), name="localcluster-background")
        return self

    async def _run_background(self) -> None:
        """One task owns the task group of background actors, so `__aenter__` and `__aexit__`
        may run in different tasks (pytest fixtures do) and still cancel everything."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.crds.run)
            tg.start_soon(self.namespaces.run)
            for behaviour in (self.scheduler, self.gc, self.kubelets if self._kubelets_enabled else None):
                if behaviour is not None:
                    tg.start_soon(behaviour.run)
            self._tg = tg

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.storage.close_all_watches()
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
        if self._runner is not None:
            await self._runner.cleanup()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def kubeconfig(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": self.url}}],
            "users": [{"name": "local", "user": {"token": "localcluster"}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "local", "namespace": "default"}}],
            "current-context": "local",
            "preferences": {},
        }

    async def client(self, *, qps: float = 1000.0, burst: int = 2000) -> KubeClient:
        """A `KubeClient` built from the kubeconfig, as the product builds its own."""
        api_client = await build_api_client(kubeconfig=self.kubeconfig_path)
        return KubeClient(api_client, qps=qps, burst=burst)
