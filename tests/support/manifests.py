"""Applying the project's manifests as an operator does: the real `kubectl apply -f` of each file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import anyio


async def kubectl_apply(kubeconfig: str, manifests: Iterable[Path]) -> None:
    """`kubectl apply` every manifest (a file or a folder); fails the test with kubectl's own words."""
    applied = await anyio.run_process(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", *[arg for m in manifests for arg in ("-f", str(m))]],
        check=False,
    )
    assert applied.returncode == 0, applied.stderr.decode()
