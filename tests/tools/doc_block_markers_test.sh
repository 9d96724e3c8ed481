#!/usr/bin/env bash
# The markers that say which command blocks of the pages docs.readme_blocks and
# docs.page_blocks run (doc_blocks_test.sh), checked without the test bed: made-up pages
# with each kind of broken marker must fail naming the page and line; a good one gives one
# script per `run` with its `continue` blocks appended and the build directory substituted;
# then the repository's own pages must parse, each README block among them.
# Usage: doc_block_markers_test.sh SOURCE_DIR
set -uo pipefail
src=$1
here=$(dirname "${BASH_SOURCE[0]}")
source "$here/../support/expect.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
list() { bash "$here/doc_blocks_test.sh" --list "$@"; }

mkdir -p "$tmp/pages/docs"
printf 'x\n<!-- docs-blocks: run -->\nText.\n```sh\ntrue\n```\n' >"$tmp/pages/not-before.md"
printf '<!-- docs-blocks: continue -->\n```sh\ntrue\n```\n' >"$tmp/pages/continue-first.md"
printf '<!-- docs-blocks: skip -->\n```sh\ntrue\n```\n' >"$tmp/pages/unknown.md"
printf '```sh\ntrue\n```\n<!-- docs-blocks: run -->\n' >"$tmp/pages/at-end.md"
printf '# None\n```sh\ntrue\n```\n' >"$tmp/pages/docs/unmarked.md"
expect not-before 1 "not-before.md:3: a docs-blocks marker must be right before" -- \
  list "$tmp/pages" "$tmp/build" not-before.md
expect continue-first 1 "continue-first.md:2: docs-blocks: continue with no marked block" -- \
  list "$tmp/pages" "$tmp/build" continue-first.md
expect unknown 1 "unknown.md:1: unknown marker" -- list "$tmp/pages" "$tmp/build" unknown.md
expect at-end 1 "at-end.md:4: a docs-blocks marker at the end" -- \
  list "$tmp/pages" "$tmp/build" at-end.md
expect none-marked 1 "no marked block in docs" -- list "$tmp/pages" "$tmp/build" docs

{
  printf '<!-- docs-blocks: run -->\n```sh\nexport PATH=$PWD/build/vmm:$PATH\n```\n'
  printf 'Unmarked:\n```sh\necho unmarked\n```\n'
  printf '<!-- docs-blocks: continue -->\n```sh\nbuild/vmm/dsec-vmm run &\n```\n'
  printf '<!-- docs-blocks: run -->\n```sh\nimages/build-rootfs --print\n```\n'
} >"$tmp/pages/good.md"
expect good-first 0 "== good.md:2 ($tmp/build/doc-blocks/good.md/1.sh)
export PATH=$tmp/build/vmm:\$PATH
$tmp/build/vmm/dsec-vmm run &
== good.md:14" -- list "$tmp/pages" "$tmp/build" good.md
expect good-second 0 "== good.md:14 ($tmp/build/doc-blocks/good.md/2.sh)
images/build-rootfs --print" -- list "$tmp/pages" "$tmp/build" good.md
expect good-unmarked 0 "" -- bash -c "! grep -r unmarked '$tmp/build/doc-blocks'"

# The repository's pages: the README's five blocks, and docs/'s parse.
expect readme 0 "== README.md:" -- list "$src" "$tmp/build" README.md
expect readme-count 0 "" -- test "$(ls "$tmp/build/doc-blocks/README.md" | wc -l)" = 5
expect docs 0 "== docs/" -- list "$src" "$tmp/build" docs

exit $((failures > 0))
