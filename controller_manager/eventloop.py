"""The event loop `aiokcm run` runs on: uvloop where it is installed, asyncio's own otherwise.

Why: an idle manager's CPU is mostly the loop's own work per socket read and timer (at 20,000
nodes the node-Lease watch alone brings 2,000 renewals a second). uvloop does that work in C
(libuv), so the same reads cost less; nothing in the manager depends on which loop it runs on.
It is a dependency of the package, but an install without it (a platform it does not build on,
an image that leaves it out) still runs, on the default loop.
"""

from __future__ import annotations

import importlib.util
from typing import Any


def backend_options() -> dict[str, Any]:
    """`anyio.run`'s backend options: uvloop if it can be imported, else none (asyncio's loop)."""
    if importlib.util.find_spec("uvloop") is None:
        return {}
    return {"use_uvloop": True}
