#!/usr/bin/env python3
"""Check that every relative link in the repository's Markdown resolves.

The docs are split over the README, docs/ and each component's README, and
link into each other and into the code; a page or heading that moves
breaks links silently. For every Markdown file git knows (tracked, or new
and not ignored) this checks each inline link and image, `[text](target)`,
outside code: the target file or directory must exist inside the
repository and, for `page.md#anchor`, the page must have a heading with
that anchor (GitHub's rule: lower case, punctuation dropped, spaces to
hyphens, repeats numbered). External links (http:, https:, mailto:) are not
fetched.

    python3 ci/check_links.py              # checks itself on a made-up tree, then the repository
    python3 ci/check_links.py FILE.md ...  # only these files

Exits 1 naming file, line and target of every broken link.
"""

import os
import re
import subprocess
import sys
import tempfile
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) or ![alt](target); the target may be <...> or carry a "title".
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+\"[^\"]*\")?\s*\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN" or cat == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def prose_lines(path, blank_code=True):
    """(line number, text) of the lines outside fenced code; code spans blanked."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                line = line.rstrip("\n")
                yield n, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line) if blank_code else line


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        for _, line in prose_lines(path, blank_code=False):
            found.update(HTML_ANCHOR.findall(line))
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check_file(path, root):
    """Broken links of one Markdown file: (line, target, why)."""
    broken = []
    for n, line in prose_lines(path):
        for m in LINK.finditer(line):
            target = m.group(1).strip("<>")
            if not target or EXTERNAL.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if os.path.relpath(dest, root).startswith(".."):
                broken.append((n, target, "points outside the repository"))
            elif not os.path.exists(dest):
                broken.append((n, target, "no such file or directory"))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append((n, target, f"no heading with anchor #{anchor} in {os.path.relpath(dest, root)}"))
    return broken


def markdown_files(root):
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
                         cwd=root, check=True, capture_output=True, text=True).stdout
    return sorted(os.path.join(root, p) for p in set(out.split("\0")) if p and os.path.exists(os.path.join(root, p)))


def check(files, root):
    """Print every broken link; return (links checked, broken count)."""
    total = bad = 0
    for path in files:
        for n, line in prose_lines(path):
            total += sum(1 for m in LINK.finditer(line) if not EXTERNAL.match(m.group(1).strip("<>")))
        for n, target, why in check_file(path, root):
            bad += 1
            print(f"{os.path.relpath(path, root)}:{n}: broken link {target}: {why}")
    return total, bad


def self_test():
    """The checker finds exactly the broken links of a small made-up tree."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs"))
        with open(os.path.join(d, "code.rs"), "w") as f:
            f.write("fn main() {}\n")
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("# Top\n\n## T+5: a job (`sim t5`)\n\n## Twice\n\n## Twice\n\n"
                    "[ok](docs/page.md) [ok](docs/page.md#a-section) [ok](#t5-a-job-sim-t5) [ok](#twice-1)\n"
                    "[ok](code.rs) ![ok](docs) [ok](https://example.invalid/x) `[code](missing-in-span.md)`\n"
                    "[bad](docs/missing.md)\n[bad](docs/page.md#no-such-section)\n[bad](#twice-2)\n"
                    "```\n[code](missing-in-fence.md)\n```\n")
        with open(os.path.join(d, "docs", "page.md"), "w") as f:
            f.write("# Page\n\n## A section\n\n[ok](../README.md#top) [bad](../../outside.md)\n")
        files = [os.path.join(d, "README.md"), os.path.join(d, "docs", "page.md")]
        found = sorted((os.path.relpath(p, d), n, t) for p in files for n, t, _ in check_file(p, d))
        want = [("README.md", 11, "docs/missing.md"), ("README.md", 12, "docs/page.md#no-such-section"),
                ("README.md", 13, "#twice-2"), (os.path.join("docs", "page.md"), 5, "../../outside.md")]
        if found != want:
            print(f"check_links self-test FAILED: found {found}, expected {want}")
            return False
    return True


def main(argv):
    if not self_test():
        return 1
    files = [os.path.abspath(a) for a in argv] if argv else markdown_files(ROOT)
    total, bad = check(files, ROOT)
    if total == 0:
        print("check_links: no relative links found; is this the repository?")
        return 1
    print(f"check_links: {total} relative links in {len(files)} Markdown files, {bad} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
