"""Benchmark: the chaos run of `tests/e2e/chaos.py`, with more faults, over several seeds.

    python -m bench.chaos --faults 100 --seeds 3

Each seed runs the manager (ReplicaSet and Deployment controllers) in process against a local
cluster while `--faults` faults (watch drops, API server restarts, 500 and 429 bursts, 410 Gone
through a shrunk watch window, latency; every kind at least once) land during a scale-up, a
scale-down and a rollout. Per seed: pods created beyond the minimum (and the pod creates and
deletes a restart cut while they were served, which a controller may rightly redo), ReplicaSets left without
their desired pods, whether every informer cache equals a fresh LIST, and the event loop's lag
(`aiokcm_event_loop_lag_seconds`, p99 from the histogram's buckets, so an upper bound; the
local cluster shares the loop, so its work is in the figure too). Prints a table, then as its
last line one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import anyio
import orjson
import structlog

from tests.e2e.chaos import run_chaos


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.chaos")
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    rows: list[dict[str, Any]] = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        r = await run_chaos(seed=seed, faults=args.faults)
        rows.append(
            {
                "seed": seed,
                "faults": sum(r.faults.values()),
                "by_kind": dict(r.faults),
                "injected_errors": r.injected_errors,
                "pod_creates": r.pod_creates,
                "minimum_creates": r.minimum_creates,
                "extra_creates": r.extra_creates,
                "cut_pod_writes": r.cut_pod_writes,
                "stuck_replicasets": len(r.stuck),
                "stuck": r.stuck,
                "caches_equal_list": r.caches_equal_list,
                "cache_differences": r.cache_differences,
                "loop_lag_p99_s": r.loop_lag_p99,
                "loop_lag_max_s": round(r.loop_lag_max, 3),
                "seconds": round(r.seconds, 1),
                "workload_error": r.workload_error,
            }
        )
        print(f"seed {seed}: done in {r.seconds:.0f} s", file=sys.stderr)
    print(
        f"{'seed':>4} {'faults':>6} {'errors':>6} {'creates/min':>11} {'extra':>5} {'cut':>4} {'stuck RS':>8} "
        f"{'caches==LIST':>12} {'lag p99 s':>9} {'lag max s':>9} {'s':>5}"
    )
    for row in rows:
        creates = f"{row['pod_creates']}/{row['minimum_creates']}"
        print(
            f"{row['seed']:>4} {row['faults']:>6} {row['injected_errors']:>6} {creates:>11} {row['extra_creates']:>5} {row['cut_pod_writes']:>4} "
            f"{row['stuck_replicasets']:>8} {row['caches_equal_list']!s:>12} {row['loop_lag_p99_s']:>9} "
            f"{row['loop_lag_max_s']:>9} {row['seconds']:>5}"
        )
    summary = {
        "faults_per_seed": args.faults,
        "seeds": [row["seed"] for row in rows],
        "extra_creates": sum(row["extra_creates"] for row in rows),
        "cut_pod_writes": sum(row["cut_pod_writes"] for row in rows),
        "stuck_replicasets": sum(row["stuck_replicasets"] for row in rows),
        "caches_equal_list": all(row["caches_equal_list"] for row in rows),
        "loop_lag_p99_s": max(row["loop_lag_p99_s"] for row in rows),
        "loop_lag_max_s": max(row["loop_lag_max_s"] for row in rows),
        "runs": rows,
    }
    print(orjson.dumps(summary).decode())
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
