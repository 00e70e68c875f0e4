"""`make run` is `aiokcm run --embedded`: the real command, as a subprocess, tells a true story.

The demo runs beside the manager in one process: Deployments scaled up by aiokcm's controllers,
then a NodeMaintenance drains the node of the single-replica app. `--demo-exit-after-drain` makes
the run finite (the demo sends SIGTERM once done, so the manager also shows a clean shutdown).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio


def _aiokcm() -> list[str]:
    script = Path(sys.executable).parent / "aiokcm"
    return [str(script)] if script.exists() else [sys.executable, "-m", "controller_manager"]


async def test_aiokcm_run_embedded_narrates_a_drain_without_downtime() -> None:
    argv = [
        *_aiokcm(),
        "run",
        "--embedded",
        "--secure-port",
        "0",
        "--demo-exit-after-drain",
        "--shutdown-grace-period",
        "3s",
    ]
    with anyio.fail_after(300):  # bounds a hang only; the run takes seconds
        done = await anyio.run_process(argv, check=False)
    out, err = done.stdout.decode(), done.stderr.decode()
    context = f"\n--- stdout\n{out}\n--- stderr\n{err}"
    assert done.returncode == 0, context
    assert "Traceback" not in err, context

    # Scaled up by aiokcm's controllers before the drain.
    assert re.search(r"^\s+solo\s+1/1 available on node-\d", out, re.M), context
    assert re.search(r"^\s+web\s+3/3 available on node-\d", out, re.M), context

    # The maintenance targets the node of the single replica and finishes.
    target = re.search(r"NodeMaintenance demo-(node-\d+): cordon \+ drain", out)
    assert target, context
    assert re.search(rf"^3\. {target.group(1)} Drained after [\d.]+s", out, re.M), context

    # No app at zero, by the demo's own sampling: least availability equals the replica count
    # (maxUnavailable 0), and no per-second row shows an app at 0.
    least = re.search(r"Least available while draining: solo (\d+)/1, web (\d+)/3", out)
    assert least and least.groups() == ("1", "3"), context
    rows = re.findall(r"^\s+[\d.]+s\s+\w+\s+\d+\s+\d+\s+solo (\d+)/1\s+web (\d+)/3$", out, re.M)
    assert rows and all(int(s) >= 1 and int(w) >= 1 for s, w in rows), context
    assert "demo result: Drained with zero downtime" in out, context
