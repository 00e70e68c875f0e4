"""The EvictionRequest API (KEP-4563): its names, where it is served, and its validation.

Kubernetes serves `lifecycle.k8s.io/v1alpha1` from 1.37 behind the `EvictionRequestAPI` gate;
older or unconfigured clusters get the same kinds from aiokcm's CustomResourceDefinitions in
`lifecycle.aiokcm.io` (a `*.k8s.io` group is Kubernetes' to define). Controllers, the CLI and the
webhook all speak through this package, so they agree on which group is in use and on what a
valid requester or responder name is without depending on one another.
"""
