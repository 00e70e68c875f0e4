"""Server-side apply through the real kubectl, on both backends: field ownership in
`metadata.managedFields`, conflicts with another manager, `--force-conflicts`, and removal of a
field the applier stops applying."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.localcluster.helpers import bare_cluster

cluster = pytest.fixture(bare_cluster)
pytestmark = [
    pytest.mark.backends("local", "real"),
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary"),
]


def deployment(replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]},
            },
        },
    }


class Kubectl:
    def __init__(self, kubeconfig: str, workdir: Path) -> None:
        self.base = ["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", str(workdir / "cache")]
        self.workdir = workdir

    async def run(self, *args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(*self.base, *args, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode(), err.decode()

    async def ok(self, *args: str) -> str:
        rc, out, err = await self.run(*args)
        assert rc == 0, f"kubectl {' '.join(args)} failed: {err}"
        return out

    def manifest(self, doc: Any) -> str:
        path = self.workdir / "manifest.yaml"
        path.write_text(yaml.safe_dump(doc))
        return str(path)


def owners(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """managedFields by (manager, operation), times checked for shape and dropped."""
    out = {}
    for entry in obj["metadata"].get("managedFields") or []:
        assert entry.pop("time", "Z").endswith("Z")
        assert entry.pop("fieldsType") == "FieldsV1"
        out[(entry.pop("manager"), entry.pop("operation"))] = entry
    return out


APPLIED_FIELDS = {
    "f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {'k:{"name":"nginx"}': {
                ".": {}, "f:image": {}, "f:name": {},
                "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
            }}},
        },
    },
}


async def test_apply_conflict_force_and_removed_field(cluster: Any, tmp_path: Path) -> None:
    kubectl = Kubectl(cluster.kubeconfig_path, tmp_path)
    await kubectl.ok("apply", "--server-side", "-f", kubectl.manifest(deployment(2, {"app": "web", "tier": "front"})))
    shown = yaml.safe_load(await kubectl.ok("get", "deployment", "web", "-o", "yaml", "--show-managed-fields"))
    entries = owners(shown)
    assert list(entries) == [("kubectl", "Apply")]
    assert entries["kubectl", "Apply"] == {"apiVersion": "apps/v1", "fieldsV1": APPLIED_FIELDS}

    # another manager changes a field the applier owns: an Update entry takes it over
    await kubectl.ok("patch", "deployment", "web", "--type", "merge", "-p", '{"spec":{"replicas":3}}')
    entries = owners(json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json", "--show-managed-fields")))
    assert entries["kubectl-patch", "Update"] == {"apiVersion": "apps/v1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    assert "f:replicas" not in entries["kubectl", "Apply"]["fieldsV1"]["f:spec"]

    # applying the old value again conflicts, and nothing changes
    manifest = kubectl.manifest(deployment(2, {"app": "web"}))
    rc, _, err = await kubectl.run("apply", "--server-side", "-f", manifest)
    assert rc != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl-patch" using apps/v1: .spec.replicas' in err
    live = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json"))
    assert live["spec"]["replicas"] == 3 and live["metadata"]["labels"] == {"app": "web", "tier": "front"}

    # forced: the applier takes replicas back, and the label it no longer applies is removed
    await kubectl.ok("apply", "--server-side", "--force-conflicts", "-f", manifest)
    live = json.loads(await kubectl.ok("get", "deployment", "web", "-o", "json", "--show-managed-fields"))
    assert live["spec"]["replicas"] == 2
    assert live["metadata"]["labels"] == {"app": "web"}
    entries = owners(live)
    assert list(entries) == [("kubectl", "Apply")]
    expected = json.loads(json.dumps(APPLIED_FIELDS))
    del expected["f:metadata"]["f:labels"]["f:tier"]
    assert entries["kubectl", "Apply"]["fieldsV1"] == expected
