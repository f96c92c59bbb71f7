#!/usr/bin/env bash
# Runs CI (.ci/run) as a new machine would: in a fresh clone of HEAD, with
# empty Go module, Go build, golangci-lint and tool caches, so that every
# tool is built and every package compiled from nothing. It prints each
# stage's time, as CI does. Nothing outside its work directory changes but
# what .ci/run itself installs (apt packages, binfmt handlers).
#
#   hack/ci-cold.sh [--purge-apt] [--demo] [--work DIR]
#
# --purge-apt first removes the apt packages that make tools installs for
#   the cross builds (the cross compilers and their C libraries), to show
#   that make tools installs them again (as root).
# --demo runs the README's first command, make demo, instead of CI, and
#   prints its time: what a newcomer waits for on a new machine.
# --work DIR keeps the clone and the caches in DIR (default: a new
#   directory under /tmp, removed at the end unless KEEP=1).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
purge=0
demo=0
work=
while [ $# -gt 0 ]; do
	case "$1" in
	--purge-apt) purge=1 ;;
	--demo) demo=1 ;;
	--work)
		work=$2
		shift
		;;
	*)
		echo "hack/ci-cold.sh: unknown argument $1 (use --purge-apt, --demo, --work DIR)" >&2
		exit 2
		;;
	esac
	shift
done
if [ -z "$work" ]; then
	work=$(mktemp -d /tmp/archway-ci-cold-XXXXXX)
	[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

if [ $purge -eq 1 ]; then
	echo "=== removing the cross-build packages"
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 purge -y -q \
		gcc-aarch64-linux-gnu gcc-powerpc64le-linux-gnu gcc-s390x-linux-gnu \
		libc6-dev-arm64-cross libc6-dev-ppc64el-cross libc6-dev-s390x-cross >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 autoremove -y -q >/dev/null
fi

git clone -q "$root" "$work/src"
git -C "$work/src" checkout -q "$(git -C "$root" rev-parse HEAD)"
echo "=== cold CI of $(git -C "$work/src" log -1 --format='%h %s') in $work"
# Every cache a stage reads, emptied by pointing it into the work directory.
export XDG_CACHE_HOME=$work/cache
export GOPATH=$work/gopath
export GOMODCACHE=$work/gopath/pkg/mod
export GOCACHE=$work/cache/go-build
export GOLANGCI_LINT_CACHE=$work/cache/golangci-lint
export ARCHWAY_CACHE=$work/cache/archway
export CI=true
cd "$work/src"
start=$SECONDS
status=0
if [ $demo -eq 1 ]; then
	make demo </dev/null || status=$?
	echo "=== cold make demo exited $status after $((SECONDS - start))s"
else
	bash .ci/run </dev/null || status=$?
	echo "=== cold CI exited $status after $((SECONDS - start))s"
fi
# The module cache is read-only; let the trap remove it.
chmod -R u+w "$work/gopath" 2>/dev/null || true
exit $status
