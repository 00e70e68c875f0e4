"""Delegated authentication/authorization rules that the end-to-end test cannot isolate."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer

from apiclient import KubeClient
from apiclient.errors import ApiError
from controller_manager import delegation, secureserving
from controller_manager.delegation import (
    ANONYMOUS_USER,
    AuthenticationError,
    Delegation,
    PathAuthorizer,
    SubjectAccessReviewAuthorizer,
    TokenReviewAuthenticator,
    UserInfo,
)
from controller_manager.options import ServingOptions
from controller_manager.server import HealthState, build_app


class Reviews:
    """Answers TokenReviews and SubjectAccessReviews like the API server, counting them."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_next = 0

    async def create(self, res: Any, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append(body)
        if self.fail_next:
            self.fail_next -= 1
            raise ApiError(503, {"reason": "ServiceUnavailable"})
        spec = body["spec"]
        if body["kind"] == "TokenReview":
            if spec["token"] != "good":
                return {"status": {"authenticated": False}}
            return {
                "status": {
                    "authenticated": True,
                    "user": {"username": "alice", "uid": "1", "groups": ["team"]},
                }
            }
        allowed = spec["user"] == "alice" and spec["nonResourceAttributes"] == {
            "path": "/metrics",
            "verb": "get",
        }
        return {"status": {"allowed": allowed, "reason": "" if allowed else "no rule"}}


def _delegation(
    reviews: Reviews, paths: tuple[str, ...] = delegation.DEFAULT_ALWAYS_ALLOW_PATHS
) -> Delegation:
    client = cast(KubeClient, reviews)
    return Delegation(
        PathAuthorizer(paths), TokenReviewAuthenticator(client), SubjectAccessReviewAuthorizer(client)
    )


async def test_tokens_and_decisions_are_reviewed_once_per_ttl() -> None:
    reviews = Reviews()
    d = _delegation(reviews)
    for _ in range(3):
        user = await d.authenticate("Bearer good", None)
        assert user.name == "alice" and user.groups == ("team", "system:authenticated")
        assert await d.authorize(user, "get", "/metrics") == (True, "")
        with pytest.raises(AuthenticationError):
            await d.authenticate("Bearer bad", None)  # a refusal is cached too
        assert await d.authorize(user, "get", "/debug") == (False, "no rule")
    assert [c["kind"] for c in reviews.calls].count("TokenReview") == 2
    assert [c["kind"] for c in reviews.calls].count("SubjectAccessReview") == 2
    assert all("good" not in repr(key) for key in d.authenticator._cache._entries)  # type: ignore[union-attr]


async def test_no_credential_is_anonymous_and_always_allowed_paths_cost_no_review() -> None:
    reviews = Reviews()
    d = _delegation(reviews, ("/healthz", "/debug/*"))
    assert await d.authenticate(None, None) == ANONYMOUS_USER
    assert await d.authenticate("Basic dXNlcg==", None) == ANONYMOUS_USER  # not a bearer token
    assert await d.authorize(ANONYMOUS_USER, "get", "/healthz") == (True, "")
    assert await d.authorize(ANONYMOUS_USER, "get", "/debug/pprof") == (True, "")
    assert reviews.calls == []
    assert (await d.authorize(ANONYMOUS_USER, "get", "/healthz/event-loop"))[0] is False


async def test_a_verified_client_certificate_names_the_user() -> None:
    d = _delegation(Reviews())
    cert = {"subject": ((("organizationName", "system:masters"),), (("commonName", "admin"),))}
    assert await d.authenticate(None, cert) == UserInfo(
        "admin", groups=("system:masters", "system:authenticated")
    )


async def test_review_errors_are_retried_then_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_wait(_: float) -> None:
        return None

    monkeypatch.setattr(anyio, "sleep", no_wait)  # the retries' backoff (delegation calls anyio.sleep)
    reviews = Reviews()
    d = _delegation(reviews)
    reviews.fail_next = 2
    assert (await d.authenticate("Bearer good", None)).name == "alice"
    reviews.fail_next = 5
    with pytest.raises(delegation.AuthorizationError):
        await d.authorize(UserInfo("bob"), "get", "/metrics")
    assert len(reviews.calls) == 3 + 5


def test_path_rules_are_kcms() -> None:
    paths = PathAuthorizer(["/healthz", "/livez/*", "/"])
    assert paths.allows("/healthz") and paths.allows("/livez/ping") and paths.allows("/")
    assert not paths.allows("/healthz/x") and not paths.allows("/livez")
    assert PathAuthorizer(["*"]).allows("/anything")
    with pytest.raises(ValueError, match="trailing"):
        PathAuthorizer(["/a*/b"])


def test_cache_entries_expire_and_the_oldest_go_first() -> None:
    now = [0.0]
    cache = delegation._TTLCache(max_entries=2, clock=lambda: now[0])
    cache.put("a", 1, 10.0)
    cache.put("b", 2, 10.0)
    cache.put("c", 3, 10.0)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, 2, 3)
    now[0] = 10.0
    assert cache.get("b") is None


async def test_the_app_answers_401_403_and_500_as_kcm(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_wait(_: float) -> None:
        return None

    monkeypatch.setattr(anyio, "sleep", no_wait)  # the retries' backoff (delegation calls anyio.sleep)
    reviews = Reviews()
    app = build_app(HealthState(), delegation=_delegation(reviews))
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/metrics", headers={"Authorization": "Bearer bad"})
        assert (r.status, (await r.json())["reason"]) == (401, "Unauthorized")
        calls = len(reviews.calls)
        r = await client.get("/metrics")  # no credential: told to authenticate, no review spent
        assert (r.status, (await r.json())["reason"]) == (401, "Unauthorized")
        assert len(reviews.calls) == calls
        r = await client.get("/metrics", headers={"Authorization": "Bearer other"})
        assert (r.status, (await r.json())["reason"]) == (401, "Unauthorized")
        r = await client.get("/flags", headers={"Authorization": "Bearer good"})
        assert r.status == 403
        assert (await r.json())["message"] == 'forbidden: User "alice" cannot get path "/flags": no rule'
        r = await client.get("/metrics", headers={"Authorization": "Bearer good"})
        assert r.status == 200
        reviews.fail_next = 5  # the access review keeps failing: KCM's plain-text 500
        r = await client.get("/debug", headers={"Authorization": "Bearer good"})
        assert r.status == 500 and (await r.text()).startswith('Internal Server Error: "/debug": ')
        r = await client.get("/healthz")  # no review needed, whatever the API server's state
        assert (r.status, await r.text()) == (200, "ok")


class ConfigMaps:
    def __init__(self, answer: dict[str, Any] | ApiError) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str | None]] = []

    async def get(self, res: Any, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        self.asked.append((name, namespace))
        if isinstance(self.answer, ApiError):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "skip", "tolerate", "expected"),
    [
        ({"data": {"client-ca-file": "PEM"}}, False, False, "PEM"),
        ({"data": {"client-ca-file": "PEM"}}, True, False, None),  # --authentication-skip-lookup
        (ApiError(404, {"reason": "NotFound"}), False, False, None),  # no such ConfigMap: fine
        (
            ApiError(403, {"reason": "Forbidden"}),
            False,
            True,
            None,
        ),  # --authentication-tolerate-lookup-failure
        (ApiError(403, {"reason": "Forbidden"}), False, False, secureserving.ClusterLookupError),
    ],
)
async def test_the_client_ca_lookup_follows_kcms_flags(
    answer: Any, skip: bool, tolerate: bool, expected: Any
) -> None:
    client = ConfigMaps(answer)
    opts = ServingOptions(authentication_skip_lookup=skip, authentication_tolerate_lookup_failure=tolerate)
    if isinstance(expected, type):
        with pytest.raises(expected):
            await secureserving._client_ca(opts, cast(KubeClient, client))
        return
    assert await secureserving._client_ca(opts, cast(KubeClient, client)) == expected
    assert client.asked == ([] if skip else [("extension-apiserver-authentication", "kube-system")])
