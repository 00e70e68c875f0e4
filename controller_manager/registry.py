"""The controller registry: frozen descriptors, validated when built, classes imported lazily.

As KCM's `NewControllerDescriptors`, the registry is a table of descriptors (name, aliases,
required feature gates, disabled by default, constructor) checked once when it is built: no
empty or duplicate names, no alias that repeats a name or another alias. The table lives here,
not on the controller classes, so `--controllers` validation and `--help` work without importing
any controller; a class is imported only when its controller is enabled. A row is the only
source of a controller's name, aliases, gates and worker count: the classes do not repeat them,
the manager hands the name and worker count to the class when it builds it (as KCM's
constructors receive `controllerName`), so nothing can disagree with the table. A controller
that takes settings names, in its row, which typed config of the parsed `ManagerOptions` it
gets (as KCM's `ComponentConfig.<Controller>`); the config class owns the defaults.

`--controllers` follows KCM's `IsControllerEnabled`: the first entry that is exactly the name or
`-name` decides; else a `*` anywhere enables what is on by default; else nothing. Aliases are
resolved to names first, as KCM does since 1.28.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from controller_manager import features

if TYPE_CHECKING:
    from controller_manager.options import ManagerOptions
    from controllers.base import Controller
    from controllers.context import ControllerContext


class Constructor(Protocol):
    """Builds a controller under the name and worker count its row gives it (and its config, if any)."""

    def __call__(
        self, ctx: ControllerContext, *, name: str, workers: int, config: object | None = None
    ) -> Controller: ...


# Picks a controller's typed config out of the parsed command line.
ConfigOf = Callable[["ManagerOptions"], object]


@dataclass(frozen=True, slots=True)
class ControllerDescriptor:
    """Everything the manager knows about a controller before it is built."""

    name: str
    aliases: tuple[str, ...]
    required_gates: tuple[str, ...]
    disabled_by_default: bool
    constructor: Constructor
    default_workers: int = 5
    concurrent_syncs_flag: str = ""
    import_path: str = ""
    config: ConfigOf | None = None

    def build(self, ctx: ControllerContext, opts: ManagerOptions) -> Controller:
        """The controller as `opts` configure it: its `--concurrent-*-syncs` value or the row's
        worker count, and its typed config when the row names one."""
        workers = opts.concurrent_syncs.get(self.name, self.default_workers)
        if self.config is None:
            return self.constructor(ctx, name=self.name, workers=workers)
        return self.constructor(ctx, name=self.name, workers=workers, config=self.config(opts))


def import_controller_class(import_path: str) -> type[Controller]:
    """Import `module:Class`; raise ImportError with the path when it is missing or no controller."""
    from controllers.base import Controller

    module_name, _, attr = import_path.partition(":")
    module = importlib.import_module(module_name)
    try:
        cls = getattr(module, attr)
    except AttributeError as exc:
        raise ImportError(f"{import_path}: module {module_name} has no {attr}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Controller)):
        raise ImportError(f"{import_path} is not a controllers.base.Controller subclass")
    return cls


def lazy_constructor(import_path: str) -> Constructor:
    """A constructor that imports the class on first use, so a disabled controller is never imported."""

    def construct(
        ctx: ControllerContext, *, name: str, workers: int, config: object | None = None
    ) -> Controller:
        cls = import_controller_class(import_path)
        if config is None:
            return cls(ctx, name=name, workers=workers)
        # Only classes that take settings have `config`; the row and the class agree on its type.
        return cls(ctx, name=name, workers=workers, config=config)  # type: ignore[call-arg]

    return construct


@dataclass(frozen=True, slots=True)
class _Row:
    name: str
    import_path: str
    aliases: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    disabled_by_default: bool = False
    workers: int = 5
    syncs_flag: str = ""
    config: ConfigOf | None = None


# The one table: name, class, aliases, gates, default workers and KCM-style concurrency flag.
_TABLE: tuple[_Row, ...] = (
    _Row("replicaset", "controllers.replicaset:ReplicaSetController", ("replicaset-controller",),
         workers=5, syncs_flag="--concurrent-replicaset-syncs"),
    _Row("deployment", "controllers.deployment:DeploymentController", ("deployment-controller",),
         workers=5, syncs_flag="--concurrent-deployment-syncs"),
    _Row("disruption", "controllers.disruption:DisruptionController", ("disruption-controller",),
         workers=1, syncs_flag="--concurrent-disruption-syncs"),
    _Row("nodemaintenance", "controllers.nodemaintenance:NodeMaintenanceController",
         gates=(features.DECLARATIVE_NODE_MAINTENANCE,), workers=2,
         syncs_flag="--concurrent-nodemaintenance-syncs", config=lambda o: o.node_maintenance),
    # Eight workers, one per update shard: Go's taint manager's UpdateWorkerSize.
    _Row("taint-eviction-controller", "controllers.tainteviction:TaintEvictionController",
         gates=(features.SEPARATE_TAINT_EVICTION_CONTROLLER,), workers=8,
         syncs_flag="--concurrent-taint-eviction-syncs"),
    _Row("node-lifecycle-controller", "controllers.nodelifecycle:NodeLifecycleController",
         workers=1, syncs_flag="--concurrent-node-lifecycle-syncs", config=lambda o: o.node_lifecycle),
    _Row("maintenance-lease", "controllers.maintenancelease:MaintenanceLeaseController",
         gates=(features.NODE_MAINTENANCE_LEASE,), workers=2,
         syncs_flag="--concurrent-maintenance-lease-syncs"),
    # Five, as KCM's Deployment controller: its accounts are Deployments, and a full node asks
    # for one surge per app at once (each sync is a few writes in a row: mark, answer, create).
    _Row("replacement-surge", "controllers.replacementsurge:ReplacementSurgeController",
         gates=(features.NODE_MAINTENANCE_DEPLOYMENT,), workers=5,
         syncs_flag="--concurrent-replacement-surge-syncs"),
    _Row("eviction-surge", "controllers.evictionsurge:EvictionSurgeController",
         gates=(features.EVICTION_SURGE,), workers=2, syncs_flag="--concurrent-eviction-surge-syncs",
         config=lambda o: o.eviction_surge),
    # KEP-4563, left to KCM where the API server serves the built-in API (see evictionapi.served).
    _Row("evictionrequest-controller", "controllers.evictionrequest:EvictionRequestController",
         gates=(features.EVICTION_REQUEST_API,), workers=5,
         syncs_flag="--concurrent-evictionrequest-syncs", config=lambda o: o.eviction_request),
    _Row("imperative-eviction-responder-controller",
         "controllers.imperativeeviction:ImperativeEvictionResponderController",
         gates=(features.EVICTION_REQUEST_API,), workers=5,
         syncs_flag="--concurrent-imperative-eviction-responder-syncs"),
    # aiokcm's surge-first responder for pods of Deployments and ReplicaSets: it asks the
    # NodeMaintenance surge (KEP-4212's evacuation request) to do the work, hence its gates.
    _Row("eviction-responder", "controllers.evictionresponder:EvictionResponderController",
         gates=(features.EVICTION_REQUEST_API, features.DECLARATIVE_NODE_MAINTENANCE,
                features.NODE_MAINTENANCE_DEPLOYMENT), workers=2,
         syncs_flag="--concurrent-eviction-responder-syncs"),
)  # fmt: skip


def validate(descriptors: Sequence[ControllerDescriptor]) -> None:
    """KCM's checks on the descriptor table; a failure is a bug in the table, so it raises."""
    seen: dict[str, str] = {}
    names = {d.name for d in descriptors}
    for d in descriptors:
        if not d.name:
            raise ValueError("controller descriptor with an empty name")
        if d.name in seen:
            raise ValueError(f"controller name {d.name!r} is registered twice")
        seen[d.name] = d.name
    for d in descriptors:
        for alias in d.aliases:
            if not alias:
                raise ValueError(f"controller {d.name!r} has an empty alias")
            if alias in names:
                raise ValueError(f"alias {alias!r} of controller {d.name!r} is the name of a controller")
            if alias in seen:
                raise ValueError(
                    f"alias {alias!r} of controller {d.name!r} is already used by {seen[alias]!r}"
                )
            seen[alias] = d.name


class ControllerRegistry:
    """A validated, immutable set of descriptors in start order."""

    def __init__(self, descriptors: Iterable[ControllerDescriptor]) -> None:
        self._descriptors = tuple(descriptors)
        validate(self._descriptors)
        self._by_name = {d.name: d for d in self._descriptors}
        self._alias_to_name = {a: d.name for d in self._descriptors for a in d.aliases}

    def __iter__(self) -> Iterator[ControllerDescriptor]:
        return iter(self._descriptors)

    def __len__(self) -> int:
        return len(self._descriptors)

    def get(self, name: str) -> ControllerDescriptor:
        return self._by_name[self.canonical(name)]

    def names(self) -> list[str]:
        return [d.name for d in self._descriptors]

    def disabled_by_default(self) -> list[str]:
        return [d.name for d in self._descriptors if d.disabled_by_default]

    def canonical(self, name: str) -> str:
        return self._alias_to_name.get(name, name)

    def resolve_controllers_flag(self, entries: Sequence[str]) -> list[str]:
        """Validate `--controllers` entries and map aliases to names; unknown names raise ValueError."""
        out: list[str] = []
        for raw in entries:
            entry = raw.strip()
            if entry == "*":
                out.append(entry)
                continue
            negated = entry.startswith("-")
            bare = entry[1:] if negated else entry
            name = self.canonical(bare)
            if name not in self._by_name:
                raise ValueError(
                    f"{entry!r} is not in the list of known controllers "
                    f"(known: *, {', '.join(self.names())}; prefix a name with '-' to disable it)"
                )
            out.append(f"-{name}" if negated else name)
        return out

    def is_enabled(self, name: str, entries: Sequence[str]) -> bool:
        """KCM's rule on resolved entries: first exact match wins, else `*`, else off."""
        has_star = False
        for entry in entries:
            if entry == name:
                return True
            if entry == f"-{name}":
                return False
            if entry == "*":
                has_star = True
        return has_star and not self._by_name[name].disabled_by_default

    def enabled(
        self, entries: Sequence[str], gates: features.FeatureGate | None = None
    ) -> list[ControllerDescriptor]:
        """Descriptors `--controllers` selects and whose required gates are all on."""
        selected = [d for d in self._descriptors if self.is_enabled(d.name, entries)]
        if gates is None:
            return selected
        return [d for d in selected if all(gates.enabled(g) for g in d.required_gates)]

    def help_text(self) -> str:
        off = self.disabled_by_default()
        parts = [f"All controllers: {', '.join(sorted(self.names()))}."]
        gated = [
            f"{d.name} (needs {'+'.join(d.required_gates)})" for d in self._descriptors if d.required_gates
        ]
        if gated:
            parts.append(f"Gated controllers: {', '.join(gated)}.")
        parts.append(f"Disabled-by-default controllers: {', '.join(off) if off else '(none)'}.")
        aliases = [f"{a}={d.name}" for d in self._descriptors for a in d.aliases]
        if aliases:
            parts.append(f"Aliases: {', '.join(aliases)}.")
        return " ".join(parts)


def default_descriptors() -> list[ControllerDescriptor]:
    return [
        ControllerDescriptor(
            name=row.name,
            aliases=row.aliases,
            required_gates=row.gates,
            disabled_by_default=row.disabled_by_default,
            constructor=lazy_constructor(row.import_path),
            default_workers=row.workers,
            concurrent_syncs_flag=row.syncs_flag,
            import_path=row.import_path,
            config=row.config,
        )
        for row in _TABLE
    ]


def default_registry() -> ControllerRegistry:
    return ControllerRegistry(default_descriptors())
