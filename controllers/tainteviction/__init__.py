"""The taint-eviction controller: KCM's NoExecute taint manager (`taint-eviction-controller`).

`controller` holds the wiring, the sharded workers and the scheduled deletions.
"""

from controllers.tainteviction.controller import TaintEvictionController

__all__ = ["TaintEvictionController"]
