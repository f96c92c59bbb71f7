#!/usr/bin/env bash
# make release VERSION=vX.Y.Z REGISTRY=quay.io/me (as root, or as a user
# with a range in /etc/subuid, see hack/userns.sh): a versioned release in
# RELEASE_DIR (default bin/release/VERSION), composed of the other targets:
#   make images             every image, multi-arch, pushed as REGISTRY/<image>:VERSION
#   make release-manifests  manifests/: the install pinned by digest (with
#                           emulation/ and openshift-builds/), openshift/ and
#                           openshift-placement/
#   make plugin-release     plugin/: kubectl-archway binaries, krew archives,
#                           archway.yaml (krew manifest), SHA256SUMS
#   make bundle             bundle/: the OLM bundle of manifests/ (CSV, CRDs,
#                           annotations, bundle.Dockerfile, cluster.yaml),
#                           validated
#   builder build           the bundle image REGISTRY/archway-bundle:VERSION
#                           (FROM scratch, for every platform: OLM unpacks it
#                           on a node of the cluster)
# VERSION is checked first (v and a semantic version, no build metadata:
# it is the images' tag); a bad one changes nothing. Every step refuses to
# go on after a failure of the one before. The variables of make images
# (PLATFORMS, *_BASE_IMAGE, BUILDER_FLAGS, ...) and RELEASE_FLAGS (e.g.
# --authfile FILE) apply.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

make=${MAKE:-make}
VERSION=${VERSION:-}
REGISTRY=${REGISTRY:-}
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64,linux/ppc64le,linux/s390x}
RELEASE_FLAGS=${RELEASE_FLAGS:-}

semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if [ -z "$VERSION" ]; then
	echo "make release: give the version, e.g. make release VERSION=v0.1.0 REGISTRY=quay.io/me" >&2
	exit 2
fi
if ! [[ $VERSION =~ $semver ]]; then
	echo "make release: VERSION='$VERSION' is not a release version: give v and a semantic version," \
		"without build metadata (it is the images' tag), e.g. make release VERSION=v0.1.0 REGISTRY=quay.io/me" >&2
	exit 2
fi
if [ -z "$REGISTRY" ]; then
	echo "make release: set REGISTRY, where the images are pushed, e.g. make release VERSION=$VERSION REGISTRY=quay.io/me" >&2
	exit 2
fi
out=${RELEASE_DIR:-bin/release/$VERSION}
marker="$out/RELEASE"
if [ -e "$out" ] && ! [ -f "$marker" ]; then
	echo "make release: $out exists and was not written by make release: remove it or set RELEASE_DIR" >&2
	exit 2
fi
rm -f "$marker"
mkdir -p "$out"
out_abs=$(cd "$out" && pwd)

start=$SECONDS
step() {
	echo "==> make release: $*"
}
timed() {
	local t=$SECONDS
	"$@"
	times+=("$(printf '%-18s %4d s' "$1" $((SECONDS - t)))")
}
times=()

images() {
	step "images $REGISTRY/{build-controller,builder,emulation-setup}:$VERSION for $PLATFORMS"
	"$make" --no-print-directory images REGISTRY="$REGISTRY" TAG="$VERSION" VERSION="$VERSION" PLATFORMS="$PLATFORMS"
}
manifests() {
	for base in default openshift openshift/placement; do
		dir=$out/manifests
		[ "$base" = default ] || dir=$out/${base//\//-}
		step "manifests ($base) pinned by digest into $dir"
		"$make" --no-print-directory release-manifests REGISTRY="$REGISTRY" TAG="$VERSION" PLATFORMS="$PLATFORMS" \
			RELEASE_BASE="$base" RELEASE_OUT="$dir" RELEASE_FLAGS="$RELEASE_FLAGS"
	done
}
plugin() {
	step "kubectl-archway and its krew manifest into $out/plugin"
	"$make" --no-print-directory plugin-release VERSION="$VERSION" PLUGIN_OUT="$out/plugin"
}
bundle() {
	step "OLM bundle of $out/manifests into $out/bundle"
	"$make" --no-print-directory bundle VERSION="$VERSION" PLATFORMS="$PLATFORMS" BUNDLE_INSTALL="$out/manifests" \
		BUNDLE_OUT="$out/bundle" BUNDLE_FLAGS=--require-digests
}
bundle_image() {
	step "bundle image $REGISTRY/archway-bundle:$VERSION for $PLATFORMS"
	# shellcheck disable=SC2206 # BUILDER_FLAGS is a list of flags.
	local flags=(${BUILDER_FLAGS:-}) userns=()
	[ "$(id -u)" = 0 ] || userns=("$root/hack/userns.sh")
	"${userns[@]}" bin/builder build --platform "$PLATFORMS" -f "$out_abs/bundle/bundle.Dockerfile" \
		-t "$REGISTRY/archway-bundle:$VERSION" "${flags[@]}" "$out/bundle"
}
timed images
timed manifests
timed plugin
timed bundle
timed bundle_image

{
	echo "archway $VERSION, images in $REGISTRY, written by make release"
	(cd "$out" && find . -type f ! -name RELEASE | sort)
} >"$marker"
echo "==> make release $VERSION: wrote $out in $((SECONDS - start)) s"
printf '    %s\n' "${times[@]}"
sed 1d "$marker" | sed "s|^\./|    $out/|"
