"""Client libraries the program, check and diff never need are imported on the first engine call,
safely from many threads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


#: Client libraries that loading a kind (as the program, check and diff do) must not import.
LAZY = ("boto3", "botocore", "minio", "nats", "psycopg", "redis", "urllib3")


def test_loading_every_kind_imports_no_client_library():
    out = run("import sys\n"
              "from providers import registry\n"
              "kinds = [k for e in registry.engines() for k in registry.kinds(e)]\n"
              f"print(len(kinds), sorted(m for m in {LAZY!r} if m in sys.modules))")
    count, loaded = out.split(" ", 1)
    assert int(count) > 10 and loaded == "[]"


def test_a_lazy_module_loads_on_first_use():
    """The module is imported by the first attribute read, and its attributes are the real ones."""
    out = run("import sys\n"
              "from providers.postgres.client import psycopg, sql\n"
              "before = 'psycopg' in sys.modules\n"
              "import psycopg.sql as real\n"
              "print(before, sql.Identifier is real.Identifier, psycopg.errors is sys.modules['psycopg.errors'])")
    assert out == "False True True"


def test_first_use_from_many_threads_builds_one_client_each():
    """Sixteen threads at once, as the provider server runs them: no half-imported package, one client per key."""
    out = run("from concurrent.futures import ThreadPoolExecutor\n"
              "from threading import Barrier\n"
              "from providers.minio import client as minio\n"
              "from providers.s3 import client as s3\n"
              "start = Barrier(16)\n"
              "def first_use(i):\n"
              "    start.wait()\n"
              "    admin = minio._admin('127.0.0.1:1', 'us-east-1', 'user', 'password', False, True, None)\n"
              "    client = s3._client('s3', 'http://127.0.0.1:1', 'us-east-1', 'key', 'secret', 'localstack')\n"
              "    return id(admin), id(client)\n"
              "with ThreadPoolExecutor(16) as pool:\n"
              "    seen = set(pool.map(first_use, range(16)))\n"
              "print(len(seen))")
    assert out == "1"
