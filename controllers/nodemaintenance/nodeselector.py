"""The node selectors a NodeMaintenance writes and reads by name.

Matching a selector against a node is `kubeutil.nodeaffinity`'s, shared with the scheduler; what
stays here is what only maintenance needs: the selector `aiokcm drain NODE...` writes, and the
bound on the names such a selector can select, so that a maintenance of a few named nodes does not
match every node of a large cluster on each sync.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubeutil.nodeaffinity import NODE_NAME_FIELD, requirement_values


def named_nodes(selector: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The only node names `selector` can select, or None when it may select any node.

    A term requiring `metadata.name In [...]` selects at most those names, and a term with
    neither expressions nor fields selects nothing; a selector whose every term is one of the
    two is bounded by the union. That is what `aiokcm drain NODE...` writes, so such a
    maintenance looks its nodes up by name instead of matching every node in the cluster on
    each sync (thousands of nodes).
    """
    if not selector:
        return frozenset()
    names: set[str] = set()
    for term in selector.get("nodeSelectorTerms") or []:
        exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not fields:
            continue
        bound = next(
            (
                requirement_values(req)
                for req in fields
                if req.get("key") == NODE_NAME_FIELD and req.get("operator") == "In"
            ),
            None,
        )
        if bound is None:
            return None
        names.update(bound)
    return frozenset(names)


def names_selector(nodes: Sequence[str]) -> dict[str, Any]:
    """The selector the CLI writes for `aiokcm drain NODE...`: exactly those nodes by name."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": sorted(set(nodes))}]}
        ]
    }
