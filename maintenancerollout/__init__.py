"""Rolling node maintenance: the vocabulary and the decisions of a NodeMaintenance with
`spec.completion`, everything that is not a Kubernetes write.

It sits below `controllers/` (beside `nodemaintenancelease/`) so that the NodeMaintenance controller
and the CLI share it; the design is in docs/rolling-maintenance.md.
"""
