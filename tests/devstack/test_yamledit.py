"""devstack.yamledit: edits keep every byte outside the entry, or refuse."""

from __future__ import annotations

import pytest
import yaml

from devstack.yamledit import EditError, add_entry, matching_entries, remove_entry, set_entry_field

SHOP = """apiVersion: devstack/v1
kind: Project
name: shop
services:
  api:
    uses: [pg]
    env:
      # Secrets reach a service only through env.import ...
      import:
        - from: pg/database
          vars:
            DATABASE_URL: dsn
      PGHOST: ${ref:workspace.shared.pg.host}
resources:
  # The shop's own database.
  - uses: pg
    kind: database   # the main one
    params:
      connectionLimit: 20   # tuned

  # Reports.
  - uses: pg
    kind: user
    name: reporter
    notes: |
      block text

# after the list
other: {a: 1}
"""
QUEUE = {"uses": "aws", "kind": "queue", "name": "jobs", "params": {"visibilityTimeout": 45, "fifo": True}}


@pytest.mark.parametrize("text, appended", [
    (SHOP, "      block text\n  - uses: aws\n    kind: queue\n    name: jobs\n"
           "    params: {visibilityTimeout: 45, fifo: true}\n\n# after the list"),
    ("name: x\nresources:\n-   uses: a\n    kind: b\n", "-   uses: a\n    kind: b\n-   uses: aws\n    kind: queue\n"),
    ("name: x\nresources: []  # none yet\nother: 1\n", "resources:  # none yet\n  - uses: aws\n"),
    ("name: x\nresources:\nother: 1\n", "resources:\n  - uses: aws\n    kind: queue\n    name: jobs\n"),
    ("name: x", "name: x\nresources:\n  - uses: aws\n"),
    ("name: x\nresources:\n  -\n    uses: a\n    kind: b\n", "    kind: b\n  - uses: aws\n"),
], ids=["block-list", "dash-at-column-0", "empty-flow-list", "null-value", "no-key-no-newline", "dash-on-own-line"])
def test_add_appends_one_entry_and_keeps_the_rest(text, appended):
    new = add_entry(text, QUEUE)
    assert appended in new
    data = yaml.safe_load(new)
    assert data["resources"][-1] == QUEUE
    before = yaml.safe_load(text)
    assert {k: v for k, v in data.items() if k != "resources"} == {k: v for k, v in before.items() if k != "resources"}


@pytest.mark.parametrize("text", [
    SHOP, "name: x\nresources: []  # none yet\nother: 1\n",
    "name: x\nresources:\n-   uses: a\n    kind: b\n# end\n",
], ids=["block-list", "empty-flow-list", "dash-at-column-0"])
def test_add_then_remove_is_byte_identical(text):
    new = add_entry(text, QUEUE)
    assert remove_entry(new, len(yaml.safe_load(new)["resources"]) - 1) == text


def test_remove_keeps_comments_of_other_entries_and_around_the_list():
    new = remove_entry(SHOP, 0)
    assert new == SHOP.replace("""  - uses: pg
    kind: database   # the main one
    params:
      connectionLimit: 20   # tuned
""", "")
    assert "# The shop's own database." in new and "# after the list" in new


def test_remove_a_block_scalar_entry_keeps_the_blank_line_after_it():
    new = remove_entry(SHOP, 1)
    assert new.endswith("connectionLimit: 20   # tuned\n\n  # Reports.\n\n# after the list\nother: {a: 1}\n")


def test_removing_the_only_entry_leaves_an_empty_list():
    text = "name: x\nresources:  # the list\n  - uses: a\n    kind: b\nother: 1\n"
    assert remove_entry(text, 0) == "name: x\nresources: []  # the list\nother: 1\n"


def test_set_field_replaces_in_place_or_appends_to_the_entry():
    marked = set_entry_field(SHOP, 0, "purge", True)
    assert "      connectionLimit: 20   # tuned\n    purge: true\n\n  # Reports." in marked
    unmarked = set_entry_field(marked, 0, "purge", False)
    assert unmarked == marked.replace("purge: true", "purge: false")
    flow = "name: x\nresources:\n  - {uses: a, kind: b}  # flow\n"
    assert set_entry_field(flow, 0, "purge", True) == "name: x\nresources:\n  - {uses: a, kind: b, purge: true}  # flow\n"


def test_values_that_need_quotes_are_quoted():
    new = add_entry("name: x\nresources: []\n", {"uses": "pg", "kind": "database", "name": "123",
                                                 "params": {"locale": "C: utf8", "extensions": ["pgcrypto"]}})
    assert yaml.safe_load(new)["resources"][0]["name"] == "123"
    assert "params: {locale: 'C: utf8', extensions: [pgcrypto]}" in new


@pytest.mark.parametrize("text, message", [
    ("name: x\nresources: [{uses: a, kind: b}]\n", "flow list"),
    ("name: x\nresources: {a: 1}\n", "must be a list"),
    ("- a\n- b\n", "must be a mapping"),
    ("name: x\nresources: [\n", "not valid YAML"),
], ids=["non-empty-flow-list", "resources-not-a-list", "not-a-mapping", "broken-yaml"])
def test_unsafe_edits_are_refused(text, message):
    with pytest.raises(EditError, match=message):
        if "[{" in text:
            remove_entry(text, 0)
        else:
            add_entry(text, QUEUE)


def test_a_flow_list_is_refused_by_every_edit():
    text = "name: x\nresources: [{uses: a, kind: b}]\n"
    for edit in (lambda: add_entry(text, QUEUE), lambda: remove_entry(text, 0),
                 lambda: set_entry_field(text, 0, "purge", True)):
        with pytest.raises(EditError, match="flow list"):
            edit()


def test_a_last_line_without_newline_is_edited_like_any_other():
    text = "name: x\nresources:\n  - uses: a\n    kind: b"
    added = yaml.safe_load(add_entry(text, QUEUE))
    assert added["resources"] == [{"uses": "a", "kind": "b"}, QUEUE]
    purged = yaml.safe_load(set_entry_field(text, 0, "purge", True))
    assert purged["resources"] == [{"uses": "a", "kind": "b", "purge": True}]


def test_a_crlf_file_keeps_crlf_line_ends_in_what_an_edit_adds():
    text = SHOP.replace("\n", "\r\n")
    added = add_entry(text, QUEUE)
    assert added.count("\n") == added.count("\r\n") and yaml.safe_load(added)["resources"][-1] == QUEUE
    purged = set_entry_field(text, 1, "purge", True)
    assert purged.count("\n") == purged.count("\r\n") and yaml.safe_load(purged)["resources"][1]["purge"] is True
    assert remove_entry(added, 2) == text


def test_matching_entries_default_the_name_to_the_project():
    data = yaml.safe_load(SHOP)
    assert matching_entries(data, "pg", "database", "shop") == [0]
    assert matching_entries(data, "pg", "user", "reporter") == [1]
    assert matching_entries(data, "pg", "user", "shop") == []


@pytest.mark.parametrize("written, asked", [
    ("pg", "pg"), ("pg", "workspace.shared.pg"), ("workspace.shared.pg", "pg"),
    ("workspace.shared.pg", "workspace.shared.pg"),
], ids=["bare-bare", "bare-spec", "spec-bare", "spec-spec"])
def test_matching_entries_take_both_forms_of_an_instance(written, asked):
    """spec 27 writes `uses: workspace.shared.pg`; the bare `pg` names the same instance."""
    data = yaml.safe_load(SHOP.replace("  - uses: pg\n    kind: user", f"  - uses: {written}\n    kind: user"))
    assert matching_entries(data, asked, "user", "reporter") == [1]
    assert matching_entries(data, asked.replace("pg", "pgx"), "user", "reporter") == []
