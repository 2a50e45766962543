"""Credential policies: predictable is derived and stable, generated is random and kept, rotation renews."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from providers.credentials import Rotation, login_password, password_for, predictable_password
from providers.identity import Identity

SHOP = Identity("postgres", "pg", "database", "shop", "shop")
BLOG = Identity("postgres", "pg", "database", "blog", "blog")


def test_predictable_is_stable_and_per_project():
    assert password_for(SHOP, "shop", "predictable") == password_for(SHOP, "shop", "predictable")
    assert predictable_password(SHOP, "shop") != predictable_password(BLOG, "blog")


def test_generated_is_random_and_kept_on_update():
    first = password_for(SHOP, "shop", "generated")
    assert first != password_for(SHOP, "shop", "generated")
    assert password_for(SHOP, "shop", "generated", previous=first) == first


def test_switching_to_generated_does_not_keep_the_predictable_password():
    predictable = predictable_password(SHOP, "shop")
    assert password_for(SHOP, "shop", "generated", previous=predictable) != predictable


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
    assert plain == predictable_password(SHOP, "shop_app") and one != plain
    assert login_password(SHOP, "shop_app", login("predictable", 1)) == one  # anyone can derive it again
    # From the value declared, not the float Pulumi hands the provider (`rotation: 1` arrives as 1.0).
    assert login_password(SHOP, "shop_app", login("predictable", 1.0)) == one == predictable_password(SHOP, "shop_app#rotation=1")


def test_a_predictable_password_an_older_release_derived_from_the_float_is_kept_until_the_rotation_changes():
    """Releases before 2026-11-30 derived `rotation: 1` as `#rotation=1.0`; services hold that password."""
    legacy = predictable_password(SHOP, "shop_app#rotation=1.0")
    stored = login("predictable", 1.0, password=legacy)
    assert login_password(SHOP, "shop_app", login("predictable", 1.0), stored) == legacy
    assert login_password(SHOP, "shop_app", login("predictable", 2.0), stored) == predictable_password(SHOP, "shop_app#rotation=2")
    # Anything else stored is not kept: a predictable password is derived.
    assert login_password(SHOP, "shop_app", login("predictable", 1.0), login("predictable", 1.0, password="x")) == \
        predictable_password(SHOP, "shop_app#rotation=1")


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
