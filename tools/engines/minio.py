"""MinIO engine: one MinIO server (single drive) on 127.0.0.1:29000.

No registry package ships the MinIO server; the Go module proxy serves the
module `github.com/minio/minio`, so tools/minio/ (our go.mod pinning it with
`tool github.com/minio/minio`, go.sum and build.sh) builds it into
`.devstack/bin/minio`. MinIO is AGPL-3.0: it runs here ONLY as an external
test server process reached over HTTP; the product never imports or vendors
its code.

The root credential reaches the server only through its environment
(MINIO_ROOT_USER / MINIO_ROOT_PASSWORD), never a file or its command line.
Data lives in `engines_dir()/minio/data`. The console UI is off and its
address pinned to loopback anyway; update checks are off.

MinIO keeps its IAM data (users with their secret keys, policies) under
`data/.minio.sys`, in plaintext unless a KMS key is set. The server gets a
static key (MINIO_KMS_SECRET_KEY, in its environment) generated once into
`engines_dir()/minio/kms.key` (0600, outside the data dir), so tenants'
secret keys are encrypted at rest and never readable from the data files.
Data written before the key existed stays readable.

Health: `GET /minio/health/live` (no credential), and at start a root
`ListBuckets`, so `start` returns only when the root credential works.

With `--tls` the server serves https only: MinIO takes its certificate from
`--certs-dir` (`public.crt`, `private.key`, and the CAs it trusts in `CAs/`),
where `prepare` copies the engine's TLS files; without it those are removed,
so the server serves plain http again. Health checks then trust that CA.
"""
from __future__ import annotations

import base64
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from tools.engines.base import HOST, REPO_ROOT, Credential, Engine, http_status, write_private
from tools.engines.ports import MINIO_CONSOLE_PORT, PORTS

BINARY = REPO_ROOT / ".devstack" / "bin" / "minio"
BUILD_SCRIPT = REPO_ROOT / "tools" / "minio" / "build.sh"
GO_MOD = REPO_ROOT / "tools" / "minio" / "go.mod"
#: written by build.sh: the module version the binary was built from
STAMP = BINARY.with_name("minio.version")
CONSOLE_PORT = MINIO_CONSOLE_PORT
#: The key name MinIO records beside what it encrypts with the static KMS key.
KMS_KEY_NAME = "devstack-minio"


def pinned_version() -> str:
    match = re.search(r"^\s*github\.com/minio/minio (v\S+)", GO_MOD.read_text(), re.MULTILINE)
    if not match:
        raise RuntimeError(f"minio: no github.com/minio/minio requirement in {GO_MOD}")
    return match.group(1)


def built() -> bool:
    """True when the binary exists and was built from the version go.mod pins."""
    try:
        return BINARY.exists() and STAMP.read_text().strip() == pinned_version()
    except OSError:
        return False


def install(force: bool = False) -> str:
    """Build the pinned MinIO server with tools/minio/build.sh (skipped when built).

    Raises RuntimeError saying the server is not obtainable here, and why,
    when the build fails (no Go, or the module proxy refuses the module).
    """
    argv = ["bash", str(BUILD_SCRIPT)] + (["--force"] if force else [])
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or not BINARY.exists():
        tail = "\n".join(output.splitlines()[-15:])
        raise RuntimeError(
            "minio: the MinIO server is not obtainable here: building it from the Go module "
            f"proxy with {BUILD_SCRIPT.relative_to(REPO_ROOT)} failed (exit {proc.returncode}); "
            "no registry package ships the server, and no stand-in is used:\n" + tail)
    return output.splitlines()[-1] if output else f"minio: built {BINARY}"


class MinioEngine(Engine):
    name = "minio"
    port = PORTS["minio"]
    extra_ports = (CONSOLE_PORT,)
    start_timeout = 60.0

    def __init__(self) -> None:
        self._root: Credential | None = None

    def install(self) -> str:
        """Build the pinned server binary that `start` needs; skipped when built."""
        return install()

    def command(self) -> list[str]:
        return [str(BINARY), "server", "--address", self.address,
                "--console-address", f"{HOST}:{CONSOLE_PORT}",
                "--certs-dir", str(self.certs_dir), "--anonymous", str(self.data_dir)]

    def signature(self) -> list[str]:
        return [f"{BINARY} server", f"--address {self.address}", str(self.data_dir)]

    def prepare(self, credential: Credential | None) -> None:
        credential = self.require(credential)
        if len(credential.user) < 3 or len(credential.password) < 8:
            raise self.error("start", "MinIO needs a root user of at least 3 and a password "
                             "of at least 8 characters")
        if not built():
            print("minio: building the MinIO server from the Go module proxy "
                  "(first time only, a few minutes)", file=sys.stderr, flush=True)
            try:
                print(install(), file=sys.stderr)
            except RuntimeError as exc:
                raise self.error("start", str(exc)) from None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._place_certificates()
        self._root = credential

    @property
    def certs_dir(self) -> Path:
        return self.dir / "certs"

    def _place_certificates(self) -> None:
        """The TLS files where MinIO looks for them; none (plain http) when not started with `--tls`."""
        certs, tls = self.certs_dir, self.tls
        (certs / "CAs").mkdir(parents=True, exist_ok=True)
        if tls is None:
            for name in ("public.crt", "private.key", "CAs/devstack-ca.crt"):
                (certs / name).unlink(missing_ok=True)
            return
        shutil.copyfile(tls.cert, certs / "public.crt")
        write_private(certs / "private.key", tls.key.read_text())
        shutil.copyfile(tls.ca, certs / "CAs" / "devstack-ca.crt")

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def kms_key_file(self) -> Path:
        return self.dir / "kms.key"

    def kms_key(self) -> str:
        """The static KMS key, `<name>:<base64 of 32 bytes>`, created (0600) on first use."""
        path = self.kms_key_file
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(base64.b64encode(secrets.token_bytes(32)).decode() + "\n")
        return f"{KMS_KEY_NAME}:{path.read_text().strip()}"

    def environment(self) -> dict[str, str]:
        if self._root is None:
            raise self.error("start", "prepare() did not run")
        root, self._root = self._root, None
        return {
            "MINIO_ROOT_USER": root.user,
            "MINIO_ROOT_PASSWORD": root.password,
            "MINIO_KMS_SECRET_KEY": self.kms_key(),
            "MINIO_BROWSER": "off",
            "MINIO_UPDATE": "off",
            "MINIO_CALLHOME_ENABLE": "off",
            "HOME": str(self.dir),  # MinIO keeps ~/.minio state; keep it ours
        }

    def healthy(self) -> bool:
        tls = self.tls
        return http_status(f"{self.scheme}://{self.address}/minio/health/live", ca=tls and tls.ca) == 200

    def ensure_credential(self, credential: Credential | None) -> bool:
        """Require that the root credential works (root ListBuckets); changes nothing.

        The server takes its root credential from its environment at launch:
        a running server with another one must be restarted (stop, start).
        """
        if credential is None:
            return False
        import urllib3
        from minio import Minio
        from minio.error import S3Error

        tls = self.tls
        http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(tls.ca)) if tls else None
        client = Minio(self.address, access_key=credential.user, secret_key=credential.password,
                       secure=tls is not None, region="us-east-1", http_client=http)
        try:
            client.list_buckets()
        except S3Error as exc:
            raise self.error("start", f"the running server rejects the root credential of user "
                             f"{credential.user!r} ({exc.code}); it was started with another one: "
                             f"stop and start minio to apply it") from None
        except Exception as exc:  # connection trouble right after health: say what
            raise self.error("start", f"root ListBuckets failed: {type(exc).__name__}: {exc}") from None
        return False


ENGINE = MinioEngine()


def _main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        try:
            print(install(force="--force" in argv))
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    print("usage: python -m tools.engines.minio install [--force]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
