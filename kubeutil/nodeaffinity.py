"""`v1.NodeSelector` matching, as `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`.

The node-maintenance controller picks its nodes with the same selector a pod's required node
affinity uses, so operators reuse what they know. Semantics kept from Kubernetes:

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

NODE_NAME_FIELD = "metadata.name"


def requirement_values(req: Mapping[str, Any]) -> list[str]:
    return [str(v) for v in (req.get("values") or [])]


def requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    """One `NodeSelectorRequirement` against the value it names (None when absent)."""
    op = req.get("operator")
    values = requirement_values(req)
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
    if key == NODE_NAME_FIELD:
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
        if key != NODE_NAME_FIELD or req.get("operator") not in ("In", "NotIn"):
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
