"""generateName collisions are retried by the server, as kube-apiserver's RetryGenerateName does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import CONFIGMAPS
from localcluster import objects

BODY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "cm-"}}


def _suffixes(monkeypatch: pytest.MonkeyPatch, values: list[str]) -> None:
    it: Iterator[str] = iter(values)
    monkeypatch.setattr(objects, "_random_suffix", lambda: next(it))


async def test_a_taken_generated_name_is_drawn_again(
    kube: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _suffixes(monkeypatch, ["aaaaa", "aaaaa", "aaaaa", "bbbbb"])
    first = await kube.create(CONFIGMAPS, dict(BODY), namespace="default")
    second = await kube.create(CONFIGMAPS, dict(BODY), namespace="default")
    assert first["metadata"]["name"] == "cm-aaaaa"
    assert second["metadata"]["name"] == "cm-bbbbb"


async def test_after_eight_collisions_the_create_fails_as_upstream(
    kube: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _suffixes(monkeypatch, ["aaaaa"] * 9)
    await kube.create(CONFIGMAPS, dict(BODY), namespace="default")
    with pytest.raises(ApiError) as taken:
        await kube.create(CONFIGMAPS, dict(BODY), namespace="default")
    assert taken.value.already_exists
