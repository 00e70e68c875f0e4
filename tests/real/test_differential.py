"""The same kubectl story on two real control planes, one run by the real KCM, one by aiokcm.

After every step both sides settle (see `settle.py`) and the normalized status and revision
annotations of every Deployment, ReplicaSet and PDB in the story's namespace (and, where a story
acts on nodes, the nodes' taints and conditions and which pods are left) must be equal,
`metadata.generation` included (see `normalize.py` for what is taken out and why). At the end of
each story aiokcm gets SIGTERM and must be gone within 2 s.

One pair of control planes serves the module (each story has its own namespace); kubelets and
aiokcm start per story, aiokcm with the controllers the story compares. Both KCMs run with short
node-monitor periods so a node going silent is noticed in seconds, and the kubelets renew their
Lease every second so that no node looks silent between stories.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
import pytest

from realcluster import ControlPlane
from tests.backends import real_assets_or_skip
from tests.real.normalize import Raw, differences
from tests.real.settle import settle
from tests.real.sides import AIOKCM_CONTROLLERS, Side, on_both, planes_side_by_side, sides_running

# The stories share one pair of control planes (the module fixture): keep them on one xdist worker.
pytestmark = pytest.mark.xdist_group("differential")

GRACE = "6s"
KCM_FLAGS = (f"--node-monitor-grace-period={GRACE}", "--node-monitor-period=1s")
NODE_CONTROLLERS = AIOKCM_CONTROLLERS + ",node-lifecycle-controller,taint-eviction-controller"
NODE_FLAGS = (
    "--feature-gates",
    "SeparateTaintEvictionController=true",
    "--node-monitor-grace-period",
    GRACE,
    "--node-monitor-period",
    "1s",
)
NEVER_READY = "registry.example/never-ready:1"
KUBELETS = {
    "lease_interval": 1.0,
    "never_ready_images": frozenset({NEVER_READY}),
    "gate_readiness": True,
    "pod_start_delay": 0.1,
    "termination_cap": 0.1,
}
SIGTERM_DEADLINE = 2.0
timings: dict[str, float] = {}


@pytest.fixture(scope="module")
def planes() -> Iterator[dict[str, ControlPlane]]:
    pair = planes_side_by_side(real_assets_or_skip(), kcm_flags=KCM_FLAGS)
    try:
        with ThreadPoolExecutor(len(pair)) as starting:  # processes started and waited for, not run here
            list(starting.map(ControlPlane.start, pair.values()))
        yield pair
    finally:
        with ThreadPoolExecutor(len(pair)) as stopping:  # each waits out its scheduler's grace
            list(stopping.map(ControlPlane.stop, pair.values()))


# -- steps ------------------------------------------------------------------------------------


async def kubectl(side: Side, namespace: str, *args: str, stdin: Any = None) -> str:
    data = orjson.dumps(stdin) if stdin is not None else None
    result = await anyio.run_process(
        ["kubectl", "--kubeconfig", str(side.plane.kubeconfig("admin")), "-n", namespace, *args],
        input=data,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"{side.name}: kubectl {' '.join(args)}: {result.stderr.decode()}")
    return result.stdout.decode()


@dataclass
class Step:
    name: str
    args: tuple[str, ...] = ()
    stdin: Any = None
    until: Callable[[Raw], bool] | None = None
    action: Callable[[Side, str], Awaitable[Any]] | None = None

    async def run(self, side: Side, namespace: str) -> None:
        if self.args:
            await kubectl(side, namespace, *self.args, stdin=self.stdin)
        if self.action is not None:
            await self.action(side, namespace)


def kc(name: str, *args: str, stdin: Any = None, until: Callable[[Raw], bool] | None = None) -> Step:
    return Step(name, args, stdin, until)


def deployment(name: str, replicas: int, image: str, **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            **spec,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": image}], "terminationGracePeriodSeconds": 1},
            },
        },
    }


def pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def pod(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [{"name": "app", "image": "pause:1"}],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


def replicaset(name: str, replicas: int, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "containers": [{"name": "app", "image": "pause:1"}],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }


def timed_out(raw: Raw) -> bool:
    return any(
        c.get("reason") == "ProgressDeadlineExceeded"
        for d in raw.deployments
        for c in (d.get("status") or {}).get("conditions") or []
    )


def gone(*kinds: str) -> Callable[[Raw], bool]:
    return lambda raw: all(not getattr(raw, kind) for kind in kinds)


# -- the runner -------------------------------------------------------------------------------


async def run_story(
    planes: dict[str, ControlPlane],
    namespace: str,
    steps: list[Step],
    *,
    controllers: str = AIOKCM_CONTROLLERS,
    flags: tuple[str, ...] = (),
    nodes: bool = False,
    allow_terminating: bool = False,
) -> None:
    started = time.monotonic()
    async with sides_running(
        planes, aiokcm_controllers=controllers, aiokcm_flags=flags, kubelet_options=KUBELETS
    ) as (kcm, aiokcm):
        await on_both(kcm, aiokcm, lambda side: kubectl(side, "default", "create", "namespace", namespace))
        for number, step in enumerate(steps, 1):

            async def act(side: Side, step: Step = step) -> None:
                await step.run(side, namespace)

            async def settled(side: Side, step: Step = step) -> dict[str, Any]:
                return await settle(
                    side.client,
                    side.kubelets,
                    namespace,
                    nodes=nodes,
                    allow_terminating=allow_terminating,
                    until=step.until,
                )

            await on_both(kcm, aiokcm, act)
            views = await on_both(kcm, aiokcm, settled)
            diffs = differences(views["kcm"], views["aiokcm"])
            if diffs:
                await anyio.sleep(1.5)  # the audit log is written in batches
                trail = "\n".join(
                    f"-- {side.name}'s writes:\n" + "\n".join(side.writes(namespace))
                    for side in (kcm, aiokcm)
                )
                raise AssertionError(
                    f"{namespace} step {number} ({step.name}) differs from KCM:\n  "
                    + "\n  ".join(diffs)
                    + "\n"
                    + trail
                )
        code, took = await aiokcm.terminate_manager()
        assert code is not None and took <= SIGTERM_DEADLINE, (
            f"aiokcm took {took:.2f} s to answer SIGTERM (exit code {code})\n{aiokcm.manager_output()[-3000:]}"
        )
    timings[namespace] = time.monotonic() - started
    print(f"{namespace}: {len(steps)} steps equal to KCM in {timings[namespace]:.1f} s")


# -- the stories ------------------------------------------------------------------------------


@pytest.mark.timeout(240)
async def test_rollout_story_matches_kcm(planes: dict[str, ControlPlane]) -> None:
    """The everyday kubectl story: create, PDB, set image, scale, undo, pause/resume, a rollout past
    its deadline and its undo, Recreate (with five old ReplicaSets, one the undone rollout's), scale
    to zero, delete."""
    # The deadline is for the stuck rollout; the others must not meet it. Pods turn Ready one
    # release at a time (`settle`), and on a loaded machine (the suite's workers under nice 19
    # beside the fault tests) KCM's side passed a 5 s deadline mid-undo, a pod still waiting for
    # its release, and its Progressing condition then differed from aiokcm's.
    steps = [
        kc("create", "create", "-f", "-", stdin=deployment("web", 3, "pause:1", progressDeadlineSeconds=15)),
        kc("pdb minAvailable 2", "create", "pdb", "web", "--selector", "app=web", "--min-available", "2"),
        kc("set image", "set", "image", "deployment/web", "app=pause:2"),
        kc("scale to 5", "scale", "deployment/web", "--replicas", "5"),
        kc("undo", "rollout", "undo", "deployment/web"),
        kc("pause", "rollout", "pause", "deployment/web"),
        kc("set image while paused", "set", "image", "deployment/web", "app=pause:3"),
        kc("resume", "rollout", "resume", "deployment/web"),
        kc("set image again", "set", "image", "deployment/web", "app=pause:5"),
        kc("and again", "set", "image", "deployment/web", "app=pause:6"),
        kc("stuck rollout", "set", "image", "deployment/web", f"app={NEVER_READY}", until=timed_out),
        kc("undo the stuck rollout", "rollout", "undo", "deployment/web"),
        kc("undo to revision 2", "rollout", "undo", "deployment/web", "--to-revision=2"),
        kc(
            "switch to Recreate",
            "patch",
            "deployment/web",
            "--type",
            "merge",
            "-p",
            '{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}',
        ),
        kc("set image under Recreate", "set", "image", "deployment/web", "app=pause:4"),
        kc("scale to 0", "scale", "deployment/web", "--replicas", "0"),
        kc("delete", "delete", "deployment/web", until=gone("deployments", "replica_sets", "pods")),
    ]
    await run_story(planes, "rollout", steps)


@pytest.mark.timeout(180)
async def test_pdb_story_matches_kcm(planes: dict[str, ControlPlane]) -> None:
    """A PDB over a Deployment's pods as an integer and as percentages of its scale while it scales;
    one over nothing; over bare pods, an integer (counted) and a percentage (no scale to take it of).

    No two budgets select the same pod: KCM then syncs one of them, chosen arbitrarily, on each
    pod event, which no second cluster can reproduce (and the eviction API refuses such pods)."""
    steps = [
        kc("create", "create", "-f", "-", stdin=deployment("api", 4, "pause:1")),
        kc("maxUnavailable 1", "create", "-f", "-", stdin=pdb("api", "api", maxUnavailable=1)),
        kc("scale to 6", "scale", "deployment/api", "--replicas", "6"),
        kc(
            "maxUnavailable 50%",
            "patch",
            "pdb/api",
            "--type",
            "merge",
            "-p",
            '{"spec":{"maxUnavailable":"50%"}}',
        ),
        kc("scale to 3", "scale", "deployment/api", "--replicas", "3"),
        kc(
            "minAvailable 50%",
            "patch",
            "pdb/api",
            "--type",
            "merge",
            "-p",
            '{"spec":{"maxUnavailable":null,"minAvailable":"50%"}}',
        ),
        kc("scale to 1", "scale", "deployment/api", "--replicas", "1"),
        kc("minAvailable 2", "patch", "pdb/api", "--type", "merge", "-p", '{"spec":{"minAvailable":2}}'),
        kc("PDB over nothing", "create", "-f", "-", stdin=pdb("none", "nothing", minAvailable=1)),
        kc(
            "bare pods",
            "create",
            "-f",
            "-",
            stdin={
                "apiVersion": "v1",
                "kind": "List",
                "items": [pod("lonely", {"app": "lonely"}), pod("solo", {"app": "solo"})],
            },
        ),
        kc(
            "percentage over a bare pod",
            "create",
            "-f",
            "-",
            stdin=pdb("lonely", "lonely", maxUnavailable="50%"),
        ),
        kc("integer over a bare pod", "create", "-f", "-", stdin=pdb("solo", "solo", minAvailable=1)),
        kc("scale to 0", "scale", "deployment/api", "--replicas", "0"),
    ]
    await run_story(planes, "pdb", steps)


@pytest.mark.timeout(180)
async def test_adoption_story_matches_kcm(planes: dict[str, ControlPlane]) -> None:
    """A ReplicaSet adopts matching bare pods, releases one relabelled away, is deleted with its
    pods orphaned, and a new ReplicaSet adopts them; a Deployment deleted with its ReplicaSet
    orphaned, created again, adopts it and scales it."""
    steps = [
        kc(
            "bare pods",
            "create",
            "-f",
            "-",
            stdin={
                "apiVersion": "v1",
                "kind": "List",
                "items": [pod("pet-a", {"app": "pets"}), pod("pet-b", {"app": "pets"})],
            },
        ),
        kc("ReplicaSet adopts", "create", "-f", "-", stdin=replicaset("pets", 3, "pets")),
        kc("relabel releases", "label", "pod", "pet-a", "app=stray", "--overwrite"),
        kc(
            "delete orphaning", "delete", "replicaset", "pets", "--cascade=orphan", until=gone("replica_sets")
        ),
        kc("new ReplicaSet adopts", "create", "-f", "-", stdin=replicaset("pets2", 3, "pets")),
        # Back, pet-a makes a fourth pod and one must go. Pods ready about as long rank in one
        # log2 bucket, where KCM breaks the tie by UID (random) and spreads by where its scheduler
        # placed them (random among equal nodes): the deletion cost names the pod on both sides.
        kc(
            "pet-a cheapest to delete",
            "annotate",
            "pod",
            "pet-a",
            "controller.kubernetes.io/pod-deletion-cost=-1",
        ),
        kc("stray pod back", "label", "pod", "pet-a", "app=pets", "--overwrite"),
        kc("scale to 0", "scale", "replicaset/pets2", "--replicas", "0"),
        kc("a Deployment", "create", "-f", "-", stdin=deployment("herd", 2, "pause:1")),
        kc(
            "delete it orphaning",
            "delete",
            "deployment",
            "herd",
            "--cascade=orphan",
            until=gone("deployments"),
        ),
        kc("the same Deployment adopts", "create", "-f", "-", stdin=deployment("herd", 3, "pause:1")),
    ]
    await run_story(planes, "adopt", steps)


def _tolerating(seconds: int | None) -> list[dict[str, Any]]:
    out = []
    for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"):
        toleration: dict[str, Any] = {"key": key, "operator": "Exists", "effect": "NoExecute"}
        if seconds is not None:
            toleration["tolerationSeconds"] = seconds
        out.append(toleration)
    return out


def _node_tainted(raw: Raw, name: str = "node-1") -> bool:
    node = next(n for n in raw.nodes if n["metadata"]["name"] == name)
    return any(t.get("effect") == "NoExecute" for t in (node.get("spec") or {}).get("taints") or [])


def _pods_gone(*names: str) -> Callable[[Raw], bool]:
    def check(raw: Raw) -> bool:
        left = {p["metadata"]["name"] for p in raw.pods if not p["metadata"].get("deletionTimestamp")}
        return not left & set(names)

    return check


async def _stop_kubelet(side: Side, namespace: str) -> None:
    side.kubelets["node-1"].stop()


async def _start_kubelet(side: Side, namespace: str) -> None:
    side.kubelets["node-1"].start()


async def _not_ready(side: Side, namespace: str) -> None:
    side.kubelets["node-2"].set_ready(False)


async def _ready_again(side: Side, namespace: str) -> None:
    side.kubelets["node-2"].set_ready(True)


@pytest.mark.timeout(180)
async def test_node_story_matches_kcm(planes: dict[str, ControlPlane]) -> None:
    """A node stops heartbeating: NotReady, tainted NoExecute, its pods evicted as their
    tolerationSeconds run out (and never for one that tolerates forever); back, untainted. Another
    node's kubelet reports NotReady itself: the same through the not-ready taint."""
    on_node = {"nodeName": "node-1"}
    steps = [
        kc(
            "pods on node-1",
            "create",
            "-f",
            "-",
            stdin={
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    pod("quick", {"app": "n"}, tolerations=_tolerating(2), **on_node),
                    pod("slow", {"app": "n"}, tolerations=_tolerating(8), **on_node),
                    pod("forever", {"app": "n"}, tolerations=_tolerating(None), **on_node),
                    pod("default", {"app": "n"}, **on_node),
                    pod("nr-quick", {"app": "n"}, tolerations=_tolerating(2), nodeName="node-2"),
                    pod("nr-forever", {"app": "n"}, tolerations=_tolerating(None), nodeName="node-2"),
                ],
            },
        ),
        kc("a Deployment", "create", "-f", "-", stdin=deployment("svc", 3, "pause:1")),
        Step(
            "kubelet stops",
            action=_stop_kubelet,
            until=lambda raw: _node_tainted(raw) and _pods_gone("quick")(raw),
        ),
        Step("tolerationSeconds run out", until=_pods_gone("quick", "slow")),
        Step("kubelet back", action=_start_kubelet, until=lambda raw: not _node_tainted(raw)),
        Step(
            "node-2 reports NotReady",
            action=_not_ready,
            until=lambda raw: _node_tainted(raw, "node-2") and _pods_gone("nr-quick")(raw),
        ),
        Step("node-2 Ready again", action=_ready_again, until=lambda raw: not _node_tainted(raw, "node-2")),
    ]
    await run_story(
        planes,
        "node",
        steps,
        controllers=NODE_CONTROLLERS,
        flags=NODE_FLAGS,
        nodes=True,
        allow_terminating=True,
    )
