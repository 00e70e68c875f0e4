"""Unpaced rollouts on the real KCM and on aiokcm: pods go Ready on their own about 1 s after
they start (2 s in the scale story, see `SCALE_KUBELETS`; no gate, no pacing), so pods started
together turn Ready within milliseconds.

The differential stories (`test_differential.py`) release one pod at a time and demand equal
generations; here the kubelets run free, and what these tests pin is the difference the
Deployment controller's package docstring explains ("Unpaced rollouts"): KCM handles pod events
one at a time, aiokcm applies the events of one watch read together, so where KCM scales a
ReplicaSet in two steps of one aiokcm may take one step of two (or the other way round, once
the timings have drifted). Each story runs `RUNS` times in its own namespace, both sides at
once, and after every step:

- the normalized view (`normalize.py`) is equal on both sides except for the ReplicaSets'
  `metadata.generation` and `status.observedGeneration`, which are taken out;
- each side's ReplicaSets have observed their generation (the ReplicaSet controller never
  lags), and the Deployments' generations (kubectl's writes) are equal;
- in the undo story, each ReplicaSet's generation (the count of spec writes it has had) differs
  by at most `UNDO_SPEC_WRITES_APART` (3) between the sides: in 24 runs the two sides ended a
  step at most 2 apart, either way, and the real KCM alone ended the same step up to 2 apart
  (8 to 10) from one run to the next. The scale story (`SCALE_SPEC_WRITES_APART` None) compares
  everything but the generations: its sides once ended 5 apart, and KCM's own runs 7 to 11.

Every ReplicaSet change each API server stores is recorded by a watch; the counts of spec and
status writes per step are printed (`-s`) for comparing runs.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import REPLICASETS
from realcluster import ControlPlane
from tests.backends import real_assets_or_skip
from tests.real.normalize import Raw, _renames, differences, normalize, observe
from tests.real.settle import settle
from tests.real.sides import Side, on_both, planes_side_by_side, sides_running
from tests.real.test_differential import deployment, kubectl

# One pair of control planes for the module: keep its tests on one xdist worker.
pytestmark = pytest.mark.xdist_group("unpaced")

RUNS = 3
# How many spec writes apart a ReplicaSet may end a step (see the module docstring): measured up
# to 2, and the real KCM's own runs of one story ended up to 4 apart from each other.
UNDO_SPEC_WRITES_APART = 3
# Not bounded: one run in 24 ended 5 apart (KCM at 6, aiokcm at 11); the end state is compared.
SCALE_SPEC_WRITES_APART: int | None = None
KUBELETS = {"lease_interval": 1.0, "pod_start_delay": 1.0, "termination_cap": 0.1}
# The scale story's pods go Ready 2 s after they start: the scale must land while the surge pods
# are still starting on both sides, and on a loaded machine kubectl's own start can take the 0.5 s
# margin that 1 s leaves (KCM then finished the roll-out first and never scaled the old ReplicaSet).
SCALE_KUBELETS = {**KUBELETS, "pod_start_delay": 2.0}
STRATEGY = {
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
}


@pytest.fixture(scope="module")
def planes() -> Iterator[dict[str, ControlPlane]]:
    pair = planes_side_by_side(real_assets_or_skip())
    try:
        with ThreadPoolExecutor(len(pair)) as starting:  # processes started and waited for, not run here
            list(starting.map(ControlPlane.start, pair.values()))
        yield pair
    finally:
        with ThreadPoolExecutor(len(pair)) as stopping:
            list(stopping.map(ControlPlane.stop, pair.values()))


@dataclass
class Writes:
    """The ReplicaSet changes one side's API server stored: per ReplicaSet name, the generation
    last seen, and per (step, name) the count of spec writes (generation bumps) and of others."""

    step: str = ""
    generation: dict[str, int] = field(default_factory=dict)
    spec: Counter[tuple[str, str]] = field(default_factory=Counter)
    other: Counter[tuple[str, str]] = field(default_factory=Counter)

    async def record(self, client: KubeClient, namespace: str, *, task_status: Any) -> None:
        async with client.watch(REPLICASETS, resource_version="0", namespace=namespace) as events:
            task_status.started()
            async for event in events:
                if event.type not in ("ADDED", "MODIFIED"):
                    continue
                meta = event.object["metadata"]
                name, generation = meta["name"], int(meta.get("generation") or 0)
                if generation != self.generation.get(name):
                    self.spec[(self.step, name)] += 1
                else:
                    self.other[(self.step, name)] += 1
                self.generation[name] = generation


@dataclass(frozen=True)
class Step:
    name: str
    args: tuple[str, ...]
    stdin: Any = None
    # seconds to wait before the next step instead of settling
    then_wait: float | None = None


def _without_rs_generations(view: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(view)
    for rs in out["replicasets"].values():
        rs.pop("generation", None)
        rs["status"].pop("observedGeneration", None)
    return out


def _generations(raw: Raw, view: dict[str, Any]) -> dict[str, int]:
    """Normalized ReplicaSet name -> generation, checking each has observed its own."""
    for rs in raw.replica_sets:
        meta, status = rs["metadata"], rs.get("status") or {}
        assert status.get("observedGeneration") == meta.get("generation"), (
            f"{meta['name']} has not observed generation {meta.get('generation')}"
        )
    return {name: int(rs["generation"]) for name, rs in view["replicasets"].items()}


async def _run(kcm: Side, aiokcm: Side, namespace: str, steps: list[Step], apart: int | None) -> list[str]:
    """One run of a story; returns a line per step and side, the write counts."""
    await on_both(kcm, aiokcm, lambda side: kubectl(side, "default", "create", "namespace", namespace))
    writes = {"kcm": Writes(), "aiokcm": Writes()}
    report: list[str] = []
    raws: dict[str, Raw] = {}
    async with anyio.create_task_group() as tg:
        for side in (kcm, aiokcm):
            await tg.start(_record, writes[side.name], side.client, namespace)
        for step in steps:
            for w in writes.values():
                w.step = step.name

            async def act(side: Side, step: Step = step) -> None:
                await kubectl(side, namespace, *step.args, stdin=step.stdin)

            await on_both(kcm, aiokcm, act)
            if step.then_wait is not None:
                await anyio.sleep(step.then_wait)
                continue
            await on_both(kcm, aiokcm, lambda side: settle(side.client, side.kubelets, namespace))
            raws = await on_both(kcm, aiokcm, lambda side: observe(side.client, namespace, nodes=False))
            views = {name: normalize(raw) for name, raw in raws.items()}
            where = f"{namespace} after {step.name!r}"
            diffs = differences(
                _without_rs_generations(views["kcm"]), _without_rs_generations(views["aiokcm"])
            )
            assert not diffs, f"{where} differs from KCM:\n  " + "\n  ".join(diffs)
            gens = {name: _generations(raws[name], views[name]) for name in views}
            for rs, want in gens["kcm"].items():
                got = gens["aiokcm"][rs]
                assert apart is None or abs(got - want) <= apart, (
                    f"{where}: {rs} is at generation {got} on aiokcm, {want} on KCM"
                )
            report.append(f"{where}: generations kcm {gens['kcm']} aiokcm {gens['aiokcm']}")
        tg.cancel_scope.cancel()
    for name, w in writes.items():
        names = _renames(raws[name])
        counts = {
            f"{step}: {names.get(rs, rs)}": (w.spec[(step, rs)], w.other[(step, rs)])
            for step, rs in sorted(w.spec | w.other)
        }
        report.append(f"{namespace} {name} (spec, other) writes: {counts}")
    return report


async def _record(writes: Writes, client: KubeClient, namespace: str, *, task_status: Any) -> None:
    await writes.record(client, namespace, task_status=task_status)


async def _story(
    planes: dict[str, ControlPlane],
    story: str,
    steps: list[Step],
    *,
    apart: int | None,
    kubelets: dict[str, Any] = KUBELETS,
) -> None:
    async with sides_running(planes, kubelet_options=kubelets) as (kcm, aiokcm):
        for run in range(RUNS):
            for line in await _run(kcm, aiokcm, f"{story}-{run}", steps, apart):
                print(line)
        await aiokcm.terminate_manager()


@pytest.mark.timeout(300)
async def test_unpaced_undo_near_kcm(planes: dict[str, ControlPlane]) -> None:
    """`kubectl rollout undo` of a 5-replica Deployment (maxSurge/maxUnavailable 25 %) after a
    finished `set image`: the undone ReplicaSet scaled back up, the other scaled down to 0."""
    steps = [
        Step("create", ("create", "-f", "-"), deployment("web", 5, "pause:1", **STRATEGY)),
        Step("set image", ("set", "image", "deployment/web", "app=pause:2")),
        Step("undo", ("rollout", "undo", "deployment/web")),
    ]
    await _story(planes, "undo", steps, apart=UNDO_SPEC_WRITES_APART)


@pytest.mark.timeout(300)
async def test_unpaced_scale_during_rollout_near_kcm(
    planes: dict[str, ControlPlane],
) -> None:
    """A scale from 4 to 10 half a second after `kubectl set image`: the surge pods exist but
    none is Ready yet (they go Ready 2 s after they start), so the scale is spread proportionally
    over both ReplicaSets."""
    steps = [
        Step("create", ("create", "-f", "-"), deployment("api", 4, "pause:1", **STRATEGY)),
        Step("set image", ("set", "image", "deployment/api", "app=pause:2"), then_wait=0.5),
        Step("scale to 10", ("scale", "deployment/api", "--replicas", "10")),
    ]
    await _story(planes, "scale", steps, apart=SCALE_SPEC_WRITES_APART, kubelets=SCALE_KUBELETS)
