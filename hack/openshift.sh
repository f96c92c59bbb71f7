#!/usr/bin/env bash
# Builds OpenShift's own programs from the Go module proxy, for the suite
# that runs archway's custom-builder mode under them (test/e2e/openshiftreal):
#   hack/openshift.sh openshift-apiserver|openshift-controller-manager|oc
# prints the path of the binary, built once and cached in
# ~/.cache/archway/bin; `hack/openshift.sh env` builds all three and prints
# the suite's variables. `make test-openshift` runs the suite with them.
#
# The proxy lists no versions of these modules and refuses @latest; it
# serves exact pseudo-versions, found in public go.mod files that require
# them. The checksum database has none of them (GONOSUMDB). Each is built
# inside its own module, so that its replace directives apply, with two
# changes, both because the proxy refuses a module the original names:
#   - openshift-controller-manager: vbom.ml/util, whose code moved to
#     github.com/fvbommel/util;
#   - openshift-apiserver: OpenShift's fork of k8s.io/apiserver, replaced by
#     the upstream release it forks (v0.26.2); the one fork-only call
#     (RemoveOpenAPIData, before its OpenAPI aggregation controller) goes,
#     and with it that controller: the server serves its own OpenAPI.
# Cold, on 2 cores: openshift-apiserver about 4 minutes, oc about 15,
# openshift-controller-manager about 10 (with Kubernetes' packages in the
# Go build cache, less).
set -euo pipefail

declare -A module version
module[openshift-apiserver]=github.com/openshift/openshift-apiserver
version[openshift-apiserver]=v0.0.0-alpha.0.0.20230503155233-aac3dd5bf054
module[openshift-controller-manager]=github.com/openshift/openshift-controller-manager
version[openshift-controller-manager]=v0.0.0-alpha.0.0.20220106174623-2c2d50dbda3a
module[oc]=github.com/openshift/oc
version[oc]=v0.0.0-alpha.0.0.20250108103617-ae1bd9e4a75b

# patch edits the module's copy in the current directory before the build.
patch() {
	case "$1" in
	openshift-apiserver)
		go mod edit -replace k8s.io/apiserver=k8s.io/apiserver@v0.26.2
		local f=pkg/cmd/openshift-apiserver/openshiftapiserver/openshift_apiserver.go
		grep -q '^	delegatedAPIServer.RemoveOpenAPIData()$' "$f"
		sed -i 's/^	delegatedAPIServer.RemoveOpenAPIData()$/	if true {\n		return nil\n	}/' "$f"
		;;
	openshift-controller-manager)
		go mod edit -replace vbom.ml/util=github.com/fvbommel/util@v0.0.0-20180919145318-efcd4e0f9787
		;;
	esac
}

build() {
	local name=$1
	local out="$HOME/.cache/archway/bin/$name-${version[$name]}"
	if [ -x "$out" ]; then
		echo "$out"
		return
	fi
	local work
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	export GONOSUMDB=github.com/openshift,github.com/fvbommel GOFLAGS="-mod=mod -trimpath"
	local dir
	dir=$(cd "$work" && go mod download -json "${module[$name]}@${version[$name]}" |
		sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	cp -r "$dir" "$work/src"
	chmod -R u+w "$work/src"
	# The module's vendor directory holds only modules.txt: build from the
	# module cache.
	rm -rf "$work/src/vendor"
	(
		cd "$work/src"
		patch "$name"
		mkdir -p "$(dirname "$out")"
		go build -tags containers_image_openpgp -o "$out.tmp" "./cmd/$name" >&2
	)
	mv "$out.tmp" "$out"
	echo "$out"
}

case "${1:-}" in
openshift-apiserver | openshift-controller-manager | oc)
	build "$1"
	;;
env)
	echo "ARCHWAY_OPENSHIFT_APISERVER=$(build openshift-apiserver)"
	echo "ARCHWAY_OPENSHIFT_CONTROLLER_MANAGER=$(build openshift-controller-manager)"
	echo "ARCHWAY_OC=$(build oc)"
	;;
*)
	echo "usage: $0 openshift-apiserver|openshift-controller-manager|oc|env" >&2
	exit 2
	;;
esac
