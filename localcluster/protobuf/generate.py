"""Regenerate `kubernetes.json`, the wire schema of every built-in Kubernetes API message, from Kubernetes' sources.

The protobuf side comes from each package's `generated.proto` (field numbers, scalar types, repeated,
maps); the JSON side from the Go structs the protos were generated from (`types.go` and friends): a
field's JSON name, `omitempty`, `,inline` and whether it is a pointer. Both are needed to turn a
decoded message into what Go's `encoding/json` would print for the same object, which is what the
real server stores and what a JSON client would have sent.

Usage (any clones of kubernetes/api, kubernetes/apimachinery and kubernetes/apiextensions-apiserver,
bare or not, with the tag fetched):

    python -m localcluster.protobuf.generate --api ../api --apimachinery ../apimachinery \
        --apiextensions ../apiextensions-apiserver --tag v0.24.9

The parsers are regular expressions: both inputs are machine-generated (`go-to-protobuf`) or
gofmt-formatted, and the script checks that every proto field found its Go field.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).with_name("kubernetes.json")
APIMACHINERY_PACKAGES = ("pkg/apis/meta/v1", "pkg/runtime", "pkg/util/intstr", "pkg/api/resource")
APIEXTENSIONS_PACKAGES = ("pkg/apis/apiextensions/v1",)
# Messages the runtime codes by hand: their JSON is not their fields (`Time` is an RFC 3339 string).
SPECIAL = frozenset(
    {
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
        "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
        "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
        "k8s.io.apimachinery.pkg.api.resource.Quantity",
        "k8s.io.apimachinery.pkg.api.resource.QuantityValue",
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        "k8s.io.apimachinery.pkg.runtime.RawExtension",
        "k8s.io.apimachinery.pkg.runtime.Unknown",
    }
)
# Field flags in the output (kept in step with localcluster/protobuf/schema.py).
REPEATED, POINTER, OMITEMPTY, INLINE, MAP = 1, 2, 4, 8, 16

_MESSAGE = re.compile(r"^message (\w+) \{$")
_FIELD = re.compile(r"^\s*(optional|repeated|required) ([\w.]+) (\w+) = (\d+);")
_MAP_FIELD = re.compile(r"^\s*map<string, ([\w.]+)> (\w+) = (\d+);")
_WRAPPER = "items, if empty, will result in an empty slice"
_STRUCT = re.compile(r"^type (\w+) struct \{")
_GO_FIELD = re.compile(r"^\s*(?:(\w+)\s+)?([\w.*\[\]]+)\s+`([^`]*)`")
_TAG = re.compile(r'(\w+):"([^"]*)"')
_DEFINED = re.compile(r"^type (\w+) metav1\.(\w+)$", re.MULTILINE)
_GROUP = re.compile(r'^const GroupName = "([^"]*)"', re.MULTILINE)


@dataclass
class ProtoField:
    number: int
    name: str
    type: str  # a scalar ("string", "int32", ...) or a fully qualified message name
    repeated: bool
    map_value: str | None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _qualify(type_name: str, package: str) -> str:
    if type_name in ("string", "int32", "int64", "bool", "bytes", "double", "float"):
        return type_name
    return type_name if "." in type_name else f"{package}.{type_name}"


def parse_proto(text: str) -> tuple[dict[str, list[ProtoField]], dict[str, str]]:
    """(message → fields, list-wrapper message → item type) of one generated.proto."""
    package = re.search(r"^package ([\w.]+);", text, re.MULTILINE)
    assert package is not None
    pkg = package.group(1)
    messages: dict[str, list[ProtoField]] = {}
    wrappers: dict[str, str] = {}
    current: list[ProtoField] | None = None
    name = ""
    wrapper_comment = False
    for line in text.splitlines():
        if m := _MESSAGE.match(line):
            name = f"{pkg}.{m.group(1)}"
            current = messages[name] = []
            wrapper_comment = False
        elif line == "}":
            current = None
        elif current is None:
            continue
        elif _WRAPPER in line:
            wrapper_comment = True
        elif m := _FIELD.match(line):
            field = ProtoField(
                int(m.group(4)), m.group(3), _qualify(m.group(2), pkg), m.group(1) == "repeated", None
            )
            current.append(field)
            if wrapper_comment and field.name == "items" and field.number == 1:
                wrappers[name] = field.type
        elif m := _MAP_FIELD.match(line):
            current.append(ProtoField(int(m.group(3)), m.group(2), "map", False, _qualify(m.group(1), pkg)))
    return messages, wrappers


@dataclass
class GoField:
    number: int
    json_name: str
    pointer: bool
    omitempty: bool
    inline: bool


def parse_go(text: str) -> tuple[dict[str, list[GoField]], set[str]]:
    """Struct name → its protobuf-tagged fields in declaration order; and which structs embed TypeMeta."""
    structs: dict[str, list[GoField]] = {}
    kinds: set[str] = set()
    current: list[GoField] | None = None
    name = ""
    for line in text.splitlines():
        if m := _STRUCT.match(line):
            name = m.group(1)
            current = structs[name] = []
        elif line.startswith("}"):
            current = None
        elif current is not None and (m := _GO_FIELD.match(line)):
            go_name, go_type, tags = m.groups()
            tag = dict(_TAG.findall(tags))
            if go_name is None and go_type.endswith("TypeMeta") and "json" in tag:
                kinds.add(name)
            if "protobuf" not in tag or tag["protobuf"] == "-":
                continue
            json_tag = tag.get("json", "").split(",")
            number = int(tag["protobuf"].split(",")[1])
            inline = "inline" in json_tag[1:] or (go_name is None and not json_tag[0])
            current.append(
                GoField(
                    number,
                    "" if inline else json_tag[0] or (go_name or go_type),
                    go_type.startswith("*"),
                    "omitempty" in json_tag[1:],
                    inline,
                )
            )
    return structs, kinds


def _package_sources(repo: Path, tag: str, path: str) -> tuple[str, str, str]:
    files = _git(repo, "ls-tree", "--name-only", f"{tag}:{path}").split()
    go = "\n".join(
        _git(repo, "show", f"{tag}:{path}/{f}")
        for f in files
        if f.endswith(".go")
        and not f.endswith("_test.go")
        and not f.startswith("zz_generated")
        and f != "generated.pb.go"
    )
    proto = _git(repo, "show", f"{tag}:{path}/generated.proto")
    register = _git(repo, "show", f"{tag}:{path}/register.go") if "register.go" in files else ""
    return proto, go, register


def _api_version(path: str, register: str) -> str:
    group = _GROUP.search(register)
    assert group is not None, path
    version = path.rsplit("/", 1)[1]
    return f"{group.group(1)}/{version}" if group.group(1) else version


def generate(api: Path, apimachinery: Path, apiextensions: Path, tag: str) -> dict[str, object]:
    sources: list[tuple[str, str, str, str]] = []  # (api version, proto, go, register)
    for path in APIMACHINERY_PACKAGES:
        proto, go, register = _package_sources(apimachinery, tag, path)
        sources.append(("meta.k8s.io/v1" if path == "pkg/apis/meta/v1" else "", proto, go, register))
    for line in _git(api, "ls-tree", "-r", "--name-only", tag).split():
        if line.endswith("/generated.proto"):
            path = line.rsplit("/", 1)[0]
            proto, go, register = _package_sources(api, tag, path)
            sources.append((_api_version(path, register), proto, go, register))
    for path in APIEXTENSIONS_PACKAGES:
        proto, go, register = _package_sources(apiextensions, tag, path)
        sources.append((_api_version(path, register), proto, go, register))
    meta_structs = parse_go(sources[0][2])[0]
    messages: dict[str, list[list[object]]] = {}
    wrappers: dict[str, str] = {}
    kinds: dict[str, dict[str, str]] = {}
    for api_version, proto, go, _ in sources:
        proto_messages, proto_wrappers = parse_proto(proto)
        structs, typed = parse_go(go)
        for defined, meta_type in _DEFINED.findall(go):  # `type List metav1.List`: the same fields
            structs[defined] = meta_structs[meta_type]
        wrappers.update(proto_wrappers)
        for full_name, fields in proto_messages.items():
            short = full_name.rsplit(".", 1)[1]
            if full_name in SPECIAL or full_name in proto_wrappers:
                continue
            go_fields = {f.number: f for f in structs.get(short, [])}
            by_number = {f.number: f for f in fields}
            missing = set(by_number) - set(go_fields)
            assert not missing, f"{full_name}: proto fields {missing} have no Go field"
            out = []
            for gf in structs.get(short, []):  # Go's order: the order encoding/json prints
                pf = by_number[gf.number]
                flags = (
                    (REPEATED if pf.repeated else 0)
                    | (POINTER if gf.pointer else 0)
                    | (OMITEMPTY if gf.omitempty else 0)
                    | (INLINE if gf.inline else 0)
                    | (MAP if pf.map_value else 0)
                )
                out.append([pf.number, gf.json_name, pf.map_value or pf.type, flags])
            messages[full_name] = out
            if api_version and short in typed:
                kinds.setdefault(api_version, {})[short] = full_name
    return {
        "source": f"k8s.io/api, k8s.io/apimachinery and k8s.io/apiextensions-apiserver {tag}",
        "kinds": kinds,
        "wrappers": wrappers,
        "messages": messages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--api", type=Path, required=True)
    parser.add_argument("--apimachinery", type=Path, required=True)
    parser.add_argument("--apiextensions", type=Path, required=True)
    parser.add_argument("--tag", default="v0.24.9")
    args = parser.parse_args()
    schema = generate(args.api, args.apimachinery, args.apiextensions, args.tag)
    OUT.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
