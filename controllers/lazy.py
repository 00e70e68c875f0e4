"""A package's public names imported on first use (PEP 562).

The command line's parser reads the controllers' flag configuration from their packages; importing
each controller there would load the API client and cost a second before a mistyped flag is
answered. A package exports its controller through `lazy_exports` instead of importing it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `exports[name]` (a module path) when
    `name` is first read."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
