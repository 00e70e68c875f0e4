"""The real kubectl against the local cluster: the issue's "done when" for kubectl fidelity.

kubectl runs as an asyncio subprocess (never blocking the loop) with its own discovery cache
directory. Each test batches several commands against one cluster.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.cluster import LocalCluster
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary"),
]

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                    {"name": "side", "image": "busybox"},
                ]
            },
        },
    },
}

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: drains.test.aiokcm.io
spec:
  group: test.aiokcm.io
  scope: Cluster
  names: {plural: drains, singular: drain, kind: Drain, shortNames: [dr]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Cordon, type: boolean, jsonPath: .spec.cordon}
    - {name: Drain, type: boolean, jsonPath: .spec.drain}
    - {name: Reason, type: string, jsonPath: .spec.reason, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: The desired maintenance.
            x-kubernetes-validations:
            - {rule: "!self.drain || self.cordon", message: drain requires cordon}
            properties:
              cordon: {type: boolean, default: false, description: Mark the nodes unschedulable.}
              drain: {type: boolean, default: false}
              reason: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
"""


@dataclass
class Result:
    rc: int
    out: str
    err: str


class Kubectl:
    def __init__(self, cluster: LocalCluster, cache: Path, workdir: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", cluster.kubeconfig_path, "--cache-dir", str(cache)]
        self.workdir = workdir
        self.requests = cluster.requests

    def reads(self) -> int:
        """Reads kubectl has made, so a test can wait for a background command to reach the server."""
        return sum(n for agent, n in self.requests.reads_by_agent.items() if agent.startswith("kubectl/"))

    async def run(self, *args: str, stdin: str | None = None, check: bool = True) -> Result:
        proc = await asyncio.create_subprocess_exec(
            *self.base,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        result = Result(proc.returncode or 0, out.decode(), err.decode())
        if check:
            assert result.rc == 0, f"kubectl {' '.join(args)} failed: {result.err}"
        return result

    async def json(self, *args: str) -> Any:
        return json.loads((await self.run(*args, "-o", "json")).out)

    def manifest(self, name: str, doc: Any) -> str:
        path = self.workdir / name
        path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
        return str(path)


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    # The cluster's task group must be entered and left in one task; fixture setup and
    # teardown may run in different ones, so the cluster lives in a task of its own.
    ready: asyncio.Future[LocalCluster] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def serve() -> None:
        async with LocalCluster(nodes=1) as cluster:
            ready.set_result(cluster)
            await stop.wait()

    task = asyncio.create_task(serve())
    try:
        cluster = await asyncio.wait_for(asyncio.shield(ready), 30)
        yield Kubectl(cluster, tmp_path / "cache", tmp_path)
    finally:
        stop.set()
        await task


async def test_create_and_get_in_every_output_format(kubectl: Kubectl) -> None:
    await kubectl.run(
        "create",
        "-f",
        kubectl.manifest("ns.yaml", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
    )
    await kubectl.run("create", "-n", "demo", "-f", kubectl.manifest("dep.yaml", DEPLOYMENT))
    dup = await kubectl.run(
        "create", "-n", "demo", "-f", kubectl.manifest("dep.yaml", DEPLOYMENT), check=False
    )
    assert dup.rc != 0 and 'deployments.apps "web" already exists' in dup.err

    obj = await kubectl.json("get", "deploy", "web", "-n", "demo")
    assert obj["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
    }
    assert obj["spec"]["revisionHistoryLimit"] == 10 and obj["metadata"]["generation"] == 1
    as_yaml = yaml.safe_load(
        (await kubectl.run("get", "deployments.apps/web", "-n", "demo", "-o", "yaml")).out
    )
    assert as_yaml["metadata"]["uid"] == obj["metadata"]["uid"]
    names = (await kubectl.run("get", "deploy,ns", "-A", "-o", "name")).out.split()
    assert "deployment.apps/web" in names and "namespace/demo" in names
    table = (await kubectl.run("get", "deploy", "-n", "demo", "-o", "wide")).out.splitlines()
    assert table[0].split()[:2] == ["NAME", "READY"] and table[1].split()[0] == "web"
    nodes = (await kubectl.run("get", "no")).out.splitlines()
    assert nodes[0].split()[:2] == ["NAME", "STATUS"] and nodes[1].split()[:2] == ["node-1", "Ready"]
    missing = await kubectl.run("get", "po", "nope", check=False)
    assert missing.rc == 1 and 'pods "nope" not found' in missing.err


async def test_apply_creates_then_updates_with_a_three_way_patch(kubectl: Kubectl) -> None:
    created = await kubectl.run("apply", "-f", kubectl.manifest("dep.yaml", DEPLOYMENT))
    assert "deployment.apps/web created" in created.out
    changed = json.loads(json.dumps(DEPLOYMENT))
    changed["spec"]["replicas"] = 3
    del changed["metadata"]["labels"]["tier"]
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.26"
    del changed["spec"]["template"]["spec"]["containers"][1]
    path = kubectl.manifest("dep2.yaml", changed)
    assert "deployment.apps/web configured" in (await kubectl.run("apply", "-f", path)).out
    assert "deployment.apps/web unchanged" in (await kubectl.run("apply", "-f", path)).out
    obj = await kubectl.json("get", "deploy", "web")
    assert obj["spec"]["replicas"] == 3
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert [c["image"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["nginx:1.26"]
    assert obj["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]


async def test_patch_label_annotate_and_describe(kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", kubectl.manifest("dep.yaml", DEPLOYMENT))
    await kubectl.run(
        "patch",
        "deploy",
        "web",
        "--type",
        "strategic",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox:2"}]}}}}',
    )
    await kubectl.run("patch", "deploy", "web", "--type", "merge", "-p", '{"spec":{"paused":true}}')
    await kubectl.run(
        "patch",
        "deploy",
        "web",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":1}]',
    )
    bad = await kubectl.run(
        "patch",
        "deploy",
        "web",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/nope/x","value":1}]',
        check=False,
    )
    assert bad.rc != 0
    await kubectl.run("label", "deploy", "web", "env=prod")
    await kubectl.run("label", "deploy", "web", "tier-")
    clash = await kubectl.run("label", "deploy", "web", "env=dev", check=False)
    assert clash.rc != 0 and "--overwrite" in clash.err
    await kubectl.run("annotate", "deploy", "web", "note=hi")
    obj = await kubectl.json("get", "deploy", "web")
    containers = {c["name"]: c["image"] for c in obj["spec"]["template"]["spec"]["containers"]}
    assert containers == {"nginx": "nginx:1.25", "side": "busybox:2"}  # merged by name, not replaced
    assert obj["spec"]["paused"] is True and obj["spec"]["replicas"] == 1
    assert obj["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert obj["metadata"]["annotations"]["note"] == "hi"
    described = (await kubectl.run("describe", "deploy", "web")).out
    assert "Name:                   web" in described and "env=prod" in described
    assert "25% max unavailable, 25% max surge" in described
    node = (await kubectl.run("describe", "node", "node-1")).out
    assert "Name:               node-1" in node


async def test_delete_and_wait(kubectl: Kubectl) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "finalizers": ["test/hold"]},
        "data": {"a": "1"},
    }
    await kubectl.run("create", "-f", kubectl.manifest("cm.yaml", cm))
    await kubectl.run("wait", "--for=condition=Ready", "node/node-1", "--timeout=10s")
    await kubectl.run("delete", "cm", "cfg", "--wait=false")
    still = await kubectl.json("get", "cm", "cfg")
    assert still["metadata"]["deletionTimestamp"]  # held by the finalizer
    before = kubectl.reads()
    waiter = asyncio.create_task(kubectl.run("wait", "--for=delete", "cm/cfg", "--timeout=20s"))
    # kubectl wait reads the object twice, lists it, then watches: four reads. Releasing the
    # finalizer before the watch opens would test "already gone", which prints nothing.
    await eventually(lambda: kubectl.reads() >= before + 4, "kubectl wait watching cm/cfg", interval=0.02)
    await kubectl.run("patch", "cm", "cfg", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    result = await waiter
    assert "configmap/cfg condition met" in result.out
    gone = await kubectl.run("get", "cm", "cfg", "--ignore-not-found")
    assert gone.out == ""


async def test_get_watch_streams_changes(kubectl: Kubectl) -> None:
    proc = await asyncio.create_subprocess_exec(
        *kubectl.base,
        "get",
        "cm",
        "--watch",
        "-o",
        "name",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        await kubectl.run(
            "create",
            "-f",
            kubectl.manifest(
                "cm.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched"}}
            ),
        )
        lines: list[str] = []
        while "configmap/watched" not in lines:
            line = await asyncio.wait_for(proc.stdout.readline(), 20)
            assert line, (await proc.stderr.read()).decode() if proc.stderr else "watch ended"
            lines.append(line.decode().strip())
    finally:
        proc.kill()
        await proc.wait()


async def test_crd_round_trip_with_kubectl(kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", kubectl.manifest("crd.yaml", CRD))
    await kubectl.run("wait", "--for=condition=Established", "crd/drains.test.aiokcm.io", "--timeout=10s")
    cr = {
        "apiVersion": "test.aiokcm.io/v1alpha1",
        "kind": "Drain",
        "metadata": {"name": "d1"},
        "spec": {"cordon": True, "reason": "kernel"},
    }
    await kubectl.run("apply", "-f", kubectl.manifest("d1.yaml", cr))
    table = (await kubectl.run("get", "dr")).out.splitlines()
    assert table[0].split() == ["NAME", "CORDON", "DRAIN", "AGE"]
    assert table[1].split()[:3] == ["d1", "true", "false"]
    wide = (await kubectl.run("get", "drains.test.aiokcm.io", "-o", "wide")).out.splitlines()
    assert "REASON" in wide[0].split() and "kernel" in wide[1].split()
    obj = await kubectl.json("get", "drain", "d1")
    assert obj["spec"] == {"cordon": True, "drain": False, "reason": "kernel"}  # defaulted

    invalid = {**cr, "metadata": {"name": "bad"}, "spec": {"drain": True}}
    rejected = await kubectl.run("create", "-f", kubectl.manifest("bad.yaml", invalid), check=False)
    assert rejected.rc != 0
    assert 'The Drain "bad" is invalid: spec: Invalid value: "object": drain requires cordon' in rejected.err

    await kubectl.run(
        "patch", "dr", "d1", "--subresource", "status", "--type", "merge", "-p", '{"status":{"phase":"Done"}}'
    )
    await kubectl.run(
        "patch", "dr", "d1", "--type", "merge", "-p", '{"spec":{"drain":true},"status":{"phase":"Lost"}}'
    )
    obj = await kubectl.json("get", "dr", "d1")
    assert obj["status"] == {"phase": "Done"} and obj["spec"]["drain"] is True
    assert obj["metadata"]["generation"] == 2

    explained = (await kubectl.run("explain", "dr.spec")).out
    assert "KIND:       Drain" in explained and "Mark the nodes unschedulable." in explained
    in_all = (await kubectl.run("api-resources", "--api-group=test.aiokcm.io", "-o", "name")).out.split()
    assert in_all == ["drains.test.aiokcm.io"]

    await kubectl.run("delete", "crd", "drains.test.aiokcm.io", "--timeout=20s")
    gone = await kubectl.run("get", "drains.test.aiokcm.io", check=False)
    assert gone.rc != 0
