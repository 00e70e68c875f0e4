"""Per-controller typed config: the config classes own the defaults, the flags fill them in."""

from __future__ import annotations

import inspect
import typing
from dataclasses import fields

import pytest

from controller_manager.options import (
    NODE_LIFECYCLE_FLAGS,
    ManagerOptions,
    format_duration,
    parse_duration,
    parse_run_args,
)
from controller_manager.registry import (
    ControllerDescriptor,
    default_descriptors,
    default_registry,
    import_controller_class,
)
from controllers.evictionsurge.config import EvictionSurgeConfig
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodemaintenance.config import NodeMaintenanceConfig


def test_flag_defaults_are_the_config_defaults() -> None:
    """No flag given: every controller gets exactly its config class's defaults (one source)."""
    opts = parse_run_args([], default_registry())
    assert opts.node_lifecycle == NodeLifecycleConfig()
    assert opts.node_maintenance == NodeMaintenanceConfig()
    assert opts.eviction_surge == EvictionSurgeConfig()
    assert opts.node_lifecycle == ManagerOptions().node_lifecycle


def test_every_node_lifecycle_setting_has_a_flag() -> None:
    assert [dest for _, dest, _, _ in NODE_LIFECYCLE_FLAGS] == [f.name for f in fields(NodeLifecycleConfig)]


def test_flags_reach_the_config_the_registry_hands_the_controller() -> None:
    registry = default_registry()
    opts = parse_run_args(
        [
            "--node-monitor-grace-period=40s",
            "--large-cluster-size-threshold=7",
            "--node-maintenance-max-unschedulable=3",
            "--eviction-surge-timeout=2m",
        ],
        registry,
    )
    lifecycle = registry.get("node-lifecycle-controller").config
    maintenance = registry.get("nodemaintenance").config
    surge = registry.get("eviction-surge").config
    assert lifecycle is not None and maintenance is not None and surge is not None
    assert lifecycle(opts) == NodeLifecycleConfig(
        node_monitor_grace_period=40.0, large_cluster_size_threshold=7
    )
    assert maintenance(opts) == NodeMaintenanceConfig(max_unschedulable=3)
    assert surge(opts) == EvictionSurgeConfig(surge_timeout=120.0)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(50.0, "50s"), (5.0, "5s"), (60.0, "1m0s"), (300.0, "5m0s"), (1.5, "1.5s"), (3600.0, "1h0m0s")],
)
def test_duration_defaults_read_as_go_prints_them_and_parse_back(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("descriptor", default_descriptors(), ids=lambda d: d.name)
def test_a_row_hands_its_class_the_config_type_the_class_takes(descriptor: ControllerDescriptor) -> None:
    """A row with a config feeds a class whose `config` parameter has that type; a row without one,
    a class that takes none (it would fail to build otherwise, only when enabled)."""
    cls = import_controller_class(descriptor.import_path)
    takes = inspect.signature(cls.__init__).parameters.get("config")
    if descriptor.config is None:
        assert takes is None
        return
    assert takes is not None
    assert typing.get_type_hints(cls.__init__)["config"] is type(descriptor.config(ManagerOptions()))
