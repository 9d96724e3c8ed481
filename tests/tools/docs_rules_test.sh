#!/usr/bin/env bash
# The rules the documentation keeps (docs/README.md): README.md and every page under docs/
# are at most 300 lines, name no numbered rounds of work ("session 4", "round 12": a page
# says what is true now, dated by date and commit), and their relative links point at
# files, and headings, that exist. First on a made-up tree that breaks each rule, which
# must fail naming each break; then on the repository's own pages, which must pass.
# Usage: docs_rules_test.sh SOURCE_DIR
set -uo pipefail
src=$1
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# Prints one line per broken rule and exits 1 if there is any; exits 0 when all hold.
check_docs() {
  python3 - "$1" <<'PY'
import re, sys
from pathlib import Path

root = Path(sys.argv[1])
MAX_LINES = 300
ROUNDS = re.compile(r"\b(?:[Ss]ession|[Rr]ound)[ -]?[0-9]+")
LINK = re.compile(r"\]\(([^)\s]+)\)")

def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    seen, out = {}, set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out

pages = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
problems = []
for page in pages:
    if not page.exists():
        continue
    name = page.relative_to(root)
    lines = page.read_text(encoding="utf-8").splitlines()
    if len(lines) > MAX_LINES:
        problems.append(f"{name}: {len(lines)} lines, more than {MAX_LINES}: split it by topic")
    for number, line in enumerate(lines, 1):
        for match in ROUNDS.finditer(line):
            problems.append(f"{name}:{number}: names a round of work, \"{match.group(0)}\": "
                            "say what is true now, dated by date and commit")
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            if not linked.exists():
                problems.append(f"{name}:{number}: links to {file_part}, which does not exist")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(f"{name}:{number}: links to #{anchor}, no such heading in "
                                f"{linked.relative_to(root)}")
for p in problems:
    print(p)
print(f"{len(pages)} pages checked, {len(problems)} problems")
sys.exit(1 if problems else 0)
PY
}

# A tree that breaks every rule once.
mkdir -p "$tmp/bad/docs"
printf '# Title\n\nSee [the test bed](docs/page.md#how-it-works).\n' >"$tmp/bad/README.md"
{
  echo "# Page"
  echo "## How it works"
  echo "In session 12 we found it; round 3 fixed it."
  echo "[gone](missing.md) and [here](#no-such-heading) and [web](https://example.com/x)."
  for _ in $(seq 300); do echo "filler"; done
} >"$tmp/bad/docs/page.md"
expect bad-length 1 "docs/page.md: 304 lines, more than 300" -- check_docs "$tmp/bad"
expect bad-session 1 "docs/page.md:3: names a round of work, \"session 12\"" -- check_docs "$tmp/bad"
expect bad-round 1 "docs/page.md:3: names a round of work, \"round 3\"" -- check_docs "$tmp/bad"
expect bad-link 1 "docs/page.md:4: links to missing.md, which does not exist" -- check_docs "$tmp/bad"
expect bad-anchor 1 "docs/page.md:4: links to #no-such-heading" -- check_docs "$tmp/bad"
expect bad-count 1 "2 pages checked, 5 problems" -- check_docs "$tmp/bad"

# A tree that keeps them: the good anchor from README.md resolves, the web link is skipped.
mkdir -p "$tmp/good/docs"
cp "$tmp/bad/README.md" "$tmp/good/README.md"
printf '# Page\n## How it works\nThe sessions of the test bed; --rounds 5.\n' >"$tmp/good/docs/page.md"
expect good-tree 0 "2 pages checked, 0 problems" -- check_docs "$tmp/good"

# The repository's own pages.
expect repository 0 "0 problems" -- check_docs "$src"

exit $((failures > 0))
