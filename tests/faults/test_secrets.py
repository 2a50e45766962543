"""After a full up with generated credentials, no secret value appears in plaintext anywhere we can look.

Scanned for every generated secret (passwords, the MinIO secret key) and
every admin password: the state file, the stack config, every file of the
test's temporary directory (backend, program, PULUMI_HOME), every file of the
checkout (engine data included; not .git, .venv or the built binaries), and
what the CLI printed for up, preview --diff, refresh, stack output, config
and stack export. Run twice: with the values in the state alone, and with a
secret store (`secretStore: aws-sm` on the localstack instance), where every
generated value is pushed and services get the entries' names instead.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from pulumi import automation as auto

from tests.faults.conftest import configure, new_stack
from tools.pulumi_env import ROOT

# Bounded: a hung pulumi run fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(240)

#: Checkout paths that are not scanned: git objects are compressed, the rest is third-party code.
SKIPPED = {ROOT / ".git", ROOT / ".venv", ROOT / ".devstack" / "bin"}
MAX_FILE = 64 * 2**20
#: Where MinIO keeps users. Without a KMS key (MINIO_KMS_SECRET_KEY) it stores their secret keys
#: there in plaintext; with one it encrypts them (checked on a scratch server, MinIO 2026-02).


def project_with_secrets(work: Path, name: str) -> str:
    """A project with every kind that has a generated secret, and a service importing them."""
    resources = [
        {"uses": "pg", "kind": "database", "credentials": "generated"},
        {"uses": "pg", "kind": "user", "name": f"{name}-app", "credentials": "generated"},  # explicit names are server-wide
        {"uses": "cache", "kind": "acl_user", "credentials": "generated"},
        {"uses": "objects", "kind": "access_key", "credentials": "generated"},
        {"uses": "kafka", "kind": "acl", "credentials": "generated"},
    ]
    service = {"uses": ["pg", "cache", "objects", "kafka"], "env": {"import": [
        {"from": "pg/database", "vars": {"DATABASE_URL": "dsn"}},
        {"from": "cache/acl_user", "vars": {"REDIS_URL": "url"}},
        {"from": "objects/access_key", "vars": {"AWS_SECRET_ACCESS_KEY": "secretKey"}},
        {"from": "kafka/acl", "vars": {"KAFKA_PASSWORD": "password"}},
    ]}}
    document = {"apiVersion": "devstack/v1", "kind": "Project", "name": name, "services": {"app": service},
                "resources": [{**r, "purge": True} for r in resources]}
    path = work / name / "devstack.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return f"{name}/devstack.yaml"


def secret_values(outputs: dict[str, auto.OutputValue], name: str) -> set[str]:
    """The generated secret of every resource of the project: its password or secret key."""
    found = {value for attrs in outputs[name].value["resources"].values()
             for key, value in attrs.items() if key in ("password", "secretKey")}
    assert len(found) == 5 and all(len(value) >= 16 for value in found), "expected five generated secrets"
    return found


def files_under(root: Path, skipped: set[Path] = frozenset()) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if Path(directory, d) not in skipped]
        yield from (Path(directory, f) for f in files)


def files_containing(pattern: re.Pattern[bytes], paths: Iterator[Path]) -> list[str]:
    hits = []
    for path in paths:
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE:
                continue
            if pattern.search(path.read_bytes()):
                hits.append(str(path))
        except OSError:
            continue  # another process removed it meanwhile
    return hits


def cli(command: auto.PulumiCommand, work: Path, env: dict[str, str], *args: str) -> str:
    result = command.run([*args, "--stack", "faults", "--non-interactive"], str(work), env)
    return result.stdout + result.stderr


def use_secret_store(stack: auto.Stack, kind: str) -> str:
    """Add `secretStore` (on the localstack instance, a prefix of the test's own) to the stack's workspace."""
    workspace = json.loads(stack.get_config("devstack:workspace").value)
    prefix = f"devstack/{stack.name}-{os.urandom(3).hex()}/"
    workspace["secretStore"] = {"kind": kind, "instance": "aws", "prefix": prefix}
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps(workspace)))
    return prefix


def stored_values(prefix: str) -> list[str]:
    """Every value Secrets Manager holds under `prefix`, read as a service reads it."""
    from tests.providers.s3.contract import aws

    sm = aws("secretsmanager")
    listed = sm.list_secrets(Filters=[{"Key": "name", "Values": [prefix]}], MaxResults=100)["SecretList"]
    return [sm.get_secret_value(SecretId=entry["ARN"])["SecretString"] for entry in listed]


@pytest.mark.parametrize("store", [None, "aws-sm"], ids=["state-only", "secret-store"])
def test_no_secret_in_plaintext(project_dir, offline_env, pulumi_command, admin, shared, prefix, tmp_path, store):
    name = f"{prefix}-s"
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, [project_with_secrets(project_dir, name)], shared, admin)
    store_prefix = use_secret_store(stack, store) if store else None
    printed: list[str] = []
    try:
        up = stack.up(on_output=printed.append)
        values = secret_values(up.outputs, name) | {cred.password for cred in admin.values()}
        if store:
            env = up.outputs[name].value["services"]["app"]["env"]
            assert sorted(env) == ["AWS_SECRET_ACCESS_KEY_SECRET_ID", "DATABASE_URL_SECRET_ID", "KAFKA_PASSWORD_SECRET_ID",
                                   "REDIS_URL_SECRET_ID"]
            # Services read every generated value from the store.
            held = "\n".join(stored_values(store_prefix))
            assert all(value in held for value in secret_values(up.outputs, name))
        stack.preview(diff=True, on_output=printed.append)
        stack.refresh(on_output=printed.append)
        for args in (["stack", "output", "--json"], ["config"], ["stack", "export"]):
            printed.append(cli(pulumi_command, project_dir, offline_env, *args))
        pattern = re.compile(b"|".join(re.escape(v.encode()) for v in sorted(values)))

        assert not pattern.search("\n".join(printed).encode()), "a secret value was printed by the CLI"
        assert not files_containing(pattern, files_under(tmp_path))
        # The scan would find them: the outputs hold the values (decrypted by the automation API).
        assert pattern.search(repr(up.outputs).encode())
        # Engine data included: MinIO's IAM files hold the access key's secret key, encrypted
        # because the engine runs MinIO with a KMS key (tools/engines/minio.py).
        assert files_containing(pattern, files_under(ROOT, SKIPPED)) == []
    finally:
        stack.destroy()
    if store:
        assert stored_values(store_prefix) == []  # the destroy took the entries with the resources
