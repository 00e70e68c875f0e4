"""The `aiokcm.embedded` plugin: found through its entry point, serving a living cluster."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import orjson
import pytest

from apiclient import KubeClient
from apiclient import resources as R
from apiclient.config import build_api_client
from controller_manager.embedded import load_plugin
from tests.localcluster.living import is_ready
from tests.support.waiting import eventually, when


async def test_start_embedded_through_the_entry_point() -> None:
    plugin = load_plugin()
    async with plugin.start_embedded(nodes=2, pods_per_node=2) as kubeconfig:
        kube = KubeClient(await build_api_client(kubeconfig=kubeconfig))
        try:
            nodes = await kube.list(R.NODES)
            assert [n["metadata"]["name"] for n in nodes["items"]] == ["node-1", "node-2"]
            items = await eventually(
                lambda: when(
                    kube.list(R.PODS, namespace="default"),
                    lambda ps: len(ps["items"]) == 4 and all(is_ready(p) for p in ps["items"]),
                ),
                "len(ps['items']) == 4 and all(is_ready(p) for p in ps['items'])",
            )
            assert {p["metadata"]["ownerReferences"][0]["name"] for p in items["items"]} == {"workload"}
        finally:
            await kube.close()


@pytest.mark.kubectl
async def test_cluster_up_serves_until_interrupted(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc" / "config"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller_manager",
        "cluster",
        "up",
        "--nodes",
        "2",
        "--pods-per-node",
        "1",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        banner = (await proc.stderr.readline()).decode()
        assert "local cluster serving at http://127.0.0.1:" in banner and "2 nodes, 2 pods" in banner

        async def get_pods() -> list[dict[str, object]]:
            kubectl = await asyncio.create_subprocess_exec(
                "kubectl",
                "--kubeconfig",
                str(kubeconfig),
                "--cache-dir",
                str(tmp_path / "cache"),
                "get",
                "pods",
                "-o",
                "json",
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await kubectl.communicate()
            items: list[dict[str, object]] = orjson.loads(out)["items"]
            return items

        items = await eventually(
            lambda: when(get_pods(), lambda ps: len(ps) == 2 and all(is_ready(p) for p in ps)),
            "len(ps) == 2 and all(is_ready(p) for p in ps)",
            interval=0.2,
        )
        assert len(items) == 2
    finally:
        proc.send_signal(signal.SIGINT)
        code = await proc.wait()
    assert code == 0
