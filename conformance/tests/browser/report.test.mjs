// The HTML report in a real browser: Debian's Chromium, headless, driven by playwright-core
// (which never downloads a browser here: it is pointed at the system one). Not part of
// `cargo test`; `.ci/run` runs it with `npm test` in this directory.
//
// Environment: TEP_BIN (the tep binary; default target/debug/tep), CHROMIUM (the browser;
// default the `chromium` on PATH). Output: target/browser/ (the reports, their traces, and
// screenshots to look at: report.png, report-graph.png, report-dark.png, hostile.png).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const tep = process.env.TEP_BIN || join(root, 'target/debug/tep');
const out = join(root, 'target/browser');
const MUTANT = 'run-body-after-deny';
const FAILING = 'pre-deny-skips-body';
const PWNED = 'pwned';
const HOSTILE = `</script><script>document.title='${PWNED}'</script><img src=x onerror="document.title='${PWNED}'">`;

function chromiumPath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  return execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
}

/** Runs tep; it must end with `code`. */
function runTep(args, code, input) {
  const done = spawnSync(tep, args, { cwd: out, encoding: 'utf8', input });
  assert.equal(done.status, code, `tep ${args.join(' ')}: exit ${done.status}\n${done.stderr}`);
  return done;
}

let browser;

before(async () => {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true });
});

after(async () => {
  await browser?.close();
});

/** A page that records every console error, uncaught exception, dialog and request off disk. */
async function open(file, options = {}) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 }, ...options });
  const problems = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    dialog.dismiss();
  });
  page.on('request', (request) => {
    if (!request.url().startsWith('file:') && !request.url().startsWith('data:')) {
      problems.push(`network: ${request.url()}`);
    }
  });
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  return { page, problems };
}

test('the report of a run with a mutant, opened from disk', async () => {
  const report = join(out, 'report.html');
  runTep(['run', '--mutant', MUTANT, '--html', report, '--run-dir', join(out, 'traces')], 1);
  const { page, problems } = await open(report);

  assert.match(await page.title(), /not conformant/);
  // The summary counts what the run counted.
  const failed = await page.locator('tr.scenario.failed').count();
  assert.ok(failed > 0, 'the mutant fails scenarios');
  assert.equal(await page.locator('.counts .failed b').textContent(), String(failed));

  // A click on the failing scenario's row (not on its button) expands it to its trace, the
  // witness lines highlighted, each violation linked to its invariant's section.
  const row = page.locator(`tr.scenario[data-name="${FAILING}"]`);
  const detail = page.locator(`#${await row.getAttribute('id')}`.replace('#s-', '#d-'));
  assert.equal(await detail.isVisible(), false);
  await row.locator('td.why').click();
  assert.equal(await detail.isVisible(), true);
  assert.equal(await row.getByRole('button', { name: FAILING, exact: true }).getAttribute('aria-expanded'), 'true');
  const witnesses = detail.locator('ol.trace li.witness');
  assert.ok((await witnesses.count()) >= 2, 'the witness lines are marked');
  await witnesses.first().scrollIntoViewIfNeeded();
  assert.equal(await witnesses.first().isVisible(), true);
  assert.match(await detail.locator('ol.trace li.witness', { hasText: '"node":"around"' }).textContent(), /"call":"c1"/);
  const background = await witnesses.first().evaluate((li) => getComputedStyle(li).backgroundColor);
  assert.notEqual(background, 'rgba(0, 0, 0, 0)', 'a witness line is highlighted');
  const link = detail.locator('li.violation a', { hasText: 'deny-skips-body' });
  assert.match(await link.getAttribute('href'), /docs\/invariants\.md#deny-skips-body$/);

  // Expanding it drew its path: its failing step's nodes stand out on the stage graph.
  const stage = page.locator('figure#graph-pipeline');
  assert.match(await stage.getAttribute('class'), /focused/);
  assert.match(await stage.locator('g.node[data-node="around"]').getAttribute('class'), /failing/);
  assert.equal(await stage.locator('g.refused-step[data-from="denied"][data-to="around"]').count(), 1);
  await stage.screenshot({ path: join(out, 'report-graph.png') });
  await row.scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(out, 'report.png') });

  // The keyboard reaches an edge; Enter lists the scenarios that took it.
  const edge = stage.locator('g.edge[data-from="pre"][data-to="denied"]');
  await edge.focus();
  await page.keyboard.press('Enter');
  const panel = page.locator('#edge-panel');
  assert.equal(await panel.isVisible(), true);
  assert.match(await panel.locator('h3').textContent(), /pre -->\|deny\| denied/);
  const takers = await panel.locator('li a').allTextContents();
  assert.ok(takers.includes(FAILING), takers.join(', '));
  assert.equal(takers.length, Number(await edge.getAttribute('data-count')));
  // Space works as well, on another edge.
  await stage.locator('g.edge[data-from="model"]').focus();
  await page.keyboard.press(' ');
  assert.match(await panel.locator('h3').textContent(), /model --> toolCall/);

  // The filters: by status, by invariant, by capability.
  await page.selectOption('select[data-filter="status"]', 'failed');
  assert.equal(await page.locator('tr.scenario:visible').count(), failed);
  assert.equal(await page.locator('#shown').textContent(), `${failed} of ${await page.locator('tr.scenario').count()} scenarios shown`);
  await page.selectOption('select[data-filter="status"]', '');
  await page.selectOption('select[data-filter="capabilities"]', 'code-mode');
  const codeMode = await page.locator('tr.scenario:visible').allTextContents();
  assert.ok(codeMode.length > 0 && codeMode.every((text) => text.includes('code-mode')), codeMode.join('\n'));
  await page.selectOption('select[data-filter="capabilities"]', '');
  await page.selectOption('select[data-filter="invariants"]', 'deny-skips-body');
  assert.ok(await row.isVisible());

  assert.deepEqual(problems, []);
  await page.close();
});

test('the dark colour scheme', async () => {
  const { page, problems } = await open(join(out, 'report.html'), { colorScheme: 'dark' });
  const [r, g, b] = (await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).match(/\d+/g).map(Number);
  assert.ok(r + g + b < 120, `a dark background, not rgb(${r}, ${g}, ${b})`);
  // The docs' white picture background follows the scheme.
  const picture = await page.locator('figure#graph-pipeline svg > rect').first().evaluate((rect) => getComputedStyle(rect).fill);
  assert.notEqual(picture, 'rgb(255, 255, 255)');
  await page.locator('tr.scenario.failed td.why').first().click();
  await page.screenshot({ path: join(out, 'report-dark.png') });
  assert.deepEqual(problems, []);
  await page.close();
});

test('markup in a trace is text: a hostile trace checked with tep check --html', async () => {
  // A failing trace of the run above, its denial reason replaced with markup, under a file name
  // that is markup too.
  const kept = readFileSync(join(out, 'traces', `${FAILING}.jsonl`), 'utf8');
  const hostile = kept
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const record = JSON.parse(line);
      if (record.reason !== undefined) record.reason = HOSTILE;
      return JSON.stringify(record);
    })
    .join('\n');
  assert.ok(hostile.includes('</script>'));
  const name = 'trace <img src=x onerror=alert(1)>.jsonl';
  writeFileSync(join(out, name), `${hostile}\n`);
  const report = join(out, 'hostile.html');
  runTep(['check', name, '--html', report], 1);
  const { page, problems } = await open(report);

  assert.doesNotMatch(await page.title(), new RegExp(PWNED));
  assert.equal(await page.locator('img').count(), 0);
  assert.equal(await page.locator('script').count(), 1);
  await page.locator('tr.scenario.failed td.why').click();
  const witness = page.locator('ol.trace li.witness', { hasText: '"node":"pre"' });
  assert.match(await witness.textContent(), /<\/script><script>document\.title='pwned'<\/script><img src=x onerror/);
  assert.match(await page.locator('h1').textContent(), /trace <img src=x onerror=alert\(1\)>\.jsonl/);
  await page.waitForTimeout(200);
  assert.doesNotMatch(await page.title(), new RegExp(PWNED));
  await witness.scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(out, 'hostile.png') });
  assert.deepEqual(problems, []);
  await page.close();
});
