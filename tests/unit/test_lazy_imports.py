"""Client libraries the program never needs are imported on first engine call, safely from many threads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_loading_every_kind_imports_neither_boto3_nor_minio():
    out = run("import sys\n"
              "from providers import registry\n"
              "kinds = [k for e in registry.engines() for k in registry.kinds(e)]\n"
              "print(len(kinds), sorted(m for m in ('boto3', 'minio') if m in sys.modules))")
    count, loaded = out.split(" ", 1)
    assert int(count) > 10 and loaded == "[]"


def test_first_use_from_many_threads_builds_one_client_each():
    """Sixteen threads at once, as the provider server runs them: no half-imported package, one client per key."""
    out = run("from concurrent.futures import ThreadPoolExecutor\n"
              "from threading import Barrier\n"
              "from providers import minio, s3\n"
              "start = Barrier(16)\n"
              "def first_use(i):\n"
              "    start.wait()\n"
              "    admin = minio._admin('127.0.0.1:1', 'us-east-1', 'user', 'password')\n"
              "    client = s3._client('s3', 'http://127.0.0.1:1', 'us-east-1', 'key', 'secret')\n"
              "    return id(admin), id(client)\n"
              "with ThreadPoolExecutor(16) as pool:\n"
              "    seen = set(pool.map(first_use, range(16)))\n"
              "print(len(seen))")
    assert out == "1"
