#!/usr/bin/env bash
# Builds archway's container images, build-controller, builder and
# emulation-setup, for several platforms with archway's own `builder
# build`, and pushes each as one index: $REGISTRY/build-controller:$TAG,
# $REGISTRY/builder:$TAG and $REGISTRY/emulation-setup:$TAG.
#
# The Go binaries are cross-compiled for each platform (never compiled under
# emulation), all three in one go build with one set of flags so that the
# packages they share compile once per platform: cgo (buildah re-executes
# the builder into user and mount namespaces through C code), linked
# statically with the platform's cross compiler from Debian
# (gcc-aarch64-linux-gnu, gcc-powerpc64le-linux-gnu, gcc-s390x-linux-gnu and
# their libc6-dev-*-cross; `hack/tools.sh cross` installs them), netgo and
# osusergo, and Debian's static SQLite of the platform linked in (the same
# version as this machine's libsqlite3-dev; `hack/tools.sh cross` unpacks
# it into the cache, or set CROSS_LIBS), so that each runs on any base
# image.
# The linker warns that dlopen in a static binary needs the same glibc at
# run time: only PKCS#11 modules are loaded that way, which builds never
# use.
#
# emulation-setup (the binfmt DaemonSet of manifests/emulation) is a static
# Go binary and, for each platform, the qemu user-mode interpreters that
# run the other architectures on it, with their binfmt_misc registration
# lines, taken from Debian's qemu-user-static for that platform
# (`hack/tools.sh qemudebs` downloads the .debs into the cache, or set
# QEMU_DEBS to a directory holding qemu-user-static_<version>_<debarch>.deb).
# Only the interpreters of amd64, arm64, arm, ppc64le, s390x and riscv64
# are kept, not the package's ~30.
#
# Environment (make images passes its variables of the same names):
#   REGISTRY                     where to push, e.g. quay.io/me (required)
#   TAG                          the images' tag (default: git describe)
#   PLATFORMS                    default linux/amd64,linux/arm64,linux/ppc64le,linux/s390x
#   BUILD_CONTROLLER_BASE_IMAGE  build-controller's base (default in its Containerfile)
#   BUILDER_BASE_IMAGE           builder's base (default in its Containerfile)
#   BUILDER_INSTALL_PACKAGES     the command that adds git, ssh and CA certificates
#                                to builder's base (default in its Containerfile)
#   EMULATION_SETUP_BASE_IMAGE   emulation-setup's base (default scratch)
#   QEMU_DEBS                    where qemu-user-static .debs are (default: the cache)
#   CROSS_LIBS                   where libsqlite3-dev of each Debian architecture is
#                                unpacked, CROSS_LIBS/<debarch>/usr/lib/<triplet> (default: the cache)
#   BUILDER_FLAGS                more flags for `builder build`, e.g. --authfile FILE
#   IMAGES                       which images, comma-separated (default
#                                build-controller,builder,emulation-setup); only
#                                the programs they hold are compiled
#   IMAGES_OUT                   where the binaries go: the build context (default bin/images)
#   IMAGES_STEPS                 compile,build (the default), compile (the binaries
#                                into IMAGES_OUT only) or build (the images from the
#                                binaries an earlier compile left in IMAGES_OUT; no Go
#                                needed when BUILDER_BIN is given): e.g. compile as
#                                one user and build as another
#   BUILDER_BIN                  the builder for this machine that runs the builds
#                                (default: compiled into bin/builder)
# Building images runs buildah: as root, or, run as another user, inside a
# user namespace that hack/userns.sh sets up from the user's /etc/subuid and
# /etc/subgid ranges (it says what is missing); nothing else here needs
# root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

IMAGES=${IMAGES:-build-controller,builder,emulation-setup}
IMAGES_STEPS=${IMAGES_STEPS:-compile,build}
compile=0 build=0
IFS=, read -ra steps <<<"$IMAGES_STEPS"
for s in "${steps[@]}"; do
	case "$s" in
	compile) compile=1 ;;
	build) build=1 ;;
	*) echo "hack/images.sh: IMAGES_STEPS=$IMAGES_STEPS: give compile, build or compile,build" >&2; exit 2 ;;
	esac
done
IFS=, read -ra images <<<"$IMAGES"
[ ${#images[@]} -gt 0 ] || { echo "hack/images.sh: IMAGES is empty: name build-controller, builder or emulation-setup" >&2; exit 2; }
for i in "${images[@]}"; do
	case "$i" in
	build-controller | builder | emulation-setup) ;;
	*) echo "hack/images.sh: IMAGES=$IMAGES: $i is not one of build-controller, builder, emulation-setup" >&2; exit 2 ;;
	esac
done
# wants IMAGE says whether IMAGE is one of IMAGES.
wants() {
	local i
	for i in "${images[@]}"; do [ "$i" = "$1" ] && return 0; done
	return 1
}

REGISTRY=${REGISTRY:-}
if [ $build -eq 1 ] && [ -z "$REGISTRY" ]; then
	echo "hack/images.sh: set REGISTRY, e.g. make images REGISTRY=quay.io/me TAG=v0.1.0" >&2
	exit 2
fi
REGISTRY=${REGISTRY%/}
TAG=${TAG:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64,linux/ppc64le,linux/s390x}
VERSION=${VERSION:-$TAG}
out=${IMAGES_OUT:-bin/images}

export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
ldflags="-s -w -X github.com/archway-build/archway/pkg/version.Version=$VERSION"
# The Makefile's BUILD_TAGS: with -trimpath, every build here for this
# machine is the one the tests and make build compile.
tags="containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3"
host_arch=
[ $compile -eq 0 ] || host_arch=$(go env GOHOSTARCH)

# cross_cc prints the C cross compiler for a Go architecture.
cross_cc() {
	local triplet
	case "$1" in
	amd64) triplet=x86_64-linux-gnu ;;
	arm64) triplet=aarch64-linux-gnu ;;
	ppc64le) triplet=powerpc64le-linux-gnu ;;
	s390x) triplet=s390x-linux-gnu ;;
	arm) triplet=arm-linux-gnueabihf ;;
	*) echo "hack/images.sh: no C cross compiler known for $1" >&2; return 1 ;;
	esac
	if [ "$1" = "$host_arch" ]; then
		echo gcc
		return
	fi
	if ! command -v "$triplet-gcc" >/dev/null; then
		echo "hack/images.sh: $triplet-gcc is missing: apt-get install gcc-${triplet//_/-} (or hack/tools.sh apt)" >&2
		return 1
	fi
	echo "$triplet-gcc"
}

# sqlite_ldflags prints the linker flags that find the static SQLite of a
# Go architecture: this machine's libsqlite3-dev for its own, and for the
# others Debian's libsqlite3-dev of that architecture, which
# `hack/tools.sh cross` unpacks into the cache.
sqlite_ldflags() {
	local debarch triplet lib
	[ "$1" = "$host_arch" ] && return
	case "$1" in
	arm64) debarch=arm64 triplet=aarch64-linux-gnu ;;
	ppc64le) debarch=ppc64el triplet=powerpc64le-linux-gnu ;;
	s390x) debarch=s390x triplet=s390x-linux-gnu ;;
	arm) debarch=armhf triplet=arm-linux-gnueabihf ;;
	*) echo "hack/images.sh: no Debian architecture known for $1" >&2; return 1 ;;
	esac
	lib="$CROSS_LIBS/$debarch/usr/lib/$triplet"
	if [ ! -f "$lib/libsqlite3.a" ]; then
		echo "hack/images.sh: no static SQLite for $1 in $lib: run hack/tools.sh cross (as root, with apt) or set CROSS_LIBS" >&2
		return 1
	fi
	echo "-L$lib"
}

# qemu_handlers are the qemu interpreters the emulation-setup image holds,
# by binfmt_misc name (emulation-setup's --register takes the Go names:
# amd64, arm64, arm, ppc64le, s390x, riscv64).
qemu_handlers=(x86_64 aarch64 arm ppc64le s390x riscv64)
cache=${ARCHWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/archway}
QEMU_DEBS=${QEMU_DEBS:-$cache/debs}
CROSS_LIBS=${CROSS_LIBS:-$cache/cross}

# qemu_files ARCH DIR puts into DIR (a root file system) the interpreters
# of qemu_handlers but ARCH's own, from Debian's qemu-user-static for ARCH,
# with their registration lines and the paths those name.
qemu_files() {
	local arch=$1 dir=$2 debarch native
	case "$arch" in
	amd64) debarch=amd64 native=x86_64 ;;
	arm64) debarch=arm64 native=aarch64 ;;
	ppc64le) debarch=ppc64el native=ppc64le ;;
	s390x) debarch=s390x native=s390x ;;
	arm) debarch=armhf native=arm ;;
	*) echo "hack/images.sh: no Debian architecture known for $arch" >&2; return 1 ;;
	esac
	local debs=("$QEMU_DEBS"/qemu-user-static_*_"$debarch".deb)
	if [ ! -f "${debs[-1]}" ]; then
		echo "hack/images.sh: no qemu-user-static_*_$debarch.deb in $QEMU_DEBS: run hack/tools.sh qemudebs (as root, with apt) or set QEMU_DEBS" >&2
		return 1
	fi
	local members=() m n
	local listing
	listing=$(dpkg-deb --fsys-tarfile "${debs[-1]}" | tar -t)
	for n in "${qemu_handlers[@]}"; do
		[ "$n" = "$native" ] && continue
		# An interpreter Debian registers nowhere on ARCH (arm on arm64) is
		# left out with its line.
		grep -qxF "./usr/lib/binfmt.d/qemu-$n.conf" <<<"$listing" || continue
		for m in "./usr/bin/qemu-$n-static" "./usr/libexec/qemu-binfmt/$n-binfmt-P" "./usr/lib/binfmt.d/qemu-$n.conf"; do
			if grep -qxF "$m" <<<"$listing"; then members+=("$m"); fi
		done
	done
	mkdir -p "$dir"
	dpkg-deb --fsys-tarfile "${debs[-1]}" | tar -x -C "$dir" "${members[@]}"
	echo "    qemu from $(basename "${debs[-1]}"): $(cd "$dir/usr/lib/binfmt.d" && echo *)"
}

# The programs each image holds (emulation-setup's is moved into its root
# file system below).
programs=()
if wants build-controller; then programs+=(build-controller); fi
if wants builder; then programs+=(builder custom-builder); fi
if wants emulation-setup; then programs+=(emulation-setup); fi

# compile_platform OS/ARCH[/VARIANT] cross-compiles the programs of IMAGES
# for the platform into IMAGES_OUT/<os>_<arch>.
compile_platform() {
	local p=$1 os arch variant goarm= dir cc sqlite start prog pkgs=()
	IFS=/ read -r os arch variant <<<"$p"
	if [ "$arch" = arm ]; then goarm=${variant#v}; fi
	dir="$out/${os}_${arch}"
	mkdir -p "$dir"
	cc=$(cross_cc "$arch")
	sqlite=$(sqlite_ldflags "$arch")
	for prog in "${programs[@]}"; do pkgs+=("./cmd/$prog"); done
	# One go build of the programs with one set of flags: the packages
	# they share (most of them) compile once per platform. Everything is
	# linked statically: the builder needs cgo (buildah's re-exec into user
	# and mount namespaces), netgo and osusergo keep glibc's resolver and
	# user lookups out of every binary. SQLite's static library needs libm
	# after it.
	echo "==> $p: ${programs[*]} (cgo with $cc, static)"
	start=$SECONDS
	rm -rf "$dir/.bin"
	CGO_ENABLED=1 CC=$cc CGO_LDFLAGS=$sqlite GOOS=$os GOARCH=$arch GOARM=$goarm go build -trimpath \
		-tags "$tags" \
		-ldflags "$ldflags -linkmode external -extldflags '-static -lm'" \
		-o "$dir/.bin/" "${pkgs[@]}"
	for prog in "${programs[@]}"; do
		[ "$prog" = emulation-setup ] || mv "$dir/.bin/$prog" "$dir/"
	done
	if wants emulation-setup; then
		rm -rf "$dir/emulation-setup"
		mkdir -p "$dir/emulation-setup/usr/local/bin"
		mv "$dir/.bin/emulation-setup" "$dir/emulation-setup/usr/local/bin/"
	fi
	rmdir "$dir/.bin"
	echo "    $((SECONDS - start)) s"
	if wants emulation-setup; then qemu_files "$arch" "$dir/emulation-setup"; fi
}

IFS=, read -ra platforms <<<"$PLATFORMS"
for p in "${platforms[@]}"; do
	[ "${p%%/*}" = linux ] || { echo "hack/images.sh: platform $p: only linux is supported" >&2; exit 2; }
done
if [ $compile -eq 1 ]; then
	for p in "${platforms[@]}"; do compile_platform "$p"; done
fi
[ $build -eq 1 ] || exit 0
# Without the compile step, the binaries an earlier one left.
for p in "${platforms[@]}"; do
	IFS=/ read -r os arch _ <<<"$p"
	for prog in "${programs[@]}"; do
		f="$out/${os}_${arch}/$prog"
		[ "$prog" != emulation-setup ] || f="$out/${os}_${arch}/emulation-setup/usr/local/bin/$prog"
		[ -x "$f" ] || { echo "hack/images.sh: $f is missing: compile it first (IMAGES_STEPS=compile with the same IMAGES, PLATFORMS and IMAGES_OUT)" >&2; exit 2; }
	done
done

# The builder that builds the images runs here.
builder=${BUILDER_BIN:-}
if [ -z "$builder" ]; then
	echo "==> builder for this machine"
	builder=bin/builder
	go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$builder" ./cmd/builder
fi

# shellcheck disable=SC2206 # BUILDER_FLAGS is a list of flags.
flags=(${BUILDER_FLAGS:-})
# Without root, buildah runs as root of a user namespace (hack/userns.sh).
userns=()
[ "$(id -u)" = 0 ] || userns=("$root/hack/userns.sh")
build() {
	local name=$1
	shift
	echo "==> $REGISTRY/$name:$TAG for $PLATFORMS${userns:+ (in a user namespace: not root)}"
	"${userns[@]}" "$builder" build --platform "$PLATFORMS" -f "$root/images/$name/Containerfile" \
		-t "$REGISTRY/$name:$TAG" "$@" "${flags[@]}" "$out"
}
args=()
[ -z "${BUILD_CONTROLLER_BASE_IMAGE:-}" ] || args+=(--build-arg "BASE_IMAGE=$BUILD_CONTROLLER_BASE_IMAGE")
if wants build-controller; then build build-controller "${args[@]}"; fi
args=()
[ -z "${BUILDER_BASE_IMAGE:-}" ] || args+=(--build-arg "BASE_IMAGE=$BUILDER_BASE_IMAGE")
[ -z "${BUILDER_INSTALL_PACKAGES:-}" ] || args+=(--build-arg "INSTALL_PACKAGES=$BUILDER_INSTALL_PACKAGES")
if wants builder; then build builder "${args[@]}"; fi
args=()
[ -z "${EMULATION_SETUP_BASE_IMAGE:-}" ] || args+=(--build-arg "BASE_IMAGE=$EMULATION_SETUP_BASE_IMAGE")
if wants emulation-setup; then build emulation-setup "${args[@]}"; fi
