"""The structured-merge-diff port: merge triplets from SMD's own `typed/merge_test.go` (sets and
associative lists, without its duplicate-item cases), field-set operations and path strings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localcluster import errors
from localcluster.fieldmanager import fieldpath, managed, typed
from localcluster.fieldmanager.typeinfo import ASSOCIATIVE, LIST, MAP, SCALAR, SET, STRUCT, Type

_S = Type(SCALAR)
GRAB_BAG = Type(
    STRUCT,
    fields={
        "numeric": _S,
        "string": _S,
        "bool": _S,
        "setStr": Type(LIST, elem=_S, list_type=SET),
        "setBool": Type(LIST, elem=_S, list_type=SET),
        "setNumeric": Type(LIST, elem=_S, list_type=SET),
    },
)
ELEMENT = Type(STRUCT, fields={"key": _S, "id": _S, "value": Type(MAP, elem=_S), "bv": _S, "nv": _S})
ROOT = Type(
    STRUCT,
    fields={
        "list": Type(LIST, elem=ELEMENT, list_type=ASSOCIATIVE, keys=("key", "id")),
        "atomicList": Type(LIST, elem=_S, atomic=True),
    },
)

SET_TRIPLETS = [
    ('{"numeric":1}', '{"numeric":3.14159}', '{"numeric":3.14159}'),
    ('{"string":"aoeu"}', '{"bool":true}', '{"string":"aoeu","bool":true}'),
    ('{"setStr":["a","b","c"]}', '{"setStr":["a","b"]}', '{"setStr":["a","b","c"]}'),
    ('{"setStr":["a","b"]}', '{"setStr":["a","b","c"]}', '{"setStr":["a","b","c"]}'),
    ('{"setStr":["a","b","c"]}', '{"setStr":[]}', '{"setStr":["a","b","c"]}'),
    ('{"setStr":[]}', '{"setStr":["a","b","c"]}', '{"setStr":["a","b","c"]}'),
    ('{"setStr":["a","b"]}', '{"setStr":["b","a"]}', '{"setStr":["b","a"]}'),
    ('{"setStr":["a","b","c"]}', '{"setStr":["d","e","f"]}', '{"setStr":["a","b","c","d","e","f"]}'),
    ('{"setStr":["a","b","c"]}', '{"setStr":["c","d","e","f"]}', '{"setStr":["a","b","c","d","e","f"]}'),
    (
        '{"setStr":["a","b","c","g","f"]}',
        '{"setStr":["c","d","e","f"]}',
        '{"setStr":["a","b","c","g","d","e","f"]}',
    ),
    ('{"setStr":["c","d","e","f"]}', '{"setStr":["a","c","e"]}', '{"setStr":["a","c","d","e","f"]}'),
    (
        '{"setStr":["a","b","c","x","y","z"]}',
        '{"setStr":["d","e","f"]}',
        '{"setStr":["a","b","c","x","y","z","d","e","f"]}',
    ),
    (
        '{"setStr":["a","b","c","x","y","z"]}',
        '{"setStr":["d","e","f","x","y","z"]}',
        '{"setStr":["a","b","c","d","e","f","x","y","z"]}',
    ),
    ('{"setStr":["c","a","g","f"]}', '{"setStr":["c","f","a","g"]}', '{"setStr":["c","f","a","g"]}'),
    ('{"setStr":["a","b","c","d"]}', '{"setStr":["d","e","f","a"]}', '{"setStr":["b","c","d","e","f","a"]}'),
    (
        '{"setStr":["c","d","e","f","g","h","i","j"]}',
        '{"setStr":["2","h","3","e","4","k","l"]}',
        '{"setStr":["c","d","f","g","2","h","i","j","3","e","4","k","l"]}',
    ),
    (
        '{"setStr":["a","b","c","d","e","f","g","h","i","j"]}',
        '{"setStr":["1","b","2","h","3","e","4","k","l"]}',
        '{"setStr":["a","1","b","c","d","f","g","2","h","i","j","3","e","4","k","l"]}',
    ),
    ('{"setBool":[true]}', '{"setBool":[false]}', '{"setBool":[true,false]}'),
    ('{"setNumeric":[1,2,3.14159]}', '{"setNumeric":[1,2,3]}', '{"setNumeric":[1,2,3.14159,3]}'),
]

ASSOCIATIVE_TRIPLETS = [
    (
        '{"list":[{"key":"a","id":1,"value":{"a":"a"}}]}',
        '{"list":[{"key":"a","id":1,"value":{"a":"a"}}]}',
        '{"list":[{"key":"a","id":1,"value":{"a":"a"}}]}',
    ),
    (
        '{"list":[{"key":"a","id":1,"value":{"a":"a"}}]}',
        '{"list":[{"key":"a","id":2,"value":{"a":"a"}}]}',
        '{"list":[{"key":"a","id":1,"value":{"a":"a"}},{"key":"a","id":2,"value":{"a":"a"}}]}',
    ),
    (
        '{"list":[{"key":"a","id":1},{"key":"b","id":1}]}',
        '{"list":[{"key":"a","id":1},{"key":"a","id":2}]}',
        '{"list":[{"key":"a","id":1},{"key":"b","id":1},{"key":"a","id":2}]}',
    ),
    (
        '{"list":[{"key":"b","id":2}]}',
        '{"list":[{"key":"a","id":1},{"key":"b","id":2},{"key":"c","id":3}]}',
        '{"list":[{"key":"a","id":1},{"key":"b","id":2},{"key":"c","id":3}]}',
    ),
    (
        '{"list":[{"key":"a","id":1},{"key":"b","id":2},{"key":"c","id":3}]}',
        '{"list":[{"key":"c","id":3},{"key":"b","id":2}]}',
        '{"list":[{"key":"a","id":1},{"key":"c","id":3},{"key":"b","id":2}]}',
    ),
    (
        '{"list":[{"key":"a","id":1},{"key":"b","id":2},{"key":"c","id":3}]}',
        '{"list":[{"key":"c","id":3},{"key":"a","id":1}]}',
        '{"list":[{"key":"b","id":2},{"key":"c","id":3},{"key":"a","id":1}]}',
    ),
    ('{"atomicList":["a","b","c"]}', '{"atomicList":[]}', '{"atomicList":[]}'),
    ('{"atomicList":["a","a","a"]}', '{"atomicList":["a","a"]}', '{"atomicList":["a","a"]}'),
]


@pytest.mark.parametrize(("lhs", "rhs", "out"), SET_TRIPLETS)
def test_merge_sets_and_scalars(lhs: str, rhs: str, out: str) -> None:
    assert typed.merge(json.loads(lhs), json.loads(rhs), GRAB_BAG) == json.loads(out)


@pytest.mark.parametrize(("lhs", "rhs", "out"), ASSOCIATIVE_TRIPLETS)
def test_merge_associative_lists(lhs: str, rhs: str, out: str) -> None:
    assert typed.merge(json.loads(lhs), json.loads(rhs), ROOT) == json.loads(out)


def test_field_set_names_leaves_items_and_map_keys() -> None:
    obj = {"list": [{"key": "a", "id": 1, "value": {"x": "1"}}], "atomicList": ["q"]}
    assert typed.field_set(obj, ROOT) == {
        "f:list": {'k:{"id":1,"key":"a"}': {".": {}, "f:key": {}, "f:id": {}, "f:value": {"f:x": {}}}},
        "f:atomicList": {},
    }


SET_OPS: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # a, b, a ∪ b, a − b, a ∩ b
    ({"f:a": {}}, {"f:b": {}}, {"f:a": {}, "f:b": {}}, {"f:a": {}}, {}),
    ({"f:a": {"f:x": {}}}, {"f:a": {".": {}}}, {"f:a": {".": {}, "f:x": {}}}, {"f:a": {"f:x": {}}}, {}),
    (
        {"f:a": {".": {}, "f:x": {}}},
        {"f:a": {"f:x": {}}},
        {"f:a": {".": {}, "f:x": {}}},
        {"f:a": {}},
        {"f:a": {"f:x": {}}},
    ),
    (
        {"f:s": {'v:"a"': {}, 'v:"b"': {}}},
        {"f:s": {'v:"b"': {}}},
        {"f:s": {'v:"a"': {}, 'v:"b"': {}}},
        {"f:s": {'v:"a"': {}}},
        {"f:s": {'v:"b"': {}}},
    ),
]


@pytest.mark.parametrize(("a", "b", "union", "difference", "intersection"), SET_OPS)
def test_set_operations(a: Any, b: Any, union: Any, difference: Any, intersection: Any) -> None:
    assert fieldpath.union(a, b) == union
    assert fieldpath.difference(a, b) == difference
    assert fieldpath.intersection(a, b) == intersection


def test_paths_print_as_the_real_server_names_them() -> None:
    trie = {
        "f:spec": {
            "f:containers": {'k:{"name":"app"}': {"f:image": {}}},
            "f:ports": {'k:{"port":80,"protocol":"TCP"}': {}},
            "f:finalizers": {'v:"x/y"': {}},
            "f:args": {"i:2": {}},
        }
    }
    assert [fieldpath.path_string(p) for p in fieldpath.members(trie)] == [
        ".spec.args[2]",
        '.spec.containers[name="app"].image',
        '.spec.finalizers[="x/y"]',
        '.spec.ports[port=80,protocol="TCP"]',
    ]


def test_fields_v1_is_serialized_in_go_order() -> None:
    trie: fieldpath.Trie = {
        "f:b": {},
        "f:a": {"f:z": {}, ".": {}, "f:y": {}},
        "f:l": {'k:{"id":10}': {}, 'k:{"id":9}': {}},
    }
    assert json.dumps(fieldpath.sort_trie(trie)) == json.dumps(
        {"f:a": {".": {}, "f:y": {}, "f:z": {}}, "f:b": {}, "f:l": {'k:{"id":9}': {}, 'k:{"id":10}': {}}}
    )


def test_apply_removes_what_it_stopped_applying_unless_someone_else_owns_it() -> None:
    cm = Type(STRUCT, fields={"data": Type(MAP, elem=_S)})
    live = {"data": {"x": "1", "y": "2"}}
    owners = {
        ("b", "Apply", "", ""): managed.Entry("b", "Apply", "v1", "", {"f:data": {"f:y": {}}}, None),
        ("a", "Apply", "", ""): managed.Entry(
            "a", "Apply", "v1", "", {"f:data": {"f:x": {}, "f:y": {}}}, None
        ),
    }
    merged, after = managed.apply(live, {}, owners, "a", "", cm, force=False)
    assert merged == {"data": {"y": "2"}}
    assert ("a", "Apply", "", "") not in after  # it owns nothing any more
    with pytest.raises(
        errors.StatusError, match=r'Apply failed with 1 conflict: conflict with "b": \.data\.y'
    ):
        managed.apply(merged, {"data": {"y": "3"}}, after, "a", "", cm, force=False)


def test_create_fast_path_equals_a_diff_from_the_zero_object() -> None:
    from localcluster.builtin import schemas
    from localcluster.fieldmanager.typeinfo import of_schema

    pod_type = of_schema(schemas.kind_schema("", "v1", "Pod"), root=True)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}, "finalizers": ["x/y"]},
        "spec": {
            "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}], "resources": {}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "nodeName": "n",
        },
        "status": {"phase": "Pending"},
    }
    assert typed.created(pod, pod_type) == typed.diff({}, pod, pod_type)[0]
    assert typed.created(pod, pod_type)["f:spec"]["f:containers"]['k:{"name":"c"}']["f:ports"] == {
        ".": {},
        'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}},
    }


def test_more_than_ten_updaters_merge_the_oldest_into_ancient_changes() -> None:
    """`TestCapManagersManagerMergesEntries` in spirit: the oldest updates share one bucket."""
    owners: managed.Managed = {}
    for i in range(12):
        fields: fieldpath.Trie = {"f:data": {f"f:k{i}": {}}}
        owners[(f"m{i:02}", "Update", "v1", "")] = managed.Entry(
            f"m{i:02}", "Update", "v1", "", fields, f"2024-01-01T00:00:{i:02}Z"
        )
    capped = managed.cap_updaters(owners)
    assert len(capped) == 10
    bucket = capped["ancient-changes", "Update", "v1", ""]
    assert bucket.fields == {"f:data": {"f:k0": {}, "f:k1": {}, "f:k2": {}}}
    assert bucket.time == "2024-01-01T00:00:02Z"
    assert ("m03", "Update", "v1", "") in capped and ("m00", "Update", "v1", "") not in capped
