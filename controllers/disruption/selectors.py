"""Each budget's parsed selector, shared by the pod handlers and the budget sync.

Every pod event asks which budgets select the pod, so parsing every budget's selector on every
event would dominate a busy namespace; a budget's selector only changes with its generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from informers import Lister
from kubeutil.meta import object_meta
from kubeutil.selectors import Selector, SelectorError, from_label_selector

Obj = dict[str, Any]


class BudgetSelectors:
    """Budget selectors parsed once per generation, keyed by the budget's UID."""

    def __init__(self, pdb_lister: Lister, pod_lister: Lister) -> None:
        self.pdb_lister = pdb_lister
        self.pod_lister = pod_lister
        self._selectors: dict[str, tuple[Any, Selector | None]] = {}

    def forget(self, pdb: Mapping[str, Any]) -> None:
        self._selectors.pop(str(object_meta(pdb).get("uid", "")), None)

    def selector_of(self, pdb: Mapping[str, Any]) -> Selector:
        """The budget's selector; raises `SelectorError` when invalid."""
        meta = object_meta(pdb)
        uid, generation = str(meta.get("uid", "")), meta.get("generation")
        cached = self._selectors.get(uid)
        if cached is not None and cached[0] == generation and cached[1] is not None:
            return cached[1]
        try:
            selector = from_label_selector((pdb.get("spec") or {}).get("selector"))
        except SelectorError:
            self._selectors[uid] = (generation, None)
            raise
        self._selectors[uid] = (generation, selector)
        return selector

    def pdbs_for_pod(self, pod: Mapping[str, Any]) -> list[Obj]:
        """`GetPodPodDisruptionBudgets`: budgets in the pod's namespace whose valid selector matches it."""
        labels = object_meta(pod).get("labels") or {}
        out: list[Obj] = []
        for pdb in self.pdb_lister.list(str(object_meta(pod).get("namespace", ""))):
            try:
                selector = self.selector_of(pdb)
            except SelectorError:
                continue
            if selector.matches(labels):
                out.append(pdb)
        return out

    def pods_for_pdb(self, pdb: Mapping[str, Any]) -> list[Obj]:
        """`getPodsForPdb`; raises `SelectorError` for an invalid selector."""
        selector = self.selector_of(pdb)
        return self.pod_lister.list(str(object_meta(pdb).get("namespace", "")), selector=selector)
