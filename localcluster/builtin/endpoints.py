"""core/v1 Endpoints and discovery.k8s.io/v1 EndpointSlices: the validation clients hit and
kubectl's columns (`printEndpoints`, `printEndpointSlice`)."""

from __future__ import annotations

from typing import Any

from localcluster.builtin.base import BuiltinStrategy, columns
from localcluster.registry import FieldError, Obj, TableColumn

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
_SHOWN = 3  # kubectl shows three addresses, then "+ N more..."


def _first_addresses(addresses: list[str]) -> str:
    if not addresses:
        return "<none>"
    shown = ",".join(addresses[:_SHOWN])
    return f"{shown} + {len(addresses) - _SHOWN} more..." if len(addresses) > _SHOWN else shown


def _port_ok(port: Any) -> bool:
    return isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= 65535


class EndpointsStrategy(BuiltinStrategy):
    kind = "Endpoints"
    tracks_generation = False
    allow_create_on_update = True

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        for i, subset in enumerate(obj.get("subsets") or []):
            for j, port in enumerate((subset or {}).get("ports") or []):
                if not _port_ok((port or {}).get("port")):
                    errs.append(
                        FieldError.invalid(
                            f"subsets[{i}].ports[{j}].port",
                            (port or {}).get("port"),
                            "must be between 1 and 65535, inclusive",
                        )
                    )
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        shown: list[str] = []
        for subset in obj.get("subsets") or []:
            ports = [p.get("port") for p in (subset.get("ports") or [])] or [None]
            for address in subset.get("addresses") or []:
                for port in ports:
                    shown.append(
                        f"{address.get('ip')}:{port}" if port is not None else str(address.get("ip"))
                    )
        return columns(("Endpoints", "string")), [_first_addresses(shown)]


class EndpointSliceStrategy(BuiltinStrategy):
    group = "discovery.k8s.io"
    kind = "EndpointSlice"

    def default(self, obj: Obj) -> None:
        for port in obj.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("name", "")

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        address_type = obj.get("addressType")
        if not address_type:
            errs.append(FieldError.required("addressType"))
        elif address_type not in ADDRESS_TYPES:
            errs.append(FieldError.not_supported("addressType", address_type, ADDRESS_TYPES))
        elif old is not None and address_type != old.get("addressType"):
            errs.append(FieldError.invalid("addressType", address_type, "field is immutable"))
        for i, endpoint in enumerate(obj.get("endpoints") or []):
            addresses = (endpoint or {}).get("addresses")
            if not addresses:
                errs.append(
                    FieldError.required(f"endpoints[{i}].addresses", "must contain at least 1 address")
                )
        for i, port in enumerate(obj.get("ports") or []):
            value = (port or {}).get("port")
            if value is not None and not _port_ok(value):
                errs.append(
                    FieldError.invalid(f"ports[{i}].port", value, "must be between 1 and 65535, inclusive")
                )
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        ports = [str(p.get("port")) for p in obj.get("ports") or [] if p.get("port") is not None]
        addresses = [a for e in obj.get("endpoints") or [] for a in e.get("addresses") or []]
        cols = columns(("AddressType", "string"), ("Ports", "string"), ("Endpoints", "string"))
        return cols, [obj.get("addressType", ""), ",".join(ports) or "<unset>", _first_addresses(addresses)]
