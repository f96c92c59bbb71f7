#!/usr/bin/env bash
# hack/userns.sh COMMAND...: runs COMMAND as root of a new user namespace
# (and mount namespace) in which root is the calling user and uids/gids
# 1..N are the user's range in /etc/subuid and /etc/subgid, as rootless
# buildah sets one up. hack/images.sh runs archway's builder this way when
# it is not run as root: buildah then has the ids an image's files need
# (e.g. build-controller's 65532) without being root on the machine.
#
# Needs newuidmap and newgidmap (Debian's uidmap package), a range of at
# least 65536 ids for the user in /etc/subuid and /etc/subgid (e.g.
# `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 USER`),
# and unprivileged user namespaces (the kernel's default). RUN steps for
# other architectures need qemu registered with binfmt_misc by root, once
# (manifests/emulation does it on nodes; `hack/tools.sh` on the bed).
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: hack/userns.sh COMMAND [ARG...]" >&2; exit 2; }
user=$(id -un) uid=$(id -u) gid=$(id -g)
for tool in newuidmap newgidmap unshare; do
	command -v "$tool" >/dev/null || { echo "hack/userns.sh: $tool is missing: apt-get install uidmap util-linux (as root)" >&2; exit 1; }
done
# range FILE prints the start and count of the user's first range.
range() {
	awk -F: -v u="$user" -v n="$uid" '($1 == u || $1 == n) && $3 >= 65536 { print $2, $3; exit }' "$1"
}
read -r subuid nuid < <(range /etc/subuid) || true
read -r subgid ngid < <(range /etc/subgid) || true
if [ -z "${subuid:-}" ] || [ -z "${subgid:-}" ]; then
	echo "hack/userns.sh: $user has no range of 65536 ids in /etc/subuid and /etc/subgid: as root," \
		"usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $user (or run as root)" >&2
	exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/go"
# The child waits on the FIFO until its maps are written, then runs
# COMMAND with them (as uid 0 of its namespace).
unshare --user --mount --propagation private -- sh -c 'read -r _ < "$0" && exec "$@"' "$dir/go" "$@" &
pid=$!
while [ "$(readlink "/proc/$pid/ns/user")" = "$(readlink /proc/self/ns/user)" ]; do
	kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit; }
	sleep 0.01
done
if ! newuidmap "$pid" 0 "$uid" 1 1 "$subuid" "$nuid" || ! newgidmap "$pid" 0 "$gid" 1 1 "$subgid" "$ngid"; then
	kill "$pid" 2>/dev/null
	echo "hack/userns.sh: mapping ids into the namespace failed (see above)" >&2
	exit 1
fi
echo go >"$dir/go"
wait "$pid"
