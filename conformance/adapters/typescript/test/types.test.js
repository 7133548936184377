// index.d.ts is hand-written: every runtime export must be declared there, and nothing declared
// as a value may be missing at run time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as kit from 'tep-adapter';

const declarations = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8');
const declaredValues = new Set(
  [...declarations.matchAll(/^export (?:declare )?(?:function|class|const) (\w+)/gm)].map((m) => m[1]),
);

test('index.d.ts declares every runtime export', () => {
  const undeclared = Object.keys(kit).filter((name) => !declaredValues.has(name));
  assert.deepEqual(undeclared, []);
});

test('every value index.d.ts declares exists at run time', () => {
  const missing = [...declaredValues].filter((name) => !(name in kit));
  assert.deepEqual(missing, []);
});

test('package.json points its types and exports at them', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  assert.equal(pkg.type, 'module');
  assert.equal(pkg.types, './index.d.ts');
  assert.deepEqual(pkg.exports['.'], { types: './index.d.ts', default: './src/index.js' });
  assert.deepEqual(pkg.dependencies ?? {}, {}, 'no runtime dependencies');
  // What `npm pack` ships (scripts/pack-smoke.sh installs it): the sources, the types, the README.
  assert.deepEqual(pkg.files, ['src/', 'index.d.ts', 'README.md']);
});
