#!/usr/bin/env bash
# The kit as an implementer installs it: `npm pack`, then `npm install` of the tarball into a
# fresh `npm init -y` project in a temp dir that has no path into this checkout, the example
# pipeline and its adapter copied in (importing the kit by its package name), and:
#   - the tarball holds the kit and its types (and not its tests);
#   - the installed package imports, and TypeScript resolves its types (when a tsc is at hand);
#   - `tep run --adapter "node adapter.mjs" --strict` passes there;
#   - the kit's local runner finds tep through $TEP_BIN and on PATH.
# Needs $TEP_BIN (or `tep` on PATH) and Node >= 20 with npm; no network (the kit has no runtime
# dependencies). Usage: TEP_BIN=path/to/tep conformance/adapters/typescript/scripts/pack-smoke.sh
# With TEP_TARBALL=path/to/tep-adapter-*.tgz (what `cargo xtask dist` builds) that tarball is
# checked instead of a fresh `npm pack` (.ci/dist-smoke.sh does so).
set -euo pipefail

kit="$(cd "$(dirname "$0")/.." && pwd)"
tep="${TEP_BIN:-$(command -v tep || true)}"
if [ -z "$tep" ] || [ ! -x "$tep" ]; then
  echo "pack-smoke: no tep binary: set TEP_BIN=path/to/tep or put tep on PATH" >&2
  exit 2
fi
tep="$(cd "$(dirname "$tep")" && pwd)/$(basename "$tep")"

work="$(mktemp -d "${TMPDIR:-/tmp}/tep-pack-smoke.XXXXXX")"
trap 'rm -rf "$work"' EXIT
step() { printf '\n==> pack-smoke: %s\n' "$*"; }
fail() { echo "pack-smoke: FAILED: $*" >&2; exit 1; }

if [ -n "${TEP_TARBALL:-}" ]; then
  step "the tarball $TEP_TARBALL"
  tarball="$(cd "$(dirname "$TEP_TARBALL")" && pwd)/$(basename "$TEP_TARBALL")"
else
  step "npm pack"
  tarball="$(cd "$kit" && npm pack --silent --pack-destination "$work" | tail -n 1)"
  tarball="$work/$tarball"
fi
[ -f "$tarball" ] || fail "npm pack made no tarball"
listing="$(tar -tzf "$tarball")"
for file in package/package.json package/index.d.ts package/README.md package/src/index.js package/src/recorder.js; do
  grep -qx "$file" <<<"$listing" || fail "the tarball has no $file"
done
if grep -E '^package/(test|fixtures|example|node_modules)/' <<<"$listing"; then fail "the tarball ships files an install does not need"; fi
echo "$(wc -l <<<"$listing") files in $(basename "$tarball")"

step "a fresh project, the tarball installed"
project="$work/project"
mkdir "$project"
cd "$project"
npm init -y >/dev/null
npm install --no-audit --no-fund --offline --loglevel=error "$tarball"
[ -f node_modules/tep-adapter/index.d.ts ] || fail "the installed package has no index.d.ts"
[ ! -L node_modules/tep-adapter ] || fail "the package is a link, not an install"

step "the example pipeline and its adapter, importing the kit by name"
cp "$kit/example/adapter.mjs" adapter.mjs
cp -R "$kit/example/pipeline" pipeline
# The example imports the kit by name already; an adapter written against a path into the
# checkout (`../src/index.js`) is rewritten to the package name.
sed -i.bak -e "s#from '\(\.\./\)*src/index\.js'#from 'tep-adapter'#" adapter.mjs && rm adapter.mjs.bak
grep -q "from 'tep-adapter'" adapter.mjs || fail "adapter.mjs does not import tep-adapter"
if grep -rnE "from '\.\./|$kit" adapter.mjs pipeline; then fail "the copied adapter still reaches into the checkout"; fi

step "the package imports, with its types"
node --input-type=module -e "
  import { serve, Recorder, Scripts, findTep } from 'tep-adapter';
  for (const [name, value] of Object.entries({ serve, Recorder, Scripts, findTep })) {
    if (typeof value !== 'function') throw new Error(name + ' is not exported');
  }"
tsc="${TSC:-$kit/node_modules/.bin/tsc}"
if [ -x "$tsc" ]; then
  cat > consumer.ts <<'TS'
import { type Adapter, runScenario } from 'tep-adapter';
const adapter: Adapter = { implementation: { name: 'typed' }, async run(_s, { recorder }) { recorder.onModel([]); } };
export const answer = runScenario(adapter, { id: 'x', tools: [], calls: [] });
TS
  "$tsc" --noEmit --strict --skipLibCheck --target es2022 --module nodenext --moduleResolution nodenext consumer.ts \
    || fail "TypeScript does not resolve the installed package's types"
  echo "tsc resolved tep-adapter's types"
else
  echo "no tsc at $tsc (npm ci in the kit, or TSC=path): the types were not compiled against"
fi

step "tep run --adapter \"node adapter.mjs\" --strict, in the fresh project"
"$tep" run --adapter "node adapter.mjs" --strict --run-dir "$work/runs"

step "the local runner finds tep through TEP_BIN, and on PATH"
TEP_BIN="$tep" node adapter.mjs --scenario pre-deny-skips-body >"$work/local.out" \
  || fail "node adapter.mjs --scenario with TEP_BIN: $(tail -n 5 "$work/local.out")"
grep -q '^0 violation(s)' "$work/local.out" || fail "no tep check verdict with TEP_BIN"
mkdir "$work/bin"
ln -s "$tep" "$work/bin/tep"
env -u TEP_BIN PATH="$work/bin:$PATH" node adapter.mjs --scenario pre-deny-skips-body >"$work/local.out" \
  || fail "node adapter.mjs --scenario with tep on PATH: $(tail -n 5 "$work/local.out")"
grep -q '^0 violation(s)' "$work/local.out" || fail "no tep check verdict with tep on PATH"

step "passed"
