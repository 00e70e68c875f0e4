"""Where the control-plane binaries are: controller-runtime envtest's `KUBEBUILDER_ASSETS` convention.

The folder holds `kube-apiserver` and `etcd`, optionally `kube-controller-manager` and
`kube-scheduler`. envtest's `setup-envtest use -p path` prints such a folder; so does
`../shared/realk8s/assets.sh` for the v1.24 binaries built from Kubernetes' source. An `etcd`
missing from the folder is looked up on PATH, as a Debian `etcd-server` install provides it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

ENV = "KUBEBUILDER_ASSETS"


class AssetsError(RuntimeError):
    """The folder named by KUBEBUILDER_ASSETS lacks a binary the control plane needs."""


@dataclass(frozen=True)
class Assets:
    folder: Path
    kube_apiserver: Path
    etcd: Path
    kube_controller_manager: Path | None
    kube_scheduler: Path | None


def _executable(path: Path) -> Path | None:
    return path if path.is_file() and os.access(path, os.X_OK) else None


def find_assets(folder: str | os.PathLike[str]) -> Assets:
    base = Path(folder)
    apiserver = _executable(base / "kube-apiserver")
    if apiserver is None:
        raise AssetsError(f"{ENV}={base}: no executable kube-apiserver there")
    etcd = _executable(base / "etcd")
    if etcd is None:
        found = shutil.which("etcd")
        if found is None:
            raise AssetsError(f"{ENV}={base}: no etcd there nor on PATH")
        etcd = Path(found)
    return Assets(
        folder=base,
        kube_apiserver=apiserver,
        etcd=etcd,
        kube_controller_manager=_executable(base / "kube-controller-manager"),
        kube_scheduler=_executable(base / "kube-scheduler"),
    )


def assets_from_env() -> Assets | None:
    """The assets named by KUBEBUILDER_ASSETS, or None when it is unset or empty."""
    folder = os.environ.get(ENV, "").strip()
    return find_assets(folder) if folder else None
