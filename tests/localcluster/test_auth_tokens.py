"""Service-account tokens the local cluster issues: valid until they expire, or their account goes."""

from __future__ import annotations

from localcluster.auth.tokens import ADMIN, ADMIN_TOKEN, TokenAuthenticator


def test_a_token_lives_as_long_as_its_claims_and_its_account() -> None:
    now = [1000.0]
    accounts = {("ns", "robot"): "uid-1"}
    tokens = TokenAuthenticator(lambda ns, name: accounts.get((ns, name)), clock=lambda: now[0])
    token, expires = tokens.issue("ns", "robot", "uid-1", expiration_seconds=600)
    assert expires == 1600
    user, audiences = tokens.authenticate(token)
    assert user is not None and user.name == "system:serviceaccount:ns:robot" and user.uid == "uid-1"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated")
    assert audiences == ("https://kubernetes.default.svc",)
    assert tokens.authenticate(token, ["some-other-audience"]) == (None, ())
    head, _, signature = token.split(".")
    other, _ = tokens.issue("ns", "other", "uid-9", expiration_seconds=600)
    assert tokens.authenticate(f"{head}.{other.split('.')[1]}.{signature}")[0] is None  # claims swapped
    accounts[("ns", "robot")] = "uid-2"  # deleted and made again: the old token is not its
    assert tokens.authenticate(token)[0] is None
    accounts[("ns", "robot")] = "uid-1"
    now[0] = 1600.0
    assert tokens.authenticate(token)[0] is None  # expired


def test_static_tokens() -> None:
    tokens = TokenAuthenticator(lambda ns, name: None)
    tokens.add_static("t0k", "jane", ["devs"])
    admin = tokens.authenticate(ADMIN_TOKEN)[0]
    assert admin is not None and (admin.name, admin.groups) == (
        ADMIN.name,
        ("system:masters", "system:authenticated"),
    )
    jane = tokens.authenticate("t0k")[0]
    assert jane is not None and (jane.name, jane.groups) == ("jane", ("devs", "system:authenticated"))
    assert tokens.authenticate("nope")[0] is None
