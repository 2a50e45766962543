"""Admin credentials of the local engines, kept in the local stack's config.

Each shared instance of the workspace names the config key of its admin
secret. The first `start` on a machine generates the missing ones and stores
them with `pulumi config set --secret` (the value goes through stdin, never
argv); later starts read them back. They live nowhere else in plaintext.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.pulumi_env import ROOT, pulumi_env

LOCAL_STACK = "local"


@dataclass(frozen=True)
class AdminCredential:
    user: str
    password: str

    def __repr__(self) -> str:  # keep the password out of logs and tracebacks
        return f"AdminCredential(user={self.user!r}, password=***)"


def _pulumi(*args: str, stack: str, input_text: str | None = None, root: Path = ROOT) -> str:
    env = {**os.environ, **pulumi_env()}
    result = subprocess.run(
        ["pulumi", *args, "--stack", stack, "--non-interactive"],
        cwd=root, env=env, input=input_text, capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"pulumi {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def ensure_stack(stack: str = LOCAL_STACK, root: Path = ROOT) -> None:
    """Select the stack on the local file backend, creating it on first use."""
    env = {**os.environ, **pulumi_env()}
    subprocess.run(
        ["pulumi", "stack", "select", stack, "--create", "--secrets-provider", "passphrase", "--non-interactive"],
        cwd=root, env=env, check=True, capture_output=True, text=True,
    )


def admin_credentials(stack: str = LOCAL_STACK, root: Path = ROOT) -> dict[str, AdminCredential]:
    """Admin credential per engine of the stack's workspace, generating missing secrets once."""
    ensure_stack(stack, root)
    config = json.loads(_pulumi("config", "--json", "--show-secrets", stack=stack, root=root))
    workspace = config["devstack:workspace"]
    shared = (workspace.get("objectValue") or json.loads(workspace["value"]))["shared"]
    credentials = {}
    for instance in shared.values():
        key = f"devstack:{instance['adminSecret']}"
        if key in config:
            password = config[key]["value"]
        else:
            password = secrets.token_urlsafe(24)
            _pulumi("config", "set", "--secret", key, stack=stack, input_text=password, root=root)
        credentials[instance["engine"]] = AdminCredential(user=instance["adminUser"], password=password)
    return credentials
