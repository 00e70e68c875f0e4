"""The taint-eviction controller: KCM's NoExecute taint manager (`taint-eviction-controller`).

`controller` wires the informers, the sharded update queue and the deletion timer;
`schedulesync` judges pods against their node's NoExecute taints, `evictionsync` deletes a pod
whose time came, and `state` holds the schedules both share.
"""

from controllers.tainteviction.controller import TaintEvictionController

__all__ = ["TaintEvictionController"]
