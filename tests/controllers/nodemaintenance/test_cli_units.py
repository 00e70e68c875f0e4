"""The CLI's pieces that need no cluster: durations, the progress table, completion."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from controller_manager.maintenance_cli import (
    ProgressTable,
    build_parser,
    drain_spec,
    is_current_and_true,
    maintenance_name,
    parse_duration,
    row_for,
)
from controller_manager.options import UsageError


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("0", 0)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "5x", "-1"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


def test_parser_takes_the_subcommand_first() -> None:
    args = build_parser().parse_args(["drain", "node-1", "node-2", "--timeout", "2m", "--reason", "kernel"])
    assert (args.command, args.nodes, args.timeout, args.reason) == (
        "drain",
        ["node-1", "node-2"],
        120,
        "kernel",
    )


@pytest.mark.parametrize(
    ("flags", "api"), [([], "PodCondition"), (["--eviction-api", "EvictionRequest"], "EvictionRequest")]
)
def test_the_drain_asks_through_the_api_the_flag_names_and_a_rerun_resets_it(
    flags: list[str], api: str
) -> None:
    """A drain run without the flag writes PodCondition: a re-run never inherits EvictionRequest."""
    assert drain_spec(build_parser().parse_args(["drain", "node-1", *flags]))["evictionAPI"] == api


def test_an_unknown_eviction_api_is_a_usage_error() -> None:
    """One line naming the choices (the CLI turns UsageError into exit code 2)."""
    with pytest.raises(UsageError, match="--eviction-api: invalid choice: 'Pods'"):
        build_parser().parse_args(["drain", "node-1", "--eviction-api", "Pods"])


NM = {
    "metadata": {"name": maintenance_name("n1"), "generation": 2},
    "status": {
        "observedGeneration": 2,
        "nodes": {
            "n1": {
                "phase": "Draining",
                "podsPendingEvacuation": 2,
                "podsEvacuating": 1,
                "blockingPods": [
                    {"namespace": "ns", "name": "db-0", "reason": "EvictionRefused"},
                    {"namespace": "ns", "name": "web-1", "reason": "AwaitingEvacuation"},
                ],
            }
        },
        "conditions": [{"type": "Drained", "status": "False"}],
    },
}


def test_row_summarises_the_first_blocking_pod() -> None:
    row = row_for("n1", NM)
    assert (row.phase, row.pending, row.evacuating) == ("Draining", 2, 1)
    assert row.blocking == "ns/db-0: EvictionRefused (+1)"
    assert row_for("n1", None).phase == "Pending"  # not yet seen by the controller
    refused = {
        "namespace": "ns",
        "name": "db-0",
        "reason": "EvictionRefused",
        "message": "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget "
        "db needs 2 healthy pods and has 2 currently " + "x" * 200,
    }
    status = {"nodes": {"n1": {"phase": "Draining", "blockingPods": [refused]}}}
    row = row_for("n1", {"status": status})
    assert "The disruption budget db needs 2" in row.blocking and row.blocking.endswith("...)")
    held = {"nodes": {"n1": {"phase": "WaitingForLease", "message": "maintenance lease held by kured"}}}
    assert row_for("n1", {"status": held}).blocking == "maintenance lease held by kured"


def test_plain_output_prints_only_changes() -> None:
    out = io.StringIO()
    table = ProgressTable(out)
    table.show([row_for("n1", NM)])
    table.show([row_for("n1", NM)])
    assert out.getvalue().count("\n") == 1
    assert "n1: Draining, 2 pending, 1 evacuating blocking: ns/db-0" in out.getvalue()


def test_completion_needs_the_condition_for_the_current_generation() -> None:
    drained: dict[str, Any] = {
        "metadata": {"generation": 3},
        "status": {"observedGeneration": 2, "conditions": [{"type": "Drained", "status": "True"}]},
    }
    assert not is_current_and_true(drained, "Drained")  # a leftover from before the spec changed
    drained["status"]["observedGeneration"] = 3
    assert is_current_and_true(drained, "Drained")
    assert not is_current_and_true(NM, "Drained")
