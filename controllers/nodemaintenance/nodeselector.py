"""Core `v1.NodeSelector` matching, as `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`.

A NodeMaintenance picks its nodes with the same selector a pod's required node affinity uses, so
operators reuse what they know. Semantics kept from Kubernetes:

- the terms are ORed; inside a term, `matchExpressions` (labels) and `matchFields` are ANDed;
- a term with neither expressions nor fields matches nothing (a null/empty term selects no node),
  and a selector without terms matches nothing;
- `Gt`/`Lt` take exactly one integer value and compare it with an integer label value;
- `matchFields` supports only `metadata.name` (what the scheduler supports), with `In`/`NotIn`.

An invalid requirement makes its term match nothing rather than raise, as the scheduler's
`LazyErrorNodeSelector` does: a typo must never select every node in the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_SUPPORTED_FIELDS = frozenset({"metadata.name"})


def _values(req: Mapping[str, Any]) -> list[str]:
    return [str(v) for v in (req.get("values") or [])]


def requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    """One `NodeSelectorRequirement` against the value it names (None when absent)."""
    op = req.get("operator")
    values = _values(req)
    if op == "In":
        return bool(values) and value is not None and value in values
    if op == "NotIn":
        return bool(values) and (value is None or value not in values)
    if op == "Exists":
        return not values and value is not None
    if op == "DoesNotExist":
        return not values and value is None
    if op in ("Gt", "Lt"):
        if len(values) != 1 or value is None:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_value(node: Mapping[str, Any], key: str) -> str | None:
    if key == "metadata.name":
        name = (node.get("metadata") or {}).get("name")
        return str(name) if name is not None else None
    return None


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    exprs: Sequence[Mapping[str, Any]] = term.get("matchExpressions") or []
    fields: Sequence[Mapping[str, Any]] = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    for req in exprs:
        if not requirement_matches(req, labels.get(str(req.get("key", "")))):
            return False
    for req in fields:
        key = str(req.get("key", ""))
        if key not in _SUPPORTED_FIELDS or req.get("operator") not in ("In", "NotIn"):
            return False
        if not requirement_matches(req, _field_value(node, key)):
            return False
    return True


def selector_matches(selector: Mapping[str, Any] | None, node: Mapping[str, Any]) -> bool:
    """Whether `node` is selected; a missing selector or one without terms selects nothing."""
    if not selector:
        return False
    terms: Sequence[Mapping[str, Any]] = selector.get("nodeSelectorTerms") or []
    return any(term_matches(term, node) for term in terms)


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
                _values(req)
                for req in fields
                if req.get("key") == "metadata.name" and req.get("operator") == "In"
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
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": sorted(set(nodes))}]}
        ]
    }
