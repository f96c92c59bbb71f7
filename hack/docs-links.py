#!/usr/bin/env python3
"""Checks every link inside a built MkDocs site: each relative href or src
must name a file of the site, and each #fragment an id on the page it names.

MkDocs 1.4 checks links to Markdown files but neither anchors nor links
written as paths or URLs, so a renamed heading or a moved page would
otherwise leave dead links behind. Usage: docs-links.py SITE_DIR
"""

import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.refs = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) is not None:
                self.refs.append((tag, a[key], self.getpos()[0]))


def main(site):
    pages = {}
    for d, _, files in os.walk(site):
        for f in files:
            if f.endswith(".html"):
                path = os.path.join(d, f)
                p = Page()
                with open(path, encoding="utf-8") as fh:
                    p.feed(fh.read())
                pages[os.path.normpath(path)] = p

    broken = []
    for path, page in sorted(pages.items()):
        rel = os.path.relpath(path, site)
        for tag, ref, line in page.refs:
            u = urlsplit(ref)
            if u.scheme or u.netloc or ref.startswith("//"):
                continue  # another site: not ours to check
            if rel == "404.html":
                continue  # MkDocs writes the 404 page's links from the server's root
            if u.path.startswith("/"):
                broken.append(f"{rel}:{line}: {ref}: a link from the server's root breaks when the site is not served at /")
                continue
            target = path if u.path == "" else os.path.normpath(os.path.join(os.path.dirname(path), unquote(u.path)))
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                broken.append(f"{rel}:{line}: {ref}: no such file in the site")
                continue
            frag = unquote(u.fragment)
            if frag and target in pages and frag not in pages[target].ids:
                broken.append(f"{rel}:{line}: {ref}: {os.path.relpath(target, site)} has no anchor #{frag}")
    for b in broken:
        print(b, file=sys.stderr)
    if broken:
        print(f"{len(broken)} broken links", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: docs-links.py SITE_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
