"""Benchmark: recovery from control-plane faults, aiokcm against the real KCM, from the same runs.

    python -m bench.faults [--scenario NAME ...]      # needs $KUBEBUILDER_ASSETS

Each scenario of `tests/real/test_faults.py` (kube-apiserver killed during a scale-up, a
scale-down and a rollout; etcd restarted during a rollout; the controller manager killed mid
rollout) runs on two real control planes side by side, one run by the real KCM and one by aiokcm
beside KCM. Per side: seconds from the server's (or manager's) return to the converged state,
pods created by the change, and whether the final state equals KCM's. Prints a table, then as
its last line one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
import orjson

from realcluster import assets_from_env
from tests.real.sides import on_both, side_by_side
from tests.real.test_faults import SCENARIOS, Scenario, run_side


async def one(scenario: Scenario) -> dict[str, Any]:
    assets = assets_from_env()
    if assets is None:
        raise SystemExit("bench.faults: set KUBEBUILDER_ASSETS (e.g. $(../shared/realk8s/assets.sh))")
    async with side_by_side(assets) as (kcm, aiokcm):
        results = await on_both(kcm, aiokcm, lambda side: run_side(side, scenario))
    return {
        "kcm_recovery_s": round(results["kcm"]["recovery"], 2),
        "aiokcm_recovery_s": round(results["aiokcm"]["recovery"], 2),
        "kcm_creates": results["kcm"]["creates"],
        "aiokcm_creates": results["aiokcm"]["creates"],
        "minimum_creates": scenario.minimum_creates,
        "same_final_state": results["kcm"]["state"] == results["aiokcm"]["state"],
    }


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.faults")
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS])
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]
    figures: dict[str, Any] = {}
    for scenario in chosen:
        figures[scenario.name] = await one(scenario)
    print(f"{'scenario':36} {'KCM s':>7} {'aiokcm s':>9} {'creates KCM/aiokcm/min':>24} {'same state':>11}")
    for name, f in figures.items():
        creates = f"{f['kcm_creates']}/{f['aiokcm_creates']}/{f['minimum_creates']}"
        print(
            f"{name:36} {f['kcm_recovery_s']:7.1f} {f['aiokcm_recovery_s']:9.1f} {creates:>24} {f['same_final_state']!s:>11}"
        )
    print(orjson.dumps(figures).decode())
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
