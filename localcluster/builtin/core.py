"""core/v1 kinds other than pods: nodes, namespaces, services, configmaps, events."""

from __future__ import annotations

import base64
import binascii
import itertools
import random
from typing import Any

from localcluster import errors
from localcluster.builtin.base import BuiltinStrategy, columns, field_values, format_labels, get_path
from localcluster.builtin.configmaps import configmap_content_errors
from localcluster.builtin.validation import config_key, port_number
from localcluster.registry import FieldError, Obj, TableColumn

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


_NODE_INFO_KEYS = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class NodeStrategy(BuiltinStrategy):
    """Nodes keep the status they are created with (the kubelet registers with it)."""

    kind = "Node"
    has_status_subresource = True
    tracks_generation = False
    field_labels = frozenset({"spec.unschedulable"})

    def default(self, obj: Obj) -> None:
        """`NodeStatus.nodeInfo` and `daemonEndpoints` are structs Go always serializes: a node
        registered without them reads back with their zero values."""
        status = obj.setdefault("status", {})
        if not isinstance(status, dict):
            return
        endpoints = status.setdefault("daemonEndpoints", {})
        if isinstance(endpoints, dict):
            kubelet = endpoints.setdefault("kubeletEndpoint", {})
            if isinstance(kubelet, dict):
                kubelet.setdefault("Port", 0)
        info = status.setdefault("nodeInfo", {})
        if isinstance(info, dict):
            for key in _NODE_INFO_KEYS:
                info.setdefault(key, "")

    def prepare_for_create(self, obj: Obj) -> None:
        """TaintNodesByCondition admission: a new node is `not-ready:NoSchedule` until the node
        lifecycle controller sees it Ready (the local kubelets lift it at registration, see
        `KubeletConfig.untaint_not_ready`)."""
        obj["metadata"].pop("generation", None)
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            taints = spec.get("taints") or []
            if not any(
                isinstance(t, dict) and t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoSchedule"
                for t in taints
            ):
                spec["taints"] = [*taints, {"key": NOT_READY_TAINT, "effect": "NoSchedule"}]

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        seen: set[tuple[str, str]] = set()
        for i, taint in enumerate(get_path(obj, "spec", "taints", default=[])):
            if not isinstance(taint, dict) or not taint.get("key"):
                errs.append(FieldError.required(f"spec.taints[{i}].key"))
                continue
            effect = taint.get("effect")
            if effect not in _EFFECTS:
                errs.append(FieldError.not_supported(f"spec.taints[{i}].effect", effect, _EFFECTS))
            pair = (str(taint["key"]), str(effect))
            if pair in seen:
                errs.append(FieldError.duplicate(f"spec.taints[{i}]", f"{pair[0]}:{pair[1]}"))
            seen.add(pair)
        return errs

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        return {"spec.unschedulable": "true" if get_path(obj, "spec", "unschedulable") else "false"}

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        ready = "Unknown"
        for cond in get_path(obj, "status", "conditions", default=[]):
            if cond.get("type") == "Ready":
                ready = "Ready" if cond.get("status") == "True" else "NotReady"
        status = ready + (",SchedulingDisabled" if get_path(obj, "spec", "unschedulable") else "")
        labels = obj["metadata"].get("labels") or {}
        roles = {
            k.split("/", 1)[1]
            for k in labels
            if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]
        }
        if labels.get("kubernetes.io/role"):
            roles.add(labels["kubernetes.io/role"])
        cols = columns(
            ("Status", "string"),
            ("Roles", "string"),
            ("Age", "string"),
            ("Version", "string"),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
            kind="Node",
        )
        addresses = get_path(obj, "status", "addresses", default=[])
        info = get_path(obj, "status", "nodeInfo", default={})
        return cols, [
            status,
            ",".join(sorted(roles)) or "<none>",
            None,
            info.get("kubeletVersion", ""),
            _node_address(addresses, "InternalIP"),
            _node_address(addresses, "ExternalIP"),
            info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>",
        ]


def _node_address(addresses: list[Obj], kind: str) -> str:
    """The first address of a type, as `getNodeInternalIP` / `getNodeExternalIP` print it."""
    return next(
        (str(a.get("address")) for a in addresses if isinstance(a, dict) and a.get("type") == kind), "<none>"
    )


class NamespaceStrategy(BuiltinStrategy):
    kind = "Namespace"
    has_status_subresource = True
    tracks_generation = False
    label_names = True
    field_labels = frozenset({"status.phase"})

    def default(self, obj: Obj) -> None:
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")

    def prepare_for_create(self, obj: Obj) -> None:
        """Active, and always the `kubernetes` finalizer the namespace controller removes."""
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        finalizers = list(spec.get("finalizers") or [])
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        spec["finalizers"] = finalizers
        obj["metadata"].pop("generation", None)

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        """spec.finalizers change only through `/finalize` (`namespaceStrategy.PrepareForUpdate`)."""
        super().prepare_for_update(obj, old)
        spec = obj.setdefault("spec", {})
        if "finalizers" in (old.get("spec") or {}):
            spec["finalizers"] = old["spec"]["finalizers"]
        else:
            spec.pop("finalizers", None)

    def prepare_for_finalize(self, obj: Obj, old: Obj) -> None:
        """`/finalize`: only spec.finalizers (and metadata) change; status stays."""
        if "status" in old:
            obj["status"] = old["status"]
        else:
            obj.pop("status", None)
        obj["metadata"].pop("generation", None)

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        return {"status.phase": str(get_path(obj, "status", "phase", default=""))}

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Status", "string")), [get_path(obj, "status", "phase", default="")]


NODE_PORT_RANGE = range(30000, 32768)
_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


def _wants_node_ports(spec: Obj) -> bool:
    return spec.get("type") == "NodePort" or (
        spec.get("type") == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True)
    )


class ServiceStrategy(BuiltinStrategy):
    """ClusterIP allocation from 10.96.0.0/12, the port defaults of `SetDefaults_Service`, and
    node ports from 30000-32767 for NodePort and LoadBalancer services (a port asked for must
    be free and in range; one left out is picked at random), released when the service goes or
    stops being of a node-port type."""

    kind = "Service"
    has_status_subresource = True
    tracks_generation = False
    label_names = True
    return_deleted_object = True
    allow_create_on_update = True

    def __init__(self) -> None:
        self._ips = itertools.count(10)
        self._node_ports: dict[int, str] = {}  # port -> uid of the service holding it
        self._random = random.Random()

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec["type"] in _NODE_PORT_TYPES:
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            if port.get("targetPort") in (None, 0, ""):  # `SetDefaults_Service`: unset, 0 or "" is the port
                port["targetPort"] = port.get("port")

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj["spec"]
        if spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
            n = next(self._ips)
            spec["clusterIP"] = f"10.96.{n // 250}.{n % 250 + 1}"
        if spec.get("clusterIP") and spec["clusterIP"] != "None":
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        obj["status"] = {"loadBalancer": {}}
        obj["metadata"].pop("generation", None)
        self._claim_node_ports(obj)

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        super().prepare_for_update(obj, old)
        spec = obj.get("spec") or {}
        if spec.get("type") not in _NODE_PORT_TYPES and get_path(old, "spec", "type") in _NODE_PORT_TYPES:
            # `dropTypeDependentFields`: what only a node-port type uses goes with the type
            for port in spec.get("ports") or []:
                if isinstance(port, dict):
                    port.pop("nodePort", None)
            for key in ("externalTrafficPolicy", "healthCheckNodePort", "allocateLoadBalancerNodePorts"):
                spec.pop(key, None)
        self._claim_node_ports(obj)
        kept = {p.get("nodePort") for p in spec.get("ports") or [] if isinstance(p, dict)}
        for port in get_path(old, "spec", "ports", default=[]):
            held = port.get("nodePort") if isinstance(port, dict) else None
            if (
                isinstance(held, int)
                and held not in kept
                and self._node_ports.get(held) == old["metadata"].get("uid")
            ):
                del self._node_ports[held]

    def _claim_node_ports(self, obj: Obj) -> None:
        spec, uid = obj.get("spec") or {}, obj["metadata"].get("uid", "")
        if not _wants_node_ports(spec):
            return
        for port in spec.get("ports") or []:
            if not isinstance(port, dict):
                continue
            wanted = port.get("nodePort")
            if isinstance(wanted, int) and wanted in NODE_PORT_RANGE:
                self._node_ports.setdefault(wanted, uid)
            elif wanted is None and len(self._node_ports) < len(NODE_PORT_RANGE):
                while (pick := self._random.choice(NODE_PORT_RANGE)) in self._node_ports:
                    pass
                self._node_ports[pick] = uid
                port["nodePort"] = pick

    def released(self, obj: Obj) -> None:
        uid = obj["metadata"].get("uid")
        for port in get_path(obj, "spec", "ports", default=[]):
            held = port.get("nodePort") if isinstance(port, dict) else None
            if isinstance(held, int) and self._node_ports.get(held) == uid:
                del self._node_ports[held]

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        spec = obj.get("spec") or {}
        if spec.get("type") in ("ClusterIP", "NodePort", "LoadBalancer") and not spec.get("ports"):
            errs.append(FieldError.required("spec.ports"))
        if (
            old is not None
            and get_path(old, "spec", "clusterIP")
            and spec.get("clusterIP") != get_path(old, "spec", "clusterIP")
        ):
            errs.append(
                FieldError("FieldValueInvalid", "spec.clusterIPs[0]", "Invalid value: field is immutable")
            )
        for i, port in enumerate(spec.get("ports") or []):
            if isinstance(port, dict):  # `validateServicePort`: port, then `ValidatePortNumOrName`
                errs.extend(port_number(port.get("port", 0), f"spec.ports[{i}].port"))
                errs.extend(port_number(port.get("targetPort"), f"spec.ports[{i}].targetPort"))
        uid = obj["metadata"].get("uid")
        for i, port in enumerate(spec.get("ports") or []):
            node_port = port.get("nodePort") if isinstance(port, dict) else None
            if node_port is None:
                continue
            path = f"spec.ports[{i}].nodePort"
            if spec.get("type") not in _NODE_PORT_TYPES:
                errs.append(
                    FieldError.forbidden(path, f"may not be used when `type` is '{spec.get('type')}'")
                )
            elif not isinstance(node_port, int) or node_port not in NODE_PORT_RANGE:
                errs.append(
                    FieldError.invalid(
                        path,
                        node_port,
                        "provided port is not in the valid range. The range of valid ports is 30000-32767",
                    )
                )
            elif self._node_ports.get(node_port) != uid:
                errs.append(FieldError.invalid(path, node_port, "provided port is already allocated"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec = obj.get("spec") or {}
        ports = (
            ",".join(
                f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}"
                if p.get("nodePort")
                else f"{p.get('port')}/{p.get('protocol', 'TCP')}"
                for p in spec.get("ports") or []
            )
            or "<none>"
        )
        external = "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
        cols = columns(
            ("Type", "string"),
            ("Cluster-IP", "string"),
            ("External-IP", "string"),
            ("Port(s)", "string"),
            ("Age", "string"),
            ("Selector", "string", 1),
            kind="Service",
        )
        return cols, [
            spec.get("type", ""),
            spec.get("clusterIP", ""),
            external,
            ports,
            None,
            format_labels(spec.get("selector")),
        ]


class ConfigMapStrategy(BuiltinStrategy):
    kind = "ConfigMap"
    tracks_generation = False

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = []
        for field_name in ("data", "binaryData"):
            data = obj.get(field_name)
            if data is not None and (
                not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values())
            ):
                errs.append(FieldError.invalid(field_name, "", "must be a map of strings"))
        if not errs:
            errs.extend(configmap_content_errors(obj.get("data") or {}, obj.get("binaryData") or {}))
        if obj.get("immutable") and old is not None and old.get("immutable"):
            for field_name in ("data", "binaryData"):
                if obj.get(field_name) != old.get(field_name):
                    errs.append(
                        FieldError.forbidden(field_name, "field is immutable when `immutable` is set")
                    )
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Data", "integer")), [len(obj.get("data") or {}) + len(obj.get("binaryData") or {})]


class SecretStrategy(BuiltinStrategy):
    """core/v1 Secret: `stringData` is merged into `data` (base64) and dropped on every write,
    `type` defaults to Opaque, and `immutable` freezes data and type (`pkg/registry/core/secret`)."""

    kind = "Secret"
    tracks_generation = False
    field_labels = frozenset({"type"})

    def default(self, obj: Obj) -> None:
        data = obj.get("data")
        if isinstance(data, dict):
            # `data` is []byte in Go: bad base64 fails decoding (400), before validation
            for key, value in list(data.items()):
                # Go's decoder skips \r and \n inside base64; the value is stored re-encoded
                text = str(value).replace("\r", "").replace("\n", "")
                try:
                    decoded = base64.b64decode(text, validate=True)
                except (binascii.Error, ValueError) as exc:
                    raise errors.bad_request(
                        f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data: {exc}'
                    ) from exc
                if text != value:
                    data[key] = base64.b64encode(decoded).decode()
        if not obj.get("type"):
            obj["type"] = "Opaque"
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict) and string_data:
            data = obj.get("data")
            if not isinstance(data, dict):
                data = obj["data"] = {}
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        data = obj.get("data")
        if data is not None and not isinstance(data, dict):
            return [FieldError.invalid("data", "", "must be a map of base64-encoded strings")]
        for key in data or {}:
            errs.extend(FieldError.invalid(f"data[{key}]", key, msg) for msg in config_key(str(key)))
        if old is not None:
            if obj.get("type") != old.get("type"):
                errs.append(
                    FieldError(
                        "FieldValueInvalid", "type", f'Invalid value: "{obj.get("type")}": field is immutable'
                    )
                )
            if old.get("immutable"):
                if not obj.get("immutable"):
                    errs.append(
                        FieldError.forbidden("immutable", "field is immutable when `immutable` is set")
                    )
                if obj.get("data") != old.get("data"):
                    errs.append(FieldError.forbidden("data", "field is immutable when `immutable` is set"))
        return errs

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        return field_values(obj, "type")

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Type", "string"), ("Data", "string")), [
            obj.get("type", ""),
            str(len(obj.get("data") or {})),
        ]


class ServiceAccountStrategy(BuiltinStrategy):
    kind = "ServiceAccount"
    tracks_generation = False
    return_deleted_object = True

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Secrets", "string")), [str(len(obj.get("secrets") or []))]


class EventStrategy(BuiltinStrategy):
    """core/v1 Event: the fields `kubectl get events --field-selector` uses are selectable."""

    kind = "Event"
    tracks_generation = False
    allow_create_on_update = True
    field_labels = frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    )

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        involved = obj.get("involvedObject")
        if not isinstance(involved, dict):
            return [FieldError.required("involvedObject")]
        ns = obj["metadata"].get("namespace")
        if involved.get("namespace") and ns and involved["namespace"] != ns:
            return [
                FieldError.invalid(
                    "involvedObject.namespace", involved["namespace"], "does not match event.namespace"
                )
            ]
        return []

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        involved = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        out = field_values(
            obj, *(f"involvedObject.{k}" for k in involved), "reason", "reportingComponent", "type"
        )
        out["source"] = str(get_path(obj, "source", "component", default=""))
        return out

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        involved = obj.get("involvedObject") or {}
        cols = columns(("Type", "string"), ("Reason", "string"), ("Object", "string"), ("Message", "string"))
        return cols, [
            obj.get("type", ""),
            obj.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            obj.get("message", ""),
        ]
