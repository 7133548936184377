#!/usr/bin/env bash
# The packages as an implementer installs them (issue 30): the wheel and the npm tarball that
# `cargo xtask dist` put in target/dist/, each installed outside this checkout with no Rust
# toolchain on PATH, and each kit's example run through the installed `tep`:
#   - a fresh virtualenv: `pip install tep_conformance-*.whl`, then `tep --version`, the kit
#     imports from the virtualenv, and `tep run --adapter "python3 …/example/adapter.py" --strict`
#     passes with only the example copied in;
#   - a fresh `npm init` project: conformance/adapters/typescript/scripts/pack-smoke.sh with that
#     tarball, and the wheel's `tep` as TEP_BIN.
# Usage: .ci/dist-smoke.sh [DIST_DIR]   (default target/dist). Needs Python 3 (venv) and Node.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
dist="$(cd "${1:-$repo/target/dist}" && pwd)"
fail() { echo "dist-smoke: FAILED: $*" >&2; exit 1; }
step() { printf '\n==> dist-smoke: %s\n' "$*"; }
one() {
  local matches=("$dist"/$1)
  [ "${#matches[@]}" -eq 1 ] && [ -f "${matches[0]}" ] || fail "expected one $1 in $dist (run cargo xtask dist)"
  echo "${matches[0]}"
}
wheel="$(one 'tep_conformance-*.whl')"
tarball="$(one 'tep-adapter-*.tgz')"

work="$(mktemp -d "${TMPDIR:-/tmp}/tep-dist-smoke.XXXXXX")"
trap 'rm -rf "$work"' EXIT

step "a fresh virtualenv, and a PATH with no Rust toolchain"
# The real interpreter (not a pyenv shim, which is a script that needs its own PATH).
python="$(python3 -c 'import sys; print(sys.executable)')"
"$python" -m venv "$work/venv"
clean=""
for dir in "$work/venv/bin" "$(dirname "$(command -v node)")" "$(dirname "$(command -v npm)")" /usr/bin /bin; do
  if [ -e "$dir/cargo" ] || [ -e "$dir/rustc" ]; then continue; fi
  case ":$clean:" in *":$dir:"*) ;; *) clean="${clean:+$clean:}$dir" ;; esac
done
export PATH="$clean"
unset TEP_BIN CARGO CARGO_HOME RUSTUP_HOME
if command -v cargo || command -v rustc; then fail "a Rust toolchain is still on PATH ($PATH)"; fi
echo "PATH=$PATH"

step "pip install $(basename "$wheel")"
python3 -m pip install --quiet --no-index --disable-pip-version-check "$wheel"
[ "$(command -v tep)" = "$work/venv/bin/tep" ] || fail "tep is not the virtualenv's: $(command -v tep || echo none)"
tep --version
(cd "$work" && python3 -c '
import sys, tep_adapter
assert tep_adapter.__file__.startswith(sys.prefix), tep_adapter.__file__
print("tep_adapter from", tep_adapter.__file__)')

step "the Python kit's example through the installed tep, with only the example copied in"
cp -R "$repo/conformance/adapters/python/example" "$work/example"
find "$work/example" -name __pycache__ -prune -exec rm -rf {} +
(cd "$work" && tep run --adapter "python3 $work/example/adapter.py" --strict --run-dir "$work/runs")

step "the TypeScript kit's tarball in a fresh npm project, through the same tep"
TEP_BIN="$work/venv/bin/tep" TEP_TARBALL="$tarball" bash "$repo/conformance/adapters/typescript/scripts/pack-smoke.sh"

step "passed"
