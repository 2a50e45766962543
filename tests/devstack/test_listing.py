"""`resource list` and `resource show` on a synthetic ledger of 300 resources.

One stack on a temporary file backend receives a deployment of 300 tenant
resources (10 projects x 30, every engine and kind) via `stack import`;
no engine is touched. The API and the console script are both exercised;
JSON output is checked against devstack/schemas/.
"""

from __future__ import annotations

import pytest

from devstack import listing
from devstack.errors import Ambiguous, InvalidQuery, NotFound, ScopeMismatch
from devstack.models import ResourcePage
from tests.devstack.conftest import KINDS, PER_PROJECT, PROJECTS


def all_pages(stack, limit: int, **filters) -> list[ResourcePage]:
    pages, cursor = [], None
    while True:
        page = listing.list_resources(stack, limit=limit, cursor=cursor, **filters)
        pages.append(page)
        cursor = page.next_cursor
        if cursor is None:
            return pages


def test_pages_cover_every_row_once_in_a_stable_order(synthetic, validator):
    _, stack = synthetic
    total = PROJECTS * PER_PROJECT + 2
    pages = all_pages(stack, limit=37)
    ids = [r.id for p in pages for r in p.items]
    assert len(ids) == total and len(set(ids)) == total
    keys = [(r.project, r.engine, r.instance, r.kind, r.name) for p in pages for r in p.items]
    assert keys == sorted(keys)
    assert [len(p.items) for p in pages] == [37] * 8 + [total - 37 * 8]
    assert all(p.total == total for p in pages)
    # A second walk gives the same order: the order is stable, not accidental.
    assert [r.id for p in all_pages(stack, limit=120) for r in p.items] == ids
    for page in pages[:2] + pages[-1:]:
        validator("resource-list.schema.json", page.as_json())


def test_default_limit_is_100_and_max_is_200(synthetic):
    _, stack = synthetic
    assert len(listing.list_resources(stack).items) == 100
    assert len(listing.list_resources(stack, limit=200).items) == 200
    for bad in (0, -1, 201):
        with pytest.raises(InvalidQuery, match=f"--limit {bad} is out of range"):
            listing.list_resources(stack, limit=bad)
    for bad in (None, "3", 2.5, True):  # from Python: not an int at all
        with pytest.raises(InvalidQuery, match="is not a whole number"):
            listing.list_resources(stack, limit=bad)


@pytest.mark.parametrize("filters, expected", [
    pytest.param({"project": "p03"}, 30, id="project"),
    pytest.param({"engine": "kafka"}, sum(1 for p in range(10) for j in range(30) if KINDS[(p + j) % 18][0] == "kafka"), id="engine"),
    pytest.param({"engine": "nats", "kind": "consumer"}, sum(1 for p in range(10) for j in range(30) if (p + j) % 18 == 14), id="engine+kind"),
    pytest.param({"kind": "bucket"}, sum(1 for p in range(10) for j in range(30) if (p + j) % 18 in (5, 8)), id="kind-on-two-engines"),
    pytest.param({"project": "p01", "engine": "postgres", "kind": "role"}, 3, id="all-three"),  # n00, n18, twin
    pytest.param({"project": "p3"}, 0, id="exact-match-only"),
])
def test_filters_are_exact_matches(synthetic, filters, expected):
    _, stack = synthetic
    items = [r for p in all_pages(stack, limit=50, **filters) for r in p.items]
    assert len(items) == expected
    for item in items:
        assert all(getattr(item, field) == value for field, value in filters.items())


def test_cursor_is_bound_to_the_filters_and_rejects_garbage(synthetic):
    _, stack = synthetic
    cursor = listing.list_resources(stack, engine="redis", limit=3).next_cursor
    second = listing.list_resources(stack, engine="redis", limit=3, cursor=cursor)
    assert second.items[0].engine == "redis"
    with pytest.raises(ScopeMismatch, match="made for other filters"):
        listing.list_resources(stack, engine="kafka", limit=3, cursor=cursor)
    with pytest.raises(ScopeMismatch):
        listing.list_resources(stack, limit=3, cursor=cursor)
    for garbage in ("x", "eyJ2IjoyfQ", cursor[:-4], "!!!"):
        with pytest.raises(InvalidQuery, match="--cursor: it is malformed"):
            listing.list_resources(stack, engine="redis", limit=3, cursor=garbage)


def test_unknown_engine_or_kind_is_an_invalid_query(synthetic):
    _, stack = synthetic
    with pytest.raises(InvalidQuery, match="engine 'mysql': no such engine"):
        listing.list_resources(stack, engine="mysql")
    with pytest.raises(InvalidQuery, match="kind 'queue': no engine postgres serves it"):
        listing.list_resources(stack, engine="postgres", kind="queue")


def test_show_redacts_secrets_unless_asked_and_has_timestamps(synthetic, validator):
    _, stack = synthetic
    detail = listing.show_resource(stack, "p02/cache/acl_user/n02")
    assert (detail.engine, detail.kind, detail.project, detail.name) == ("redis", "acl_user", "p02", "n02")
    assert detail.attributes == {"host": "127.0.0.1", "port": 1002}
    assert detail.created.isoformat().startswith("2026-01-01") and detail.modified > detail.created
    with_secret = listing.show_resource(stack, "n05", project="p00")  # j=5: secret, kind index 5
    assert with_secret.attributes["password"] == "[secret]" and with_secret.secret_attributes == ["password"]
    assert with_secret.secrets_shown is False
    shown = listing.show_resource(stack, "n05", project="p00", show_secrets=True)
    assert shown.attributes["password"] == "pw-0-5" and shown.secrets_shown
    assert shown.purge is False and shown.retained is True
    validator("resource-show.schema.json", with_secret.as_json())
    validator("resource-show.schema.json", shown.as_json())


def test_show_finds_by_id_pulumi_name_or_declaration_name(synthetic):
    _, stack = synthetic
    by_name = listing.show_resource(stack, "n07", project="p04")
    assert listing.show_resource(stack, by_name.id).urn == by_name.urn
    assert listing.show_resource(stack, f"p04/{by_name.instance}/{by_name.kind}/n07").urn == by_name.urn
    with pytest.raises(Ambiguous) as ambiguous:
        listing.show_resource(stack, "twin")
    assert ambiguous.value.candidates == ["postgres/pg/role/twin@p00", "postgres/pg/role/twin@p01"]
    assert listing.show_resource(stack, "twin", project="p01").project == "p01"
    with pytest.raises(NotFound, match="cannot show resource 'nope'"):
        listing.show_resource(stack, "nope")


def test_cli_pages_with_the_cursor_it_prints(synthetic, validator):
    box, _ = synthetic
    first = box.cli_json("resource", "list", "-w", "syn", "--engine", "minio", "--limit", "20")
    second = box.cli_json("resource", "list", "-w", "syn", "--engine", "minio", "--limit", "20",
                          "--cursor", first["next_cursor"])
    validator("resource-list.schema.json", first)
    assert first["total"] == second["total"] > 20
    assert not {r["id"] for r in first["items"]} & {r["id"] for r in second["items"]}
    # The same workspace spelled in full takes the same cursor.
    qualified = box.cli_json("resource", "list", "-w", "organization/syn", "--engine", "minio", "--limit", "20",
                             "--cursor", first["next_cursor"])
    assert qualified["items"] == second["items"]
    text = box.cli("resource", "list", "-w", "syn", "--project", "p09", "--kind", "database")
    assert text.returncode == 0
    assert text.stdout.splitlines()[0].split()[:5] == ["PROJECT", "ENGINE", "INSTANCE", "KIND", "NAME"]
    assert len(text.stdout.splitlines()) == 1 + 2 and "2 of 2 resources in workspace 'syn'" in text.stderr


def test_cli_show_json_and_text(synthetic, validator):
    box, _ = synthetic
    shown = box.cli_json("resource", "show", "-w", "syn", "n10", "--project", "p08", "--show-secrets")
    validator("resource-show.schema.json", shown)
    assert shown["attributes"]["password"] == "pw-8-10"
    text = box.cli("resource", "show", "-w", "syn", "n10", "--project", "p08")
    assert text.returncode == 0 and "password: [secret]" in text.stdout and "pw-8-10" not in text.stdout
    assert "created:     2026-01-01" in text.stdout and "secret attributes redacted: password" in text.stderr
