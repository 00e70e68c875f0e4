"""The controller registry: KCM's `--controllers` rule, descriptor validation, lazy classes."""

from __future__ import annotations

import pytest

from controller_manager import features
from controller_manager.registry import (
    ControllerDescriptor,
    ControllerRegistry,
    default_descriptors,
    default_registry,
    import_controller_class,
    lazy_constructor,
)
from controllers import features as gate_names
from controllers.base import Controller
from controllers.context import ControllerContext


def _never(ctx: ControllerContext, *, name: str, workers: int, config: object | None = None) -> Controller:
    raise AssertionError("constructor must not run")


def _d(name: str, *aliases: str, off: bool = False, gates: tuple[str, ...] = ()) -> ControllerDescriptor:
    return ControllerDescriptor(
        name=name, aliases=aliases, required_gates=gates, disabled_by_default=off, constructor=_never
    )  # type: ignore[arg-type]


@pytest.fixture
def registry() -> ControllerRegistry:
    return ControllerRegistry([_d("alpha", "alpha-controller"), _d("beta"), _d("gamma", off=True)])


def _enabled(reg: ControllerRegistry, flag: str) -> set[str]:
    entries = reg.resolve_controllers_flag([e for e in flag.split(",") if e])
    return {name for name in reg.names() if reg.is_enabled(name, entries)}


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("*", {"alpha", "beta"}),  # star: everything on by default, not gamma
        ("*,gamma", {"alpha", "beta", "gamma"}),
        ("*,-beta", {"alpha"}),
        ("-beta,*", {"alpha"}),  # order does not matter for star
        ("beta,-beta", {"beta"}),  # the first exact entry wins
        ("-beta,beta,*", {"alpha"}),
        ("beta", {"beta"}),  # no star: only what is named
        ("", set()),  # nothing at all
        ("*,-alpha-controller", {"beta"}),  # aliases count as the name
        ("alpha-controller", {"alpha"}),
    ],
)
def test_controllers_flag_follows_kcm_rule(
    registry: ControllerRegistry, flag: str, expected: set[str]
) -> None:
    assert _enabled(registry, flag) == expected


def test_unknown_controller_is_rejected_with_the_known_list(registry: ControllerRegistry) -> None:
    with pytest.raises(
        ValueError, match=r"'nope' is not in the list of known controllers.*alpha, beta, gamma"
    ):
        registry.resolve_controllers_flag(["*", "nope"])
    with pytest.raises(ValueError, match="'-nope'"):
        registry.resolve_controllers_flag(["-nope"])


@pytest.mark.parametrize(
    ("descriptors", "message"),
    [
        ([_d("")], "empty name"),
        ([_d("a"), _d("a")], "registered twice"),
        ([_d("a", "b"), _d("b")], "is the name of a controller"),
        ([_d("a", "x"), _d("b", "x")], "already used"),
        ([_d("a", "")], "empty alias"),
    ],
)
def test_descriptor_table_is_validated_when_built(
    descriptors: list[ControllerDescriptor], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ControllerRegistry(descriptors)


def test_required_gates_filter_enabled_controllers() -> None:
    reg = ControllerRegistry([_d("plain"), _d("gated", gates=(features.DECLARATIVE_NODE_MAINTENANCE,))])
    gates = features.FeatureGate()
    assert [d.name for d in reg.enabled(["*"], gates)] == ["plain"]
    gates.set_from_string("DeclarativeNodeMaintenance=true")
    assert [d.name for d in reg.enabled(["*"], gates)] == ["plain", "gated"]


def test_default_table_is_valid_and_builds_without_importing_controllers() -> None:
    reg = default_registry()
    assert set(reg.names()) == {
        "replicaset",
        "deployment",
        "disruption",
        "nodemaintenance",
        "taint-eviction-controller",
        "node-lifecycle-controller",
        "maintenance-lease",
        "replacement-surge",
        "eviction-surge",
        "evictionrequest-controller",
        "imperative-eviction-responder-controller",
        "eviction-responder",
    }
    assert reg.canonical("replicaset-controller") == "replicaset"
    assert reg.get("nodemaintenance").required_gates == ("DeclarativeNodeMaintenance",)
    assert reg.get("maintenance-lease").required_gates == ("NodeMaintenanceLease",)
    assert reg.get("eviction-surge").required_gates == ("EvictionSurge",)
    assert reg.get("replacement-surge").required_gates == ("NodeMaintenanceDeployment",)


def test_the_replacement_surge_syncs_as_many_accounts_at_once_as_kcms_deployment_controller() -> None:
    """Its accounts are Deployments; a full node asks for one surge per app at the same moment."""
    reg = default_registry()
    assert reg.get("replacement-surge").default_workers == reg.get("deployment").default_workers == 5


def test_every_required_gate_is_a_known_feature_gate() -> None:
    known = set(features.FeatureGate().known_names())
    assert known == set(gate_names.ALL)
    for descriptor in default_descriptors():
        assert set(descriptor.required_gates) <= known, descriptor.name


def test_lazy_constructor_fails_only_when_the_controller_is_built() -> None:
    construct = lazy_constructor("controllers.does_not_exist:Nothing")
    with pytest.raises(ModuleNotFoundError):
        construct(None, name="nothing", workers=1)  # type: ignore[arg-type]


def test_an_import_path_that_is_no_controller_is_refused() -> None:
    with pytest.raises(ImportError, match=r"not a controllers\.base\.Controller subclass"):
        import_controller_class("controllers.base:RequeueAfter")


@pytest.mark.parametrize("descriptor", default_descriptors(), ids=lambda d: d.name)
def test_every_row_names_an_importable_controller_class(descriptor: ControllerDescriptor) -> None:
    """A typo in a row's `module:Class` fails here, not when someone enables the controller.

    The row is the only source of the name, aliases, gates and workers, so there is nothing else
    to compare; an ImportError fails the test rather than skipping it.
    """
    cls = import_controller_class(descriptor.import_path)
    assert issubclass(cls, Controller)
    for attribute in ("name", "aliases", "required_gates", "default_workers", "disabled_by_default"):
        assert attribute not in vars(cls), f"{cls.__qualname__}.{attribute} repeats the registry row"
