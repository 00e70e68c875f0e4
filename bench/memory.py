"""Memory benchmark: bytes per cached pod, aiokcm's manager process against the real KCM, same objects.

    python -m bench.memory --real [--pods 10000] [--nodes 500]

On a real control plane ($KUBEBUILDER_ASSETS): kube-controller-manager runs the replicaset,
deployment and disruption controllers, and `aiokcm run` runs its own three, both as processes
against the same kube-apiserver, both caching every pod. Pods shaped like a Deployment's
(labels, an owner, one container with resources, env and probes, a Running status with the
kubelet's conditions, the server's own managedFields) are then created and given their status.
Each process's resident memory (VmRSS) is read before the pods exist and again once it has
stopped growing; the growth divided by the pod count is the figure, as an operator would
measure it. Go's RSS includes its garbage collector's headroom (GOGC=100) and Python's includes
the allocator's free lists: both are what the machine pays.

Prints a table, then as its last line one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
from anyio.abc import Process

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client
from apiclient.resources import NODES, PODS

CONTROLLERS_KCM = "replicaset,deployment,disruption"
CONTROLLERS_AIOKCM = "replicaset,deployment,disruption"
ROOT = Path(__file__).resolve().parents[1]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def pod(i: int, nodes: int) -> dict[str, Any]:
    app = f"web-{i % 97:02d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{app}-7d9f8c6b5-{i:06x}",
            "namespace": "default",
            "labels": {"app": app, "pod-template-hash": "7d9f8c6b5", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-20T10:15:30Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-7d9f8c6b5",
                    "uid": f"5c3f0b7e-0000-4000-8000-{i % 97:012d}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"node-{i % nodes:04d}",
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/team/web:1.27.3",
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                    "env": [
                        {"name": "LOG_LEVEL", "value": "info"},
                        {
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                        },
                    ],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                    "livenessProbe": {"httpGet": {"path": "/livez", "port": 8080}, "periodSeconds": 10},
                }
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
    }


def running_status(i: int) -> dict[str, Any]:
    t = "2026-11-20T10:15:32Z"
    return {
        "status": {
            "phase": "Running",
            "hostIP": f"10.1.{i % 250}.1",
            "podIP": f"10.244.{i % 250}.{i % 200 + 2}",
            "podIPs": [{"ip": f"10.244.{i % 250}.{i % 200 + 2}"}],
            "startTime": t,
            "conditions": [
                {"type": c, "status": "True", "lastTransitionTime": t}
                for c in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": "registry.example.com/team/web:1.27.3",
                    "imageID": "registry.example.com/team/web@sha256:" + "ab" * 32,
                    "containerID": f"containerd://{i:064x}",
                    "state": {"running": {"startedAt": t}},
                }
            ],
        }
    }


async def create_pods(client: KubeClient, count: int, nodes: int, *, concurrency: int = 64) -> float:
    started = time.monotonic()
    limiter = anyio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limiter:
            body = pod(i, nodes)
            try:
                await client.create(PODS, body, namespace="default")
            except ApiError as exc:
                if not exc.already_exists:
                    raise
            await client.patch(
                PODS,
                body["metadata"]["name"],
                running_status(i),
                namespace="default",
                subresource="status",
                patch_type="strategic",
            )

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return time.monotonic() - started


async def settled_rss(pids: dict[str, int], *, quiet: float = 4.0, timeout: float = 180.0) -> dict[str, int]:
    """Each process's RSS once none has grown by more than 1 % for `quiet` seconds."""
    last = {name: rss_bytes(pid) for name, pid in pids.items()}
    stable_since = time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await anyio.sleep(0.5)
        now = {name: rss_bytes(pid) for name, pid in pids.items()}
        if any(now[n] > last[n] * 1.01 for n in pids):
            stable_since = time.monotonic()
            last = now
        elif time.monotonic() - stable_since >= quiet:
            return now
    return last


async def run_real(args: argparse.Namespace) -> dict[str, Any]:
    from realcluster import ControlPlane, assets_from_env

    assets = assets_from_env()
    if assets is None:
        raise SystemExit("bench.memory --real: set KUBEBUILDER_ASSETS (e.g. $(../shared/realk8s/assets.sh))")
    # No service-account controller runs, so the admission plugin that waits for one is off.
    plane = ControlPlane(
        assets,
        kcm_controllers=CONTROLLERS_KCM,
        scheduler=False,
        apiserver_flags=("--disable-admission-plugins=ServiceAccount",),
    )
    await anyio.to_thread.run_sync(plane.start)
    manager: Process | None = None
    try:
        client = KubeClient(
            await build_api_client(kubeconfig=str(plane.kubeconfig("admin"))), qps=5000, burst=5000
        )
        try:
            for n in range(args.nodes):
                await client.create(
                    NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n:04d}"}}
                )
            log = (plane.workdir / "aiokcm.log").open("wb")
            manager = await anyio.open_process(  # the manager as a user runs it, in its own process
                [
                    str(Path(sys.executable).with_name("aiokcm")),
                    "run",
                    "--kubeconfig",
                    str(plane.kubeconfig("admin")),
                    "--controllers",
                    CONTROLLERS_AIOKCM,
                    "--leader-elect=false",
                    "--secure-port",
                    "0",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
            kcm_pid = plane.pid("kube-controller-manager")
            assert kcm_pid is not None
            pids = {"kcm": kcm_pid, "aiokcm": manager.pid}
            await anyio.sleep(3.0)
            before = await settled_rss(pids)
            seconds = await create_pods(client, args.pods, args.nodes)
            after = await settled_rss(pids)
        finally:
            await client.close()
    finally:
        if manager is not None:
            manager.send_signal(signal.SIGTERM)
            with anyio.move_on_after(10):
                await manager.wait()
            if manager.returncode is None:
                manager.kill()
                await manager.wait()
        await anyio.to_thread.run_sync(plane.stop)
    figures: dict[str, Any] = {
        "backend": "real",
        "pods": args.pods,
        "nodes": args.nodes,
        "create_seconds": round(seconds, 1),
    }
    print(f"{args.pods} pods on {args.nodes} nodes, created and made Running in {seconds:.1f} s")
    print(f"{'process':8} {'RSS before':>12} {'RSS after':>12} {'bytes/pod':>10}")
    for name in ("kcm", "aiokcm"):
        per_pod = (after[name] - before[name]) / args.pods
        print(f"{name:8} {before[name] / 2**20:10.1f}MB {after[name] / 2**20:10.1f}MB {per_pod:10.0f}")
        figures[name] = {
            "rss_before_mb": round(before[name] / 2**20, 1),
            "rss_after_mb": round(after[name] / 2**20, 1),
            "bytes_per_cached_pod": round(per_pod),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="bench.memory", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--real",
        action="store_true",
        required=True,
        help="on a real control plane from $KUBEBUILDER_ASSETS (the only mode)",
    )
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()
    print(orjson.dumps(anyio.run(run_real, args)).decode())


if __name__ == "__main__":
    main()
