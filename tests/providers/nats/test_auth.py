"""providers.nats.auth: the keys an instance's admin secret gives, and the JWTs they sign."""

from __future__ import annotations

import base64

import nkeys
import pytest

from providers.nats import auth as nats_auth


def test_any_text_derives_the_same_operator_and_accounts_every_time():
    one, again = nats_auth.Operator.from_secret("s3cret"), nats_auth.Operator.from_secret("s3cret")
    other = nats_auth.Operator.from_secret("another")
    assert nats_auth.public(one.signing) == nats_auth.public(again.signing) != nats_auth.public(other.signing)
    assert nats_auth.public(one.signing).startswith("O") and nats_auth.public(one.system).startswith("A")
    assert nats_auth.public(one.account_key("shop")) == nats_auth.public(again.account_key("shop"))
    assert nats_auth.public(one.account_key("shop")) != nats_auth.public(one.account_key("Shop"))
    assert nats_auth.public(one.account_key("shop")) != nats_auth.public(other.account_key("shop"))


def test_two_seeds_are_the_keys_of_a_server_set_up_elsewhere():
    operator, system = nats_auth.random_key(nkeys.PREFIX_BYTE_OPERATOR), nats_auth.random_key(nkeys.PREFIX_BYTE_ACCOUNT)
    given = nats_auth.Operator.from_secret(f"{nats_auth.seed(operator)} {nats_auth.seed(system)}")
    assert (nats_auth.public(given.signing), nats_auth.public(given.system)) == (
        nats_auth.public(operator), nats_auth.public(system))
    assert nats_auth.seed(operator) not in repr(given) and nats_auth.seed(system) not in repr(given)


def test_a_jwt_carries_its_claims_and_the_issuers_signature():
    operator = nats_auth.Operator.from_secret("s3cret")
    account = operator.account_key("shop")
    token = operator.account_jwt(account, "shop", description='{"owner": "shop"}', jetstream={"streams": 5},
                                 revocations={"UABC": 7})
    claims = nats_auth.decode(token)
    assert (claims["sub"], claims["iss"], claims["name"]) == (nats_auth.public(account),
                                                              nats_auth.public(operator.signing), "shop")
    assert claims["nats"]["limits"]["streams"] == 5 and claims["nats"]["revocations"] == {"UABC": 7}
    assert claims["nats"]["description"] == '{"owner": "shop"}' and claims["jti"] and claims["iat"] > 0
    header, body, signature = token.split(".")
    padded = signature + "=" * (-len(signature) % 4)
    assert operator.signing.verify(f"{header}.{body}".encode(), base64.urlsafe_b64decode(padded))


def test_a_user_jwt_is_signed_by_its_account_and_the_signer_answers_the_nonce():
    operator = nats_auth.Operator.from_secret("s3cret")
    account, user = operator.account_key("shop"), nats_auth.random_key(nkeys.PREFIX_BYTE_USER)
    claims = nats_auth.decode(nats_auth.user_jwt(account, user, "svc", {"pub": {"allow": ["shop.>"]}}))
    assert (claims["iss"], claims["sub"]) == (nats_auth.public(account), nats_auth.public(user))
    assert claims["nats"]["pub"] == {"allow": ["shop.>"]} and claims["nats"]["type"] == "user"
    signed = nats_auth.signer(user)("nonce-1")
    assert user.verify(b"nonce-1", base64.b64decode(signed))


def test_text_that_is_no_jwt_is_refused():
    with pytest.raises(ValueError, match="not a NATS JWT"):
        nats_auth.decode("plain")
