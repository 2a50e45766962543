#!/usr/bin/env bash
# Builds the pulumi CLI, our Python language host and the dynamic-provider
# plugin shim into .devstack/bin, from the Go modules pinned in go.mod/go.sum.
# A second run does nothing when the binaries already report the pinned version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${DEVSTACK_BIN:-$root/.devstack/bin}"
# One version for the CLI, the language host and the `pulumi` Python package.
version="$(sed -n 's/^[[:space:]]*github.com\/pulumi\/pulumi\/pkg\/v3 \(v[0-9.]*\).*/\1/p' "$here/go.mod")"
# The language host is ours: a change to its source rebuilds it (the stamp holds its digest).
host_stamp="$version $(sha256sum "$here/language-python/main.go" | cut -c1-16)"
ldflags="-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version"

# The plugin shim is ours and tiny: always install the checkout's copy.
mkdir -p "$bin"
install -m 0755 "$here/pulumi-resource-pulumi-python" "$bin/pulumi-resource-pulumi-python"

if [[ -x "$bin/pulumi" && -x "$bin/pulumi-language-python" \
      && -x "$bin/pulumi-language-python-exec" && -x "$bin/pulumi-resource-pulumi-python" \
      && "$("$bin/pulumi" version 2>/dev/null)" == "$version" \
      && -f "$bin/.language-host-version" && "$(cat "$bin/.language-host-version")" == "$host_stamp" ]]; then
  echo "pulumi $version already built in $bin"
  exit 0
fi

mkdir -p "$bin"
cd "$here"
export GOFLAGS="-mod=readonly -buildvcs=false"
start=$SECONDS
echo "building pulumi $version into $bin (cold: about 10 minutes on 2 cores)"
go build -trimpath -ldflags "$ldflags" -o "$bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
go build -trimpath -ldflags "-s -w -X main.version=${version#v}" -o "$bin/pulumi-language-python" ./language-python
echo "$host_stamp" > "$bin/.language-host-version"

# The exec script that runs a Python program ships in the sdk/v3 module of the
# same release; take it from the module cache rather than keeping a copy.
sdk_dir="$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)"
install -m 0755 "$sdk_dir/python/cmd/pulumi-language-python-exec" "$bin/pulumi-language-python-exec"
echo "built pulumi $("$bin/pulumi" version) in $((SECONDS - start))s"
