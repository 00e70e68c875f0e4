"""Applying the project's manifests as an operator does: the real `kubectl apply -f` of each file.

The EvictionRequest API's CRDs make fields immutable with CEL transition rules (`oldSelf`). The
real tier's kube-apiserver, v1.24.0-alpha.2, predates them and refuses such a CRD as a whole, where
every released server either runs the rules or (without CEL) drops them: there, and only after that
refusal, the CRDs are applied again without those rules (`controller_manager.crds`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from subprocess import CompletedProcess
from tempfile import TemporaryDirectory

import anyio
import yaml

from controller_manager.crds import without_transition_rules

#: How a kube-apiserver whose CEL has no transition rules refuses a CRD that uses them.
OLDSELF_REFUSED = "undeclared reference to 'oldSelf'"


async def kubectl_apply(kubeconfig: str, manifests: Iterable[Path]) -> None:
    """`kubectl apply` every manifest (a file or a folder); fails the test with kubectl's own words."""
    manifests = list(manifests)
    applied = await _apply(kubeconfig, manifests)
    if applied.returncode != 0 and OLDSELF_REFUSED in applied.stderr.decode():
        with TemporaryDirectory(prefix="manifests-") as scratch:
            applied = await _apply(kubeconfig, without_transition_rules_in(manifests, Path(scratch)))
    assert applied.returncode == 0, applied.stderr.decode()


async def _apply(kubeconfig: str, manifests: list[Path]) -> CompletedProcess[bytes]:
    return await anyio.run_process(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", *[arg for m in manifests for arg in ("-f", str(m))]],
        check=False,
    )


def without_transition_rules_in(manifests: Iterable[Path], scratch: Path) -> list[Path]:
    """Copies of `manifests` (files, or the YAML files of folders) in `scratch`, every
    CustomResourceDefinition in them without its transition rules."""
    out: list[Path] = []
    for manifest in manifests:
        files = (
            sorted(manifest.glob("*.yaml")) + sorted(manifest.glob("*.yml"))
            if manifest.is_dir()
            else [manifest]
        )
        for file in files:
            docs = [d for d in yaml.safe_load_all(file.read_text()) if d]
            docs = [
                without_transition_rules(d) if d.get("kind") == "CustomResourceDefinition" else d
                for d in docs
            ]
            copy = scratch / f"{len(out)}-{file.name}"
            copy.write_text(yaml.safe_dump_all(docs, sort_keys=False))
            out.append(copy)
    return out
