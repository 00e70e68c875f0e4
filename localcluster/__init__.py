"""localcluster: an embedded Kubernetes API server for tests, demos and benchmarks.

`LocalCluster` (in `localcluster.cluster`) serves the real REST and watch protocol over HTTP so
kubectl and kubernetes_asyncio talk to it unchanged. Import it from `localcluster.cluster`
(kept out of this package's import so `import localcluster.registry` stays light).
"""
