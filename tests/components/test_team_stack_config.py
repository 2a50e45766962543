"""stacks/Pulumi.team.yaml, the example team workspace of docs/team.md, passes devstack's validation
offline: every project it lists, on instances of real (placeholder) hosts, with no secret in it."""

from __future__ import annotations

from components.models import WorkspaceConfig
from components.validation import validate
from components.yamlfile import load_yaml
from tools.pulumi_env import ROOT

DISPLAY = "stacks/Pulumi.team.yaml"


def test_the_team_example_is_a_valid_workspace_on_hosts_of_its_own():
    file = load_yaml(ROOT / DISPLAY, DISPLAY)
    assert (file.repeated, file.misread) == ([], [])
    raw = file.data["config"]["devstack:workspace"]
    validated = validate(raw, ROOT, file, DISPLAY)  # raises WorkspaceInvalid listing every problem
    assert {p.name for p in validated.projects} == {"shop", "blog", "feeds"}
    shared = WorkspaceConfig.model_validate(raw).shared
    local = load_yaml(ROOT / "stacks" / "Pulumi.local.yaml", "local").data["config"]["devstack:workspace"]["shared"]
    # The same instance names as the local workspace (the examples' `uses:`), each on a shared host.
    assert set(shared) == set(local)
    assert all(not i.host.startswith("127.") and i.host != "localhost" for i in shared.values())
    # Off loopback, over TLS verified against the team's CA (a config key: the file is each member's).
    assert {(i.tls.ca_secret, i.tls.verify) for i in shared.values()} == {("teamCa", True)}


def test_the_team_example_holds_no_secret_and_no_salt():
    """Admin passwords are set per team with `pulumi config set --secret`; the salt (or the key of
    another secrets provider) is written by `pulumi stack init team`: a copy of either would make a fork
    of someone's workspace (docs/team.md, markers)."""
    data = load_yaml(ROOT / DISPLAY, DISPLAY).data
    assert set(data) == {"config"}
    assert set(data["config"]) == {"devstack:workspace"}
    assert "secure:" not in (ROOT / DISPLAY).read_text()
