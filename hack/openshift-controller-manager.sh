#!/usr/bin/env bash
# Builds OpenShift's openshift-controller-manager (its build controller runs
# Custom-strategy Builds) from the Go module proxy, for
# TestOpenShiftBuildController (test/e2e/openshift):
#   ARCHWAY_OPENSHIFT_CONTROLLER_MANAGER=$(hack/openshift-controller-manager.sh) \
#     go test -tags "..." -p 1 ./test/e2e/openshift/ -run TestOpenShiftBuildController
# The proxy serves no version list for the module, only exact
# pseudo-versions; this is the one of January 2022. The checksum database
# has no entry for it (GONOSUMDB), and vbom.ml, which a dependency names,
# is refused by the proxy: its code moved to github.com/fvbommel/util.
# About 10 minutes on 2 cores; the binary is cached in ~/.cache/archway/bin.
set -euo pipefail
version=v0.0.0-alpha.0.0.20220106174623-2c2d50dbda3a
out="$HOME/.cache/archway/bin/openshift-controller-manager-$version"
if [ -x "$out" ]; then
	echo "$out"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GONOSUMDB=github.com/openshift,github.com/fvbommel GOFLAGS=-mod=mod
dir=$(cd "$work" && go mod download -json "github.com/openshift/openshift-controller-manager@$version" |
	sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
echo 'replace vbom.ml/util => github.com/fvbommel/util v0.0.0-20180919145318-efcd4e0f9787' >>go.mod
mkdir -p "$(dirname "$out")"
go build -tags containers_image_openpgp -o "$out.tmp" ./cmd/openshift-controller-manager >&2
mv "$out.tmp" "$out"
echo "$out"
