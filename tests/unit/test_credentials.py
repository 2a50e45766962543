"""Credential policies: predictable is derived and stable, generated is random and kept."""

from __future__ import annotations

from providers.credentials import password_for, predictable_password
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
