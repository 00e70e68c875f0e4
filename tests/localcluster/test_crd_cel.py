"""CEL in CRD `x-kubernetes-validations`: Kubernetes' extension functions and CEL's semantics.

Each case is a field of one CRD carrying one rule; one object holds every case's value. The
422 that creating it returns names each field whose rule evaluated to false (`failed rule`) or
failed at run time (`evaluating rule`); every other rule held. The same round trip runs on the
real kube-apiserver (v1.24, CustomResourceValidationExpressions on), which decides each verdict.
Its build, v1.24.0-alpha.2, predates Kubernetes' lists, regex and URL libraries and `oldSelf`
(all in v1.24.0): there those tests check the server refuses them, as it does.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import orjson
import pytest

from apiclient import KubeClient
from localcluster.cel import CelError, CelSyntaxError, compile_rule
from tests.localcluster.helpers import bare_cluster
from tests.localcluster.test_api_shapes import raw
from tests.support.waiting import eventually

cluster = pytest.fixture(bare_cluster)

GROUP = "cel.test.aiokcm.io"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

# Bounded sizes keep every rule within the real server's estimated-cost limit.
STR: dict[str, Any] = {"type": "string", "maxLength": 64}
INT: dict[str, Any] = {"type": "integer"}
INTS: dict[str, Any] = {"type": "array", "maxItems": 8, "items": INT}
STRS: dict[str, Any] = {"type": "array", "maxItems": 8, "items": STR}
OBJ: dict[str, Any] = {"type": "object", "properties": {"a": INT, "b": INT, "x-y": INT, "if": INT}}
LABELS: dict[str, Any] = {"type": "object", "maxProperties": 8, "additionalProperties": STR}

PASS, FAIL, ERROR = "pass", "fail", "error"

# (case, field schema, value, rule, verdict)
CASES: list[tuple[str, dict[str, Any], Any, str, str]] = [
    # cel-go ext.Strings
    ("charAt", STR, "abc", "self.charAt(1) == 'b' && self.charAt(3) == ''", PASS),
    ("charAtOutOfRange", STR, "abc", "self.charAt(4) == ''", ERROR),
    (
        "stringIndexOf",
        STR,
        "hello",
        "self.indexOf('l') == 2 && self.indexOf('l', 3) == 3 && self.indexOf('z') == -1",
        PASS,
    ),
    ("stringLastIndexOf", STR, "hello", "self.lastIndexOf('l') == 3 && self.lastIndexOf('l', 2) == 2", PASS),
    ("asciiCase", STR, "AbC-é", "self.lowerAscii() == 'abc-é' && self.upperAscii() == 'ABC-é'", PASS),
    ("replace", STR, "aaa", "self.replace('a', 'b') == 'bbb' && self.replace('a', 'b', 2) == 'bba'", PASS),
    ("split", STR, "a,b,c", "self.split(',') == ['a', 'b', 'c'] && self.split(',', 2) == ['a', 'b,c']", PASS),
    ("substring", STR, "hello", "self.substring(1, 3) == 'el' && self.substring(4) == 'o'", PASS),
    ("substringOutOfRange", STR, "hello", "self.substring(3, 9) == ''", ERROR),
    ("trim", STR, "  x \t", "self.trim() == 'x'", PASS),
    ("matches", STR, "abc", "self.matches('^[a-z]+$') && !self.matches('[0-9]')", PASS),  # RE2
    # has, macros, maps
    ("has", OBJ, {"a": 1}, "has(self.a) && !has(self.b)", PASS),
    ("all", INTS, [1, 2], "self.all(x, x > 0)", PASS),
    ("allFails", INTS, [1, -2], "self.all(x, x > 0)", FAIL),
    (
        "exists",
        INTS,
        [1, 2],
        "self.exists(x, x == 2) && self.exists_one(x, x > 1) && !self.exists(x, x > 5)",
        PASS,
    ),
    (
        "mapFilter",
        INTS,
        [1, 2, 3],
        "self.map(x, x * 2) == [2, 4, 6] && self.filter(x, x > 1) == [2, 3]",
        PASS,
    ),
    (
        "mapKeys",
        LABELS,
        {"app": "x", "apptier": "y"},
        "self.all(k, k.startsWith('app')) && 'app' in self && self.app == 'x'",
        PASS,
    ),
    ("escapedNames", OBJ, {"x-y": 1, "if": 2}, "self.x__dash__y == 1 && self.__if__ == 2", PASS),
    # errors: a missing field is a runtime error, absorbed by a decisive || / && side
    ("missingKey", OBJ, {}, "self.a > 0", ERROR),
    ("orAbsorbs", OBJ, {}, "self.a > 0 || true", PASS),
    ("orAbsorbsLeft", OBJ, {}, "true || self.a > 0", PASS),
    ("andAbsorbs", OBJ, {}, "self.a > 0 && false", FAIL),
    ("orBothErrors", OBJ, {}, "self.a > 0 || self.b > 0", ERROR),
    # arithmetic and types
    ("intDivision", INT, -7, "self / 2 == -3 && self % 2 == -1", PASS),
    ("divisionByZero", INT, 0, "1 / self == 1", ERROR),
    ("overflow", INT, 9223372036854775807, "self + 1 > 0", ERROR),
    ("codePoints", STR, "héllo", "size(self) == 5", PASS),
    ("numberIsDouble", {"type": "number"}, 2, "self == 2.0 && self / 4.0 == 0.5", PASS),
    (
        "intOrString",
        {"x-kubernetes-int-or-string": True},
        "50%",
        "type(self) == string ? self.endsWith('%') : self < 100",
        PASS,
    ),
    (
        "intOrStringInt",
        {"x-kubernetes-int-or-string": True},
        150,
        "type(self) == string ? self.endsWith('%') : self < 100",
        FAIL,
    ),
    (
        "duration",
        {"type": "string", "format": "duration", "maxLength": 32},
        "1h30m",
        "self > duration('1h') && self < duration('2h')",
        PASS,
    ),
    (
        "dateTime",
        {"type": "string", "format": "date-time", "maxLength": 32},
        "2024-05-01T10:00:00Z",
        "self > timestamp('2024-01-01T00:00:00Z') && self.getFullYear() == 2024",
        PASS,
    ),
    ("dynEqualsOtherType", {"x-kubernetes-int-or-string": True}, 5, "self == 'x'", ERROR),
    ("ternaryIn", STR, "b", "self in ['a', 'b'] ? size(self) == 1 : false", PASS),
]

# Kubernetes' own libraries joined v1.24 after its alpha.2, the build the real tier runs, which
# refuses them as undeclared references; v1.24.0 has them, and so do we.
LIBRARY_CASES: list[tuple[str, dict[str, Any], Any, str, str]] = [
    # Kubernetes lists library
    ("isSorted", INTS, [1, 2, 2, 3], "self.isSorted() && ![2, 1].isSorted()", PASS),
    ("sumMinMax", INTS, [3, 1, 2], "self.sum() == 6 && self.min() == 1 && self.max() == 3", PASS),
    ("minOfEmpty", INTS, [], "self.min() == 0", ERROR),
    (
        "listIndexOf",
        STRS,
        ["a", "b", "b"],
        "self.indexOf('b') == 1 && self.lastIndexOf('b') == 2 && self.indexOf('z') == -1",
        PASS,
    ),
    # Kubernetes regex library (RE2)
    ("find", STR, "abc 123", "self.find('[0-9]+') == '123' && self.find('x') == ''", PASS),
    (
        "findAll",
        STR,
        "1 ab 22",
        "self.findAll('[0-9]+') == ['1', '22'] && self.findAll('[0-9]+', 1) == ['1']",
        PASS,
    ),
    # Kubernetes URL library
    (
        "url",
        STR,
        "https://example.com:8080/a%20b?k=1&k=2",
        "isURL(self) && url(self).getScheme() == 'https' && url(self).getHost() == 'example.com:8080'"
        " && url(self).getHostname() == 'example.com' && url(self).getPort() == '8080'"
        " && url(self).getEscapedPath() == '/a%20b' && url(self).getQuery() == {'k': ['1', '2']}",
        PASS,
    ),
    ("notURL", STR, "../relative", "isURL(self)", FAIL),
    # ext.Strings' join, also absent from alpha.2's cel-go
    ("join", STRS, ["a", "b"], "self.join('-') == 'a-b' && self.join() == 'ab'", PASS),
]

# Rules a v1.24 server refuses to compile, and the words its message carries.
UNCOMPILABLE = [
    ("foo(self)", "undeclared reference to 'foo'"),
    ("self.bogus()", "undeclared reference to 'bogus'"),
    ("other == 1", "undeclared reference to 'other'"),
    ("self.all(x, y > 0)", "undeclared reference to 'y'"),
    ("has(self)", "invalid argument to has() macro"),
    ("self.a == 1 || has(self.b)", "undefined field 'b'"),
    ("self ==", "Syntax error"),
]


UNCOMPILABLE_ON: dict[str, Any] = {"type": "object", "properties": {"a": INT}}


def _field(i: int) -> str:
    return f"c{i}"


def _crd(plural: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"plural": plural, "kind": plural.capitalize()[:-1]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}},
                }
            ],
        },
    }


def _spec_schema(cases: list[tuple[str, dict[str, Any], Any, str, str]]) -> dict[str, Any]:
    props = {}
    for i, (_, schema, _, rule, _) in enumerate(cases):
        props[_field(i)] = {**copy.deepcopy(schema), "x-kubernetes-validations": [{"rule": rule}]}
    return {"type": "object", "properties": props}


async def _alpha(kube: KubeClient) -> bool:
    """Whether the server is v1.24.0-alpha.2 (the real tier's build), from before Kubernetes'
    CEL libraries and transition rules."""
    code, version = await raw(kube, "GET", "/version")
    assert code == 200, version
    return "-alpha." in version["gitVersion"]


async def _create_crd(kube: KubeClient, crd: dict[str, Any]) -> str:
    code, body = await raw(kube, "POST", CRDS, crd)
    assert code == 201, body.get("message")
    plural = crd["spec"]["names"]["plural"]
    path = f"/apis/{GROUP}/v1/{plural}"

    async def served() -> bool:  # once the CRD is Established (a real server's 404 is plain text)
        with contextlib.suppress(orjson.JSONDecodeError):
            return (await raw(kube, "GET", path))[0] == 200
        return False

    await eventually(served, f"{plural} served", timeout=10.0)
    return path


def _verdicts(code: int, body: dict[str, Any]) -> dict[str, str]:
    """Each field's verdict from a create's answer: 201, or a 422 naming the rules that did not hold."""
    if code == 201:
        return {}
    assert code == 422, body
    out: dict[str, str] = {}
    for cause in body["details"]["causes"]:
        msg = cause["message"]
        out[cause["field"]] = (
            FAIL
            if "failed rule" in msg
            else ERROR
            if "evaluating rule" in msg or "did not match a supported" in msg
            else msg
        )
    return out


async def _check_cases(
    kube: KubeClient, plural: str, cases: list[tuple[str, dict[str, Any], Any, str, str]]
) -> None:
    path = await _create_crd(kube, _crd(plural, _spec_schema(cases)))
    values = {_field(i): value for i, (_, _, value, _, _) in enumerate(cases)}
    code, body = await raw(
        kube,
        "POST",
        path,
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": plural.capitalize()[:-1],
            "metadata": {"name": "cases"},
            "spec": values,
        },
    )
    names = {f"spec.{_field(i)}": name for i, (name, *_) in enumerate(cases)}
    got = {names[f]: v for f, v in _verdicts(code, body).items()}
    assert got == {name: verdict for name, _, _, _, verdict in cases if verdict != PASS}


@pytest.mark.backends("local", "real")
async def test_extension_functions_and_cel_semantics(kube: KubeClient) -> None:
    await _check_cases(kube, "celcases", CASES)


@pytest.mark.backends("local", "real")
async def test_kubernetes_cel_libraries(kube: KubeClient) -> None:
    if not await _alpha(kube):
        await _check_cases(kube, "cellibraries", LIBRARY_CASES)
        return
    code, body = await raw(kube, "POST", CRDS, _crd("cellibraries", _spec_schema(LIBRARY_CASES)))
    assert code == 422 and "undeclared reference to 'isSorted'" in body["message"], body


@pytest.mark.backends("local", "real")
async def test_transition_rules_compare_with_the_old_object(kube: KubeClient) -> None:
    spec = {
        "type": "object",
        "properties": {
            "name": {
                **STR,
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}],
            },
            "replicas": {
                **INT,
                "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "no shrinking"}],
            },
            "tags": {
                **STRS,
                "x-kubernetes-validations": [{"rule": "oldSelf.all(t, t in self)", "message": "append-only"}],
            },
        },
    }
    if await _alpha(kube):
        code, body = await raw(kube, "POST", CRDS, _crd("celtransitions", spec))
        assert code == 422 and "undeclared reference to 'oldSelf'" in body["message"], body
        return
    path = await _create_crd(kube, _crd("celtransitions", spec))
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Celtransition",
        "metadata": {"name": "t"},
        "spec": {"name": "a", "replicas": 2, "tags": ["x"]},
    }
    code, created = await raw(kube, "POST", path, obj)
    assert code == 201, created  # transition rules do not run on create
    update = copy.deepcopy(created)
    update["spec"] = {"name": "b", "replicas": 1, "tags": ["y"]}
    code, body = await raw(kube, "PUT", f"{path}/t", update)
    assert code == 422, body
    assert {c["field"]: c["message"] for c in body["details"]["causes"]} == {
        "spec.name": 'Invalid value: "string": immutable',
        "spec.replicas": 'Invalid value: "integer": no shrinking',
        "spec.tags": 'Invalid value: "array": append-only',
    }
    update["spec"] = {"name": "a", "replicas": 3, "tags": ["x", "y"]}
    code, body = await raw(kube, "PUT", f"{path}/t", update)
    assert code == 200, body


@pytest.mark.backends("local", "real")
async def test_a_rule_that_does_not_compile_refuses_the_crd(kube: KubeClient) -> None:
    for i, (rule, words) in enumerate(UNCOMPILABLE):
        spec = {**UNCOMPILABLE_ON, "x-kubernetes-validations": [{"rule": rule}]}
        code, body = await raw(kube, "POST", CRDS, _crd(f"celbad{i}s", spec))
        assert code == 422, (rule, body)
        cause = body["details"]["causes"][0]
        assert cause["field"].endswith("openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"), (
            cause
        )
        assert "compilation failed" in cause["message"] and words in cause["message"], (rule, cause)


@pytest.mark.parametrize("rule", [rule for rule, _ in UNCOMPILABLE])
def test_compile_rule_raises_syntax_errors_with_a_position(rule: str) -> None:
    with pytest.raises(CelSyntaxError, match=r"^ERROR: <input>:1:\d+: "):
        compile_rule(rule, UNCOMPILABLE_ON)


def test_runtime_errors_are_cel_errors_worded_like_cel_go() -> None:
    with pytest.raises(CelError, match=r"^no such key: a$"):
        compile_rule("self.a == 1").evaluate({}, schema=OBJ)
    with pytest.raises(CelError, match=r"^no such overload$"):
        compile_rule("self == 'x'").evaluate(1, schema={"x-kubernetes-int-or-string": True})
    assert compile_rule("self.a == oldSelf.a").is_transition and not compile_rule("self.a == 1").is_transition
