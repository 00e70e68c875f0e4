"""`v1.NodeSelector` matching and a pod's required node affinity, as
`k8s.io/component-helpers/scheduling/corev1/nodeaffinity` does it.

The scheduler places pods and the node-maintenance controller picks nodes with this one matcher,
so a selector means the same thing to both. Kept from Kubernetes:

- the terms are ORed; inside a term, `matchExpressions` (labels) and `matchFields` are ANDed;
- a term with neither expressions nor fields matches nothing, and so does a selector without terms;
- a requirement `labels.NewRequirement` would refuse (an unknown operator, an invalid key or
  value, values with `Exists`/`DoesNotExist`, none with `In`/`NotIn`, not exactly one integer with
  `Gt`/`Lt`) makes its term match nothing, as the scheduler's `LazyErrorNodeSelector` skips a
  term that does not parse: a typo must never select every node in the cluster;
- `matchFields` supports only `metadata.name` (what the scheduler supports), with `In`/`NotIn`.

One leniency stays: `matchFields` takes any number of names, where Kubernetes wants exactly one.
`aiokcm drain NODE...` writes its nodes as one such list, and stored NodeMaintenances carry it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubeutil.selectors import is_label_key, is_label_value
from kubeutil.strconv import parse_int

NODE_NAME_FIELD = "metadata.name"

_SET_OPERATORS = frozenset({"In", "NotIn"})
_EXISTENCE_OPERATORS = frozenset({"Exists", "DoesNotExist"})
_ORDER_OPERATORS = frozenset({"Gt", "Lt"})


def requirement_values(req: Mapping[str, Any]) -> list[str]:
    return [str(v) for v in (req.get("values") or [])]


def _label_requirement_valid(req: Mapping[str, Any], values: Sequence[str]) -> bool:
    """What `labels.NewRequirement` accepts (the key, the operator's arity, every value)."""
    op = req.get("operator")
    if not is_label_key(str(req.get("key", ""))):
        return False
    if op in _SET_OPERATORS:
        arity_ok = bool(values)
    elif op in _EXISTENCE_OPERATORS:
        arity_ok = not values
    elif op in _ORDER_OPERATORS:
        arity_ok = len(values) == 1 and parse_int(values[0]) is not None
    else:
        return False
    return arity_ok and all(is_label_value(v) for v in values)


def requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    """One valid `NodeSelectorRequirement` against the value it names (None when absent)."""
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
    if op in _ORDER_OPERATORS:
        if len(values) != 1 or value is None:
            return False
        have, want = parse_int(value), parse_int(values[0])
        if have is None or want is None:
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
        if not _label_requirement_valid(req, requirement_values(req)):
            return False
        if not requirement_matches(req, labels.get(str(req.get("key", "")))):
            return False
    for req in fields:
        key = str(req.get("key", ""))
        if key != NODE_NAME_FIELD or req.get("operator") not in _SET_OPERATORS:
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


def pod_matches_node(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """`GetRequiredNodeAffinity(pod).Match(node)`: `nodeSelector` and the required affinity, ANDed.

    A pod without a required affinity fits any node its `nodeSelector` allows; one whose required
    affinity has no terms fits none.
    """
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return required is None or selector_matches(required, node)
