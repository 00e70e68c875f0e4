"""`bench.drain`'s choice of nodes: every mode drains nodes of the same, typical size."""

from __future__ import annotations

from bench.drain import typical_nodes


def _pods(layout: dict[str, int]) -> list[dict[str, object]]:
    return [{"spec": {"nodeName": node}} for node, count in layout.items() for _ in range(count)]


def test_the_nodes_nearest_the_mean_pod_count_are_drained_in_node_order() -> None:
    layout = {"node-1": 23, "node-2": 20, "node-3": 17, "node-4": 20, "node-5": 20, "node-10": 20}
    nodes = list(layout)
    assert typical_nodes(nodes, _pods(layout), 1) == ["node-2"]
    assert typical_nodes(nodes, _pods(layout), 3) == ["node-2", "node-4", "node-5"]
    assert typical_nodes(nodes, _pods(layout), 5) == ["node-1", "node-2", "node-4", "node-5", "node-10"]


def test_two_layouts_of_the_same_pods_drain_the_same_number_of_pods() -> None:
    first = {"node-1": 23, "node-2": 20, "node-3": 17}
    second = {"node-1": 20, "node-2": 19, "node-3": 21}
    drained = []
    for layout in (first, second):
        chosen = typical_nodes(list(layout), _pods(layout), 1)
        drained.append(sum(layout[n] for n in chosen))
    assert drained == [20, 20]
