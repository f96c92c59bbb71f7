#!/usr/bin/env bash
# Installs everything archway's tests, bed and demo need, idempotently, into a
# cache outside the clone. Safe to rerun: each part is skipped when present.
#
#   hack/tools.sh            what the tests need (group test)
#   hack/tools.sh demo       what make demo needs
#   hack/tools.sh all        every part
#   hack/tools.sh apt qemu   only the named parts
#
# Parts: apt, cross, qemu, busybox, qemudebs, kube, etcd, kwok, registry, node,
# controller-gen, golangci-lint, buildkit. Binaries land in
# $ARCHWAY_CACHE/bin/<name>-<version>.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ARCHWAY_CACHE=${ARCHWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/archway}
BIN="$ARCHWAY_CACHE/bin"
mkdir -p "$BIN"
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

step() { printf '[tools] %s\n' "$*"; }
fail() {
	printf '[tools] FAILED: %s\n[tools] retry with: hack/tools.sh %s\n' "$1" "$2" >&2
	exit 1
}

# modversion DIR MODULE prints the version the tools module in DIR pins.
modversion() {
	awk -v m="$2" '$1 == "require" && $2 == m { print $3 } $1 == m { print $2 }' "$ROOT/hack/tools/$1/go.mod" | head -n 1
}

# gobuild PART MODDIR PKG NAME VERSION [extra go build args...] builds with
# -trimpath.
gobuild() {
	local part=$1 dir=$2 pkg=$3 name=$4 version=$5
	shift 5
	local out="$BIN/$name-$version"
	if [ -x "$out" ]; then
		return 0
	fi
	step "building $name $version (once; cached in $BIN)"
	local tmp="$out.tmp.$$"
	local start=$SECONDS
	if ! (cd "$ROOT/hack/tools/$dir" && go build -trimpath "$@" -o "$tmp" "$pkg"); then
		rm -f "$tmp"
		fail "go build of $name $version" "$part"
	fi
	mv "$tmp" "$out"
	step "built $name in $((SECONDS - start))s"
}

apt_install() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || fail "apt packages ${missing[*]} are missing and installing them needs root" apt
	step "apt-get install ${missing[*]}"
	local i
	for i in 1 2 3; do
		if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
			return 0
		fi
		apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null 2>&1 || true
	done
	fail "apt-get install ${missing[*]}" apt
}

part_apt() {
	# git, ip (iproute2) and setpriv (util-linux) are run by the bed and the
	# builder's tests; buildah and runc by the builder benchmark; useradd
	# (passwd) and newuidmap (uidmap, which hack/userns.sh runs) by the
	# builder suite's test of make images without root.
	apt_install git qemu-user-static libsqlite3-dev gcc make ca-certificates buildah runc iproute2 util-linux \
		passwd uidmap
}

# part_cross installs the C cross compilers for builder's cgo in make
# images (hack/images.sh): the Go binaries are cross-compiled, never
# compiled under emulation. Each compiler only recommends its target's C
# library and headers, and recommends are off, so those are named too.
# The builder links Debian's static SQLite of each platform
# (cross_sqlite) rather than compiling SQLite's amalgamation in cgo: that
# compile took 163 s of one core for each platform.
part_cross() {
	[ "$(uname -m)" = x86_64 ] || fail "make images cross-compiles from an x86_64 machine only (this is $(uname -m))" cross
	apt_install gcc-aarch64-linux-gnu gcc-powerpc64le-linux-gnu gcc-s390x-linux-gnu \
		libc6-dev-arm64-cross libc6-dev-ppc64el-cross libc6-dev-s390x-cross libsqlite3-dev
	local targets=(arm64:aarch64-linux-gnu ppc64el:powerpc64le-linux-gnu s390x:s390x-linux-gnu)
	cross_sqlite "${targets[@]}"
	check_cross "${targets[@]}"
}

# cross_sqlite DEBARCH:TRIPLET... unpacks Debian's libsqlite3-dev of each
# architecture into $ARCHWAY_CACHE/cross/DEBARCH, at the version of this
# machine's libsqlite3-dev, whose /usr/include/sqlite3.h the cross
# compilers include. hack/images.sh links its libsqlite3.a.
cross_sqlite() {
	local version a arch triplet dir need=()
	version=$(dpkg-query -W -f='${Version}' libsqlite3-dev) || fail "libsqlite3-dev is not installed" apt
	for a in "$@"; do
		[ -f "$ARCHWAY_CACHE/cross/${a%%:*}/.libsqlite3-dev_$version" ] || need+=("${a%%:*}")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	debs cross "libsqlite3-dev=$version" "${need[@]}"
	for a in "$@"; do
		arch=${a%%:*} triplet=${a#*:}
		dir="$ARCHWAY_CACHE/cross/$arch"
		[ -f "$dir/.libsqlite3-dev_$version" ] && continue
		step "unpacking libsqlite3-dev $version for $arch"
		rm -rf "$dir.tmp"
		mkdir -p "$dir.tmp"
		dpkg-deb -x "$ARCHWAY_CACHE/debs/libsqlite3-dev_${version//:/%3a}_$arch.deb" "$dir.tmp" || fail "unpacking libsqlite3-dev for $arch" cross
		[ -f "$dir.tmp/usr/lib/$triplet/libsqlite3.a" ] || fail "libsqlite3-dev for $arch has no usr/lib/$triplet/libsqlite3.a" cross
		touch "$dir.tmp/.libsqlite3-dev_$version"
		rm -rf "$dir"
		mv "$dir.tmp" "$dir"
	done
}

# check_cross DEBARCH:TRIPLET... compiles and statically links a C program that
# calls SQLite with each cross compiler, as the builder's cgo build does,
# so a missing piece fails here naming its package rather than minutes
# into make images.
check_cross() {
	local dir a t arch
	dir=$(mktemp -d)
	printf '#include <stdio.h>\n#include <sqlite3.h>\nint main(void) { puts(sqlite3_libversion()); return 0; }\n' >"$dir/c.c"
	for a in "$@"; do
		arch=${a%%:*} t=${a#*:}
		if ! "$t-gcc" -static -o "$dir/c-$t" "$dir/c.c" -L"$ARCHWAY_CACHE/cross/$arch/usr/lib/$t" -lsqlite3 -lm 2>"$dir/err"; then
			cat "$dir/err" >&2
			rm -rf "$dir"
			fail "$t-gcc cannot build a static C program with SQLite (packages gcc-${t//_/-}, libc6-dev-$arch-cross, libsqlite3-dev; $ARCHWAY_CACHE/cross/$arch)" cross
		fi
	done
	rm -rf "$dir"
}

# part_qemu registers qemu user-mode handlers with binfmt_misc so foreign
# architecture binaries run. It never removes a handler it did not add.
part_qemu() {
	local bm=/proc/sys/fs/binfmt_misc
	if [ ! -e "$bm/register" ]; then
		mount -t binfmt_misc binfmt_misc "$bm" || fail "mounting binfmt_misc at $bm (needs root)" qemu
	fi
	local arch
	for arch in aarch64 arm ppc64le s390x; do
		if [ -e "$bm/qemu-$arch" ]; then
			continue
		fi
		local conf=/usr/lib/binfmt.d/qemu-$arch.conf
		[ -f "$conf" ] || fail "$conf is missing (package qemu-user-static)" "apt qemu"
		step "registering qemu-$arch with binfmt_misc"
		# A concurrent registration wins the race harmlessly.
		cat "$conf" >"$bm/register" 2>/dev/null || [ -e "$bm/qemu-$arch" ] || fail "registering qemu-$arch" qemu
	done
}

# debs PART PACKAGE[=VERSION] DEBARCH... keeps Debian's PACKAGE (at VERSION,
# or the newest) for each Debian architecture in the cache
# ($ARCHWAY_CACHE/debs), downloaded with apt.
debs() {
	local part=$1 pkg=${2%%=*} want=
	[[ $2 == *=* ]] && want=${2#*=}
	shift 2
	local dir="$ARCHWAY_CACHE/debs"
	mkdir -p "$dir"
	# apt-get download names an epoch's colon %3a.
	local file="${pkg}_${want:-*}"
	file=${file//:/%3a}
	local arch need=()
	for arch in "$@"; do
		compgen -G "$dir/${file}_$arch.deb" >/dev/null || need+=("$arch")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || fail "downloading $pkg needs root (apt)" "$part"
	step "downloading $pkg for ${need[*]}"
	local added=()
	for arch in "${need[@]}"; do
		if ! dpkg --print-foreign-architectures | grep -qx "$arch" && [ "$arch" != "$(dpkg --print-architecture)" ]; then
			dpkg --add-architecture "$arch"
			added+=("$arch")
		fi
	done
	local i ok=0
	for i in 1 2 3 4 5 6; do
		apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null 2>&1 || true
		ok=1
		for arch in "${need[@]}"; do
			compgen -G "$dir/${file}_$arch.deb" >/dev/null && continue
			(cd "$dir" && apt-get download -q "$pkg:$arch${want:+=$want}" >/dev/null 2>&1) || ok=0
		done
		[ $ok -eq 1 ] && break
		sleep 2
	done
	for arch in "${added[@]}"; do
		dpkg --remove-architecture "$arch" || true
	done
	[ $ok -eq 1 ] || fail "apt-get download $pkg for ${need[*]}" "$part"
}

# part_busybox keeps Debian's busybox-static for each architecture, the
# seed of the bed's multi-arch base image, in the cache.
part_busybox() {
	debs busybox busybox-static amd64 arm64 armhf ppc64el s390x
}

# part_qemudebs keeps Debian's qemu-user-static for each architecture
# make images builds: the emulation-setup image carries a few of its
# interpreters (hack/images.sh).
part_qemudebs() {
	debs qemudebs qemu-user-static amd64 arm64 ppc64el s390x
}

# shared_tags are the build tags archway's build has that change
# Kubernetes' packages too (the Makefile's BUILD_TAGS; -trimpath and cgo
# as there).
shared_tags="netgo osusergo"

# kube_build builds the named commands of k8s.io/kubernetes, one after
# another (they share most packages). They are built as archway's own
# packages are (cgo on, -trimpath, shared_tags), and hack/tools/kube/go.mod requires
# the versions archway's go.mod has of every module both build from: the
# half of archway's packages that Kubernetes has (client-go, apiserver,
# their dependencies) then compile once, here, and archway's build finds
# them in the Go build cache.
kube_build() {
	local v
	v=$(modversion kube k8s.io/kubernetes)
	local ld="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitVersion=$v"
	local c
	for c in "$@"; do
		gobuild kube kube "k8s.io/kubernetes/cmd/$c" "$c" "$v" -tags "$shared_tags" -ldflags "$ld"
	done
}

part_kube() {
	kube_build kube-apiserver kube-scheduler kube-controller-manager kubectl
}

# The demo's control plane: no kube-controller-manager, which only
# `make demo INSTALL=1` needs (its Deployments), and which it adds.
part_kube-demo() {
	kube_build kube-apiserver kube-scheduler kubectl
}

part_kube-controller-manager() {
	kube_build kube-controller-manager
}

part_etcd() {
	CGO_ENABLED=0 gobuild etcd etcd . etcd "$(modversion etcd go.etcd.io/etcd/server/v3)" -ldflags "-s -w"
}

# kwok is built as the Kubernetes tools are (cgo on, shared_tags) from
# their versions of the modules both require (TestKwokSharesKubesVersions),
# after them: client-go and the packages below it compile once (133 s
# alone on a new machine, 42 s after kube-apiserver).
part_kwok() {
	gobuild kwok kwok sigs.k8s.io/kwok/cmd/kwok kwok "$(modversion kwok sigs.k8s.io/kwok)" -tags "$shared_tags" -ldflags "-s -w"
}

part_registry() {
	CGO_ENABLED=0 gobuild registry registry github.com/distribution/distribution/v3/cmd/registry registry \
		"$(modversion registry github.com/distribution/distribution/v3)" -ldflags "-s -w"
}

part_controller-gen() {
	CGO_ENABLED=0 gobuild controller-gen controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen controller-gen \
		"$(modversion controller-gen sigs.k8s.io/controller-tools)" -ldflags "-s -w"
}

part_golangci-lint() {
	CGO_ENABLED=0 gobuild golangci-lint golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint golangci-lint \
		"$(modversion golangci-lint github.com/golangci/golangci-lint/v2)" -ldflags "-s -w"
}

# part_buildkit builds BuildKit's daemon and client, which the builder
# benchmark runs beside archway's builder on the same Dockerfiles.
part_buildkit() {
	local v
	v=$(modversion buildkit github.com/moby/buildkit)
	local ld="-s -w -X github.com/moby/buildkit/version.Version=$v"
	CGO_ENABLED=0 gobuild buildkit buildkit github.com/moby/buildkit/cmd/buildkitd buildkitd "$v" -ldflags "$ld"
	CGO_ENABLED=0 gobuild buildkit buildkit github.com/moby/buildkit/cmd/buildctl buildctl "$v" -ldflags "$ld"
}

# part_node builds the parts of the bed's real node, all from pinned
# modules: the kubelet (same Kubernetes version as the control plane),
# containerd 2 with its runc shim, runc (cgo, with libseccomp) and
# the CNI plugins the node's pod network uses.
part_node() {
	apt_install libseccomp-dev iptables
	local kv
	kv=$(modversion kube k8s.io/kubernetes)
	gobuild node kube k8s.io/kubernetes/cmd/kubelet kubelet "$kv" -tags "$shared_tags" \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$kv"
	gobuild node kube k8s.io/kubernetes/cmd/kube-proxy kube-proxy "$kv" -tags "$shared_tags" \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$kv"
	local cv
	cv=$(modversion containerd github.com/containerd/containerd/v2)
	local c
	for c in containerd containerd-shim-runc-v2; do
		CGO_ENABLED=0 gobuild node containerd "github.com/containerd/containerd/v2/cmd/$c" "$c" "$cv" \
			-tags "no_btrfs no_zfs no_devmapper" -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$cv"
	done
	local rv
	rv=$(modversion runc github.com/opencontainers/runc)
	CGO_ENABLED=1 gobuild node runc github.com/opencontainers/runc runc "$rv" \
		-tags seccomp -ldflags "-s -w -X main.version=${rv#v}"
	local nv
	nv=$(modversion cni github.com/containernetworking/plugins)
	local p
	for p in ipam/host-local main/bridge main/loopback meta/portmap; do
		CGO_ENABLED=0 gobuild node cni "github.com/containernetworking/plugins/plugins/$p" "cni-${p#*/}" "$nv" -ldflags "-s -w"
	done
}

# part_links gives the versioned binaries the plain names envtest and the bed
# look up, in one directory per Kubernetes version.
# link TARGET NAME points the symbolic link NAME at TARGET unless it does
# already, by renaming a new link over it: a test reading NAME while
# another hack/tools.sh runs (make lint beside make test in CI) never
# finds it missing.
link() {
	[ "$(readlink "$2" 2>/dev/null)" != "$1" ] || return 0
	ln -sfn "$1" "$2.tmp.$$"
	mv -fT "$2.tmp.$$" "$2"
}

part_links() {
	local kv
	kv=$(modversion kube k8s.io/kubernetes)
	local assets="$BIN/assets-$kv"
	mkdir -p "$assets"
	local c
	for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
		link "../$c-$kv" "$assets/$c"
	done
	link "../etcd-$(modversion etcd go.etcd.io/etcd/server/v3)" "$assets/etcd"
	link "../kwok-$(modversion kwok sigs.k8s.io/kwok)" "$assets/kwok"
	link "../registry-$(modversion registry github.com/distribution/distribution/v3)" "$assets/registry"
	link "../controller-gen-$(modversion controller-gen sigs.k8s.io/controller-tools)" "$assets/controller-gen"
	link "../golangci-lint-$(modversion golangci-lint github.com/golangci/golangci-lint/v2)" "$assets/golangci-lint"
	for c in kubelet kube-proxy; do
		link "../$c-$kv" "$assets/$c"
	done
	local cv
	cv=$(modversion containerd github.com/containerd/containerd/v2)
	for c in containerd containerd-shim-runc-v2; do
		link "../$c-$cv" "$assets/$c"
	done
	link "../runc-$(modversion runc github.com/opencontainers/runc)" "$assets/runc"
	# The kubelet's containerd finds its CNI plugins by their plain names in
	# one directory.
	local nv
	nv=$(modversion cni github.com/containernetworking/plugins)
	mkdir -p "$assets/cni"
	for c in host-local bridge loopback portmap; do
		link "../../cni-$c-$nv" "$assets/cni/$c"
	done
	local bk
	bk=$(modversion buildkit github.com/moby/buildkit)
	link "../buildkitd-$bk" "$assets/buildkitd"
	link "../buildctl-$bk" "$assets/buildctl"
}

# assets prints the directory holding the plain-named binaries.
if [ "${1:-}" = "assets" ]; then
	echo "$BIN/assets-$(modversion kube k8s.io/kubernetes)"
	exit 0
fi

# Groups of parts, each built one part after another in the order its
# users need them: big Go programs built in parallel on 2 cores take
# several times longer.
#   test   what make test needs (the default)
#   demo   what make demo needs: no cross compilers, no linters, no
#          kube-controller-manager (make demo INSTALL=1 adds it)
#   all    every part
group_test=(apt qemu busybox etcd kube kwok registry node cross qemudebs buildkit)
group_demo=(apt qemu busybox etcd kube-demo kwok registry)
group_all=(apt qemu busybox etcd kube kwok registry node cross qemudebs buildkit controller-gen golangci-lint)

parts=()
[ $# -gt 0 ] || set -- test
for a in "$@"; do
	case "$a" in
	test) parts+=("${group_test[@]}") ;;
	demo) parts+=("${group_demo[@]}") ;;
	all) parts+=("${group_all[@]}") ;;
	*) parts+=("$a") ;;
	esac
done
for p in "${parts[@]}"; do
	declare -F "part_$p" >/dev/null || fail "unknown part $p (parts: apt cross qemu busybox qemudebs kube kube-demo kube-controller-manager etcd kwok registry node controller-gen golangci-lint buildkit; groups: test demo all)" ""
	"part_$p"
done
part_links
