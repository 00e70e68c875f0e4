"""The Kubernetes vocabulary every layer shares, the local cluster too: label and field selectors,
timestamps, status conditions, taints and tolerations, node affinity. Pure functions on plain
dicts, no I/O, so one answer holds wherever the question is asked."""
