#!/usr/bin/env bash
# Runs the receivers' test projects, the examples, and the Web handler on Hono and Next.js on other
# Node majors (default: 22 and 24), each Node taken from its registry package
# (`node-<platform>-<arch>@<major>` ships the binary), cached under ${XDG_CACHE_HOME:-~/.cache}/payhook/. Expects a built checkout (pnpm test
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
  # What a merchant runs on any Node: the receiver packages (core, the Express, Koa and Fastify
  # adapters, the Web handler) through their whole suites, the framework examples, and the Web
  # handler under Hono and Next.js, which run on this Node. On the main Node only: the sender's and
  # the CLI's own suites and end-to-end tests (services a team runs on one Node of its choosing,
  # whose Node-facing parts are undici, pg and PGlite), the type tests (types do not depend on the
  # Node that runs them), the packing test, and Bun, Deno and workerd (their receivers run on those
  # runtimes whatever Node starts them).
  PATH="$dir/bin:$PATH" pnpm exec vitest run \
    --project core --project express --project koa --project fastify --project web --project e2e \
    --exclude '**/*.test-d.ts' --exclude 'test/packaging/**' --exclude 'test/sender-*.test.ts' \
    --exclude 'test/cli-check.test.ts' --exclude 'test/readme-snippets.test.ts' \
    --exclude 'test/test-tags.test.ts' --exclude 'test/check-structure.test.ts' \
    --exclude 'test/runtimes/bun.test.ts' --exclude 'test/runtimes/deno.test.ts' \
    --exclude 'test/runtimes/shared-redis.test.ts' --exclude 'test/runtimes/workerd.test.ts' \
    --exclude 'test/runtimes/worker-store.test.ts'
done
