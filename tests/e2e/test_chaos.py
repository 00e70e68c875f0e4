"""Chaos in the suite: one seeded run of every fault the local cluster offers (see `tests/e2e/chaos.py`;
`python -m bench.chaos` runs more faults over several seeds)."""

from __future__ import annotations

from tests.e2e.chaos import FAULT_KINDS, run_chaos


async def test_under_every_fault_replica_sets_converge_without_extra_pods_and_caches_equal_list() -> None:
    result = await run_chaos(seed=15, faults=18)
    assert result.workload_error == ""
    assert set(result.faults) == set(FAULT_KINDS), "every kind of fault was injected"
    assert result.injected_errors > 0
    assert result.stuck == {}, f"ReplicaSets without their desired pods (wanted, have): {result.stuck}"
    assert result.extra_creates <= result.cut_pod_writes, (
        f"{result.pod_creates} pods created, {result.minimum_creates} needed, "
        f"{result.cut_pod_writes} pod writes cut by a restart"
    )
    assert result.cache_differences == {}, f"informer caches differ from a LIST: {result.cache_differences}"
