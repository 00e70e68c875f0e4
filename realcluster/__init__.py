"""A real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) for tests and benchmarks.

Like `localcluster`, it stands apart from the product: only tests and benchmarks import it.
"""

from realcluster.assets import ENV, Assets, AssetsError, assets_from_env, find_assets
from realcluster.cluster import RealCluster, reset_world
from realcluster.controlplane import KCM_BESIDE_AIOKCM, REPLACED_BY_AIOKCM, ControlPlane, ControlPlaneError
from realcluster.kubelet import ApiKubelet, ApiKubelets

__all__ = [
    "ENV",
    "KCM_BESIDE_AIOKCM",
    "REPLACED_BY_AIOKCM",
    "ApiKubelet",
    "ApiKubelets",
    "Assets",
    "AssetsError",
    "ControlPlane",
    "ControlPlaneError",
    "RealCluster",
    "assets_from_env",
    "find_assets",
    "reset_world",
]
