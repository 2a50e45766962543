#!/usr/bin/env bash
# Build the MinIO server binary that the local "minio" engine runs
# (tools/engines/minio.py) from the Go module proxy, into .devstack/bin/minio.
#
# MinIO is AGPL-3.0. It is used here ONLY as an external test server, run as a
# separate process and spoken to over the S3 / admin HTTP APIs. Nothing in the
# product imports or vendors its code; this directory holds only our go.mod
# (which pins the server by `tool github.com/minio/minio`), go.sum and this
# script. The built binary lives under .devstack/ (git-ignored).
#
# Skips the build when the binary exists and was built from the pinned
# version (recorded in .devstack/bin/minio.version); --force rebuilds.
# A cold build takes about 5 minutes on 2 cores and ~1 GB of module cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${MINIO_BIN:-$root/.devstack/bin/minio}"
stamp="$out.version"

command -v go >/dev/null || { echo "minio build: 'go' is not on PATH (Go >= 1.25 needed)" >&2; exit 1; }
cd "$here"
version="$(go list -m -f '{{.Version}}' github.com/minio/minio)"

if [ "${1:-}" != "--force" ] && [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "minio $version already built: $out"
  exit 0
fi

mkdir -p "$(dirname "$out")"
echo "building minio $version into $out (first build: ~5 min)"
start=$(date +%s)
# GOTOOLCHAIN=local: never try to download another Go toolchain.
GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
  go build -trimpath -ldflags "-s -w" -o "$out.partial" github.com/minio/minio
mv -f "$out.partial" "$out"
echo "$version" > "$stamp"
echo "built minio $version in $(( $(date +%s) - start ))s"
