"""Benchmark: leader failover after SIGKILL of the leader, two `aiokcm run` processes.

    python -m bench.failover [--tries 5]

KCM's lease timings (15 s lease, 10 s renew deadline, 2 s retry period). Each try kills the
leader with SIGKILL (it never releases), scales a ReplicaSet so there is work, and measures from
the kill: when the API server accepted the standby's takeover of the Lease, and when it received
the standby's first other write. The killed manager comes back as the next standby. Over all
tries, every write must come from the lease's holder at that moment (see `tests/e2e/failover.py`).
Prints a table, then as its last line one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import anyio
import orjson
import structlog

from tests.e2e.failover import Election, run_failover


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.failover")
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    election = Election()
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        result = await run_failover(tries=args.tries, election=election, workdir=Path(tmp))
    print(
        f"{'try':>3} {'killed':>6} {'new leader':>10} {'lease taken s':>13} {'first write s':>13} {'within bound':>12}"
    )
    for i, t in enumerate(result.tries, 1):
        print(
            f"{i:>3} {t.killed:>6} {t.took_over:>10} {t.lease_s:>13.2f} {t.first_write_s:>13.2f} "
            f"{t.lease_s <= election.bound!s:>12}"
        )
    print(
        f"bound (lease duration + retry period): {election.bound:.0f} s; two writers: {len(result.two_writers)}"
    )
    print(
        orjson.dumps(
            {
                "bound_s": election.bound,
                "lease_taken_s": [round(t.lease_s, 2) for t in result.tries],
                "first_write_s": [round(t.first_write_s, 2) for t in result.tries],
                "within_bound": sum(t.lease_s <= election.bound for t in result.tries),
                "tries": len(result.tries),
                "two_writers": len(result.two_writers),
                "two_writer_examples": result.two_writers[:5],
            }
        ).decode()
    )
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
