#!/usr/bin/env bash
# Builds archway's documentation site (mkdocs.yml, docs/) with MkDocs from
# Debian's package, installing it when missing. The build fails on anything a
# reader would hit as a dead end: a link to a page or file that does not
# exist, a link to an anchor a page does not have, a page in the navigation
# that does not exist, and a page under docs/ left out of the navigation.
#
#   hack/docs.sh            install MkDocs if missing, then build into $DOCS_OUT
#   hack/docs.sh install    only install MkDocs
#   hack/docs.sh serve      install, then serve the site on 127.0.0.1:8000 while editing
#
# DOCS_OUT defaults to _site in the clone (git-ignored).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DOCS_OUT=${DOCS_OUT:-$ROOT/_site}
# The MkDocs the site is written for: Debian bookworm's package (mkdocs
# 1.4.2+dfsg-2, theme mkdocs). Another version may warn differently, so
# it is refused until someone builds the site with it and raises this.
MKDOCS_VERSION=1.4.2

step() { printf '[docs] %s\n' "$*"; }
fail() {
	printf '[docs] FAILED: %s\n[docs] retry with: hack/docs.sh %s\n' "$1" "$2" >&2
	exit 1
}

apt_install() {
	local missing=() p i
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || fail "apt packages ${missing[*]} are missing and installing them needs root" install
	step "apt-get install ${missing[*]}"
	for i in 1 2 3; do
		if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
			return 0
		fi
		apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null 2>&1 || true
	done
	fail "apt-get install ${missing[*]}" install
}

install_mkdocs() {
	apt_install mkdocs
	local v
	v=$(mkdocs --version 2>/dev/null | awk '{ print $3 }') || true
	[ -n "$v" ] || fail "mkdocs (package mkdocs) is installed but does not run: mkdocs --version printed nothing" install
	[ "$v" = "$MKDOCS_VERSION" ] ||
		fail "mkdocs $v is installed; the site is checked with $MKDOCS_VERSION (raise MKDOCS_VERSION in hack/docs.sh once it builds cleanly with $v)" install
}

build() {
	local log
	log=$(mktemp)
	trap 'rm -f "$log"' RETURN
	step "mkdocs build --strict into $DOCS_OUT"
	if ! (cd "$ROOT" && mkdocs build --strict --clean --site-dir "$DOCS_OUT") >"$log" 2>&1; then
		cat "$log" >&2
		fail "mkdocs build: fix the warnings above (a link to a missing page, a nav entry without its file)" build
	fi
	# MkDocs 1.4 only notes, without failing, a page that no nav entry
	# reaches; a reader could never find it.
	if grep -q 'not included in the "nav" configuration' "$log"; then
		grep -A50 'not included in the "nav" configuration' "$log" | grep -E '^ *- ' >&2 || true
		fail "pages under docs/ are missing from nav in mkdocs.yml (listed above)" build
	fi
	/usr/bin/python3 "$ROOT/hack/docs-links.py" "$DOCS_OUT" || fail "broken links in the built site (listed above)" build
	# The README and CONTRIBUTING link into docs/ from outside the site.
	local f ref broken=0
	for f in README.md CONTRIBUTING.md; do
		while IFS= read -r ref; do
			ref=${ref%%#*}
			if [ -n "$ref" ] && [ ! -e "$ROOT/$ref" ]; then
				echo "$f: $ref: no such file" >&2
				broken=1
			fi
		done < <(grep -o '](\([^)]*\))' "$ROOT/$f" | sed 's/^](//; s/)$//' | grep -v '^[a-z]*:' || true)
	done
	[ "$broken" -eq 0 ] || fail "broken links in README.md or CONTRIBUTING.md (listed above)" build
	step "site written to $DOCS_OUT ($(find "$DOCS_OUT" -name '*.html' | wc -l) pages)"
}

case "${1:-build}" in
install) install_mkdocs ;;
build) install_mkdocs && build ;;
serve) install_mkdocs && cd "$ROOT" && exec mkdocs serve --strict ;;
*)
	echo "usage: hack/docs.sh [build|install|serve]" >&2
	exit 2
	;;
esac
