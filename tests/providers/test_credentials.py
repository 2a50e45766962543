"""Credential policies: predictable is derived and stable, generated is random and kept, rotation renews."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from providers.credentials import (MINIO_SECRET_MINIMUM, Rotation, hashed_password, login_password, password_for,
                                   predictable_password)
from providers.identity import Identity

SHOP = Identity("postgres", "pg", "database", "shop", "shop")
BLOG = Identity("postgres", "pg", "database", "blog", "blog")


@pytest.mark.parametrize("project, rotation, minimum, password", [
    pytest.param("acme", None, 0, "acme", id="the-project-name"),
    pytest.param("acme", 0, 0, "acme", id="rotation-0-is-none"),
    pytest.param("acme", 2, 0, "acme-2", id="rotation-appended"),
    pytest.param("acme", "2025-q3", 0, "acme-2025-q3", id="string-rotation"),
    pytest.param("acme", None, 8, "acmeacme", id="padded-by-repeating"),
    pytest.param("app", None, 8, "appappapp", id="whole-repeats"),
    pytest.param("a", None, 8, "aaaaaaaa", id="one-letter"),
    pytest.param("acme-shop", None, 8, "acme-shop", id="long-enough-as-is"),
    pytest.param("acme", 2, 8, "acme-2acme-2", id="rotation-then-padding"),
])
def test_predictable_is_the_project_name_by_hand_computable_rules(project, rotation, minimum, password):
    assert predictable_password(project, rotation, minimum) == password


def test_predictable_is_stable_and_per_project():
    assert password_for(SHOP, "shop", "predictable") == password_for(SHOP, "shop", "predictable") == "shop"
    assert predictable_password(SHOP.owner) != predictable_password(BLOG.owner)
    # The project's name as written, whatever the login's engine name or instance.
    assert password_for(Identity("kafka", "k2", "acl", "orders", "My.Shop"), "My.Shop.orders", "predictable") == "My.Shop"


def test_a_minio_secret_is_padded_to_the_minimum_minio_takes():
    assert len(password_for(SHOP, "shop", "predictable", minimum=MINIO_SECRET_MINIMUM)) >= 8


def test_generated_is_random_and_kept_on_update():
    first = password_for(SHOP, "shop", "generated")
    assert first != password_for(SHOP, "shop", "generated")
    assert password_for(SHOP, "shop", "generated", previous=first) == first


def test_switching_to_generated_does_not_keep_the_predictable_password():
    for predictable in (predictable_password(SHOP.owner), hashed_password(SHOP, "shop")):
        assert password_for(SHOP, "shop", "generated", previous=predictable) not in (predictable, "shop")


def test_the_hashed_password_of_earlier_releases_is_kept_and_nothing_else():
    """Earlier releases derived `dev-<sha256>`: a login holding it keeps it (its services hold it)."""
    hashed = hashed_password(SHOP, "shop")
    assert hashed.startswith("dev-") and len(hashed) == 28
    assert password_for(SHOP, "shop", "predictable", previous=hashed) == hashed
    # The hash of another login or instance is not this login's: derived anew.
    for other in (hashed_password(SHOP, "blog"), hashed_password(Identity("postgres", "pg2", "database", "shop", "shop"), "shop"), "x"):
        assert password_for(SHOP, "shop", "predictable", previous=other) == "shop"


def login(credentials: str, rotation=None, password: str | None = None) -> dict:
    """A login's inputs (and, with `password`, the outputs an update passes as old)."""
    return {"credentials": credentials, "params": {"rotation": rotation}, **({"password": password} if password else {})}


def test_a_login_keeps_its_password_until_rotation_or_policy_changes():
    first = login_password(SHOP, "shop_app", login("generated"))
    assert login_password(SHOP, "shop_app", login("generated"), login("generated", password=first)) == first
    rotated = login_password(SHOP, "shop_app", login("generated", 1), login("generated", password=first))
    assert rotated != first
    assert login_password(SHOP, "shop_app", login("predictable"), login("generated", password=first)) != first


def test_a_predictable_login_derives_a_new_password_per_rotation_value():
    plain, one = (login_password(SHOP, "shop_app", login("predictable", r)) for r in (None, 1))
    assert plain == "shop" and one == "shop-1"
    assert login_password(SHOP, "shop_app", login("predictable", 1)) == one  # anyone can derive it again
    # From the value declared, not the float Pulumi hands the provider (`rotation: 1` arrives as 1.0).
    assert login_password(SHOP, "shop_app", login("predictable", 1.0)) == one == predictable_password("shop", 1)


@pytest.mark.parametrize("rotation, principal", [
    pytest.param(None, "shop_app", id="no-rotation"),
    pytest.param(1.0, "shop_app#rotation=1", id="rotation"),
    pytest.param(1.0, "shop_app#rotation=1.0", id="rotation-hashed-as-the-float"),
])
def test_a_hashed_password_is_kept_until_the_rotation_or_policy_changes(rotation, principal):
    """Releases before this one hashed the login (`rotation: 1` first as `#rotation=1.0`); services hold it."""
    hashed = hashed_password(SHOP, principal)
    stored = login("predictable", rotation, password=hashed)
    assert login_password(SHOP, "shop_app", login("predictable", rotation), stored) == hashed
    # The opt-in: any new rotation value, `0` where the param was absent, gives the project-name password.
    new = 0 if rotation is None else 2
    assert login_password(SHOP, "shop_app", login("predictable", new), stored) == predictable_password("shop", new)
    assert login_password(SHOP, "shop_app", login("generated", rotation), stored) not in (hashed, "shop")
    # Anything else stored is not kept: a predictable password is derived.
    assert login_password(SHOP, "shop_app", login("predictable", rotation), login("predictable", rotation, password="x")) \
        == predictable_password("shop", rotation)


@pytest.mark.parametrize("rotation, principal", [(0, "shop"), (1, "shop#rotation-1")], ids=["no-rotation", "rotation"])
def test_a_minio_secret_an_earlier_release_hashed_is_kept_until_the_rotation_changes(rotation, principal):
    from providers.minio.keys import key_secret as _secret

    hashed = hashed_password(SHOP, principal)
    assert _secret(SHOP, "shop", rotation, "predictable", hashed) == hashed
    assert _secret(SHOP, "shop", rotation, "predictable", None) == predictable_password("shop", rotation, 8)


def test_rotation_accepts_integers_and_short_strings_only():
    class Spec(BaseModel):
        rotation: Rotation = None

    assert [Spec(rotation=v).rotation for v in (None, 3, "2026-q4")] == [None, 3, "2026-q4"]
    # Pulumi hands the provider's check every number as a float; a whole one is the integer.
    assert Spec(rotation=2.0).rotation == 2 and isinstance(Spec(rotation=2.0).rotation, int)
    for bad in (True, "", "x" * 65, 1.5):
        with pytest.raises(ValidationError, match="must be an integer or a non-empty string"):
            Spec(rotation=bad)


def test_a_broken_instance_never_quotes_its_admin_password():
    from providers.instances import instances_from_config

    password = "S3cr3tPassw0rdXYZabcdefghijklmn"
    config = {"devstack:workspace": {"shared": {"cache": {"engine": "redis", "port": 1, "adminSecret": "k"}}},
              "devstack:k": password}
    with pytest.raises(ValidationError) as raised:  # adminUser is missing
        instances_from_config(config)
    assert "adminUser" in str(raised.value)
    assert not any(password[i:i + 6] in str(raised.value) for i in range(len(password) - 5))
