#!/usr/bin/env bash
# Runs the unit, conformance and end-to-end test projects on other Node majors (default: 22 and
# 24), each Node taken from its registry package (`node-<platform>-<arch>@<major>` ships the
# binary), cached under ${XDG_CACHE_HOME:-~/.cache}/payhook/. Expects a built checkout (pnpm test
# or pnpm build ran first). Usage: scripts/test-on-node.sh [major ...]
set -euo pipefail
cd "$(dirname "$0")/.."

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(22 24)
target="$(node -p 'process.platform + "-" + process.arch')"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/payhook"
mkdir -p "$cache"

for major in "${majors[@]}"; do
  dir="$cache/node-$target-$major"
  if [ ! -x "$dir/bin/node" ]; then
    echo "test-on-node: fetching node-$target@$major"
    tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack --silent "node-$target@$major" >/dev/null && tar -xzf ./*.tgz)
    rm -rf "$dir"
    mv "$tmp/package" "$dir"
    rm -rf "$tmp"
  fi
  echo "test-on-node: Node $("$dir/bin/node" --version)"
  # The packing test installs tarballs with npm: once, on the main Node, is enough. So are the Bun,
  # Deno and Workers runs (test/runtimes): their receivers run on Bun, Deno and workerd whatever
  # Node starts them (Miniflare only drives workerd). The Hono and Next.js apps run on Node, so
  # they run on each Node.
  PATH="$dir/bin:$PATH" pnpm exec vitest run \
    --project core --project express --project koa --project fastify --project web --project e2e \
    --exclude 'test/packaging/**' --exclude 'test/runtimes/bun.test.ts' --exclude 'test/runtimes/deno.test.ts' \
    --exclude 'test/runtimes/workerd.test.ts' --exclude 'test/runtimes/worker-store.test.ts'
done
