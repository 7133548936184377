// The HTML report in a real browser: Debian's Chromium, headless, driven by playwright-core
// (which never downloads a browser here: it is pointed at the system one). Not part of
// `cargo test`; `.ci/run` runs it with `npm test` in this directory.
//
// Environment: TEP_BIN (the tep binary; default target/debug/tep), CHROMIUM (the browser;
// default the `chromium` on PATH). Output: target/browser/ (the reports, their traces, and
// screenshots to look at: results-1440.png, phone-390.png, phone-390-expanded.png,
// report.png, report-graph.png, deep-link-*.png, report-dark.png, hostile.png, matrix.png,
// matrix-phone.png, matrix-cell.png).

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
  browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
});

/** A page that records every console error, uncaught exception, dialog and request off disk. */
async function open(file, options = {}) {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1000 }, ...options });
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
  await page.goto(pathToFileURL(file).href + (options.hash || ''), { waitUntil: 'load' });
  return { page, problems };
}

/** The failing scenarios of a JSON run report, by id. */
function failingIds(json) {
  return JSON.parse(readFileSync(json, 'utf8')).scenarios.filter((s) => s.status === 'failed').map((s) => s.id).sort();
}

test('the report of a run with a mutant, opened from disk', async () => {
  const report = join(out, 'report.html');
  runTep(['run', '--mutant', MUTANT, '--html', report, '--json', join(out, 'mutant.json'), '--run-dir', join(out, 'traces')], 1);
  const { page, problems } = await open(report);

  assert.match(await page.title(), /not conformant/);
  // Results first: the first failing invariant's id is in the first screen at 1440x1000.
  const firstInvariant = page.locator('ol.failures li.failure .inv').first();
  assert.equal(await firstInvariant.textContent(), 'deny-skips-body');
  const { y } = await firstInvariant.boundingBox();
  assert.ok(y < 1000, `the first failing invariant is at y = ${y}`);
  await page.screenshot({ path: join(out, 'results-1440.png') });
  // A graph's node labels are readable before any zoom.
  const label = await page.locator('figure#graph-pipeline g.node[data-node="pre"] text').first().boundingBox();
  assert.ok(label.height >= 12, `a node label is ${label.height}px high`);
  // The graphs are on rows of their own, each at the page's width.
  const [stageBox, codeBox] = [await page.locator('#graph-pipeline').boundingBox(), await page.locator('#graph-code-mode').boundingBox()];
  assert.ok(codeBox.y >= stageBox.y + stageBox.height, 'the Code Mode graph is below the stage graph');
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
  assert.equal(await link.getAttribute('href'), '#invariant=deny-skips-body');

  // Expanding it drew its path, the stage graph moved beside its row, the caption naming it.
  const stage = page.locator('figure#graph-pipeline');
  assert.match(await stage.getAttribute('class'), /focused/);
  assert.equal(await detail.locator('figure#graph-pipeline').count(), 1, 'the graph is beside the row');
  assert.match(await stage.locator('figcaption .caption').textContent(), new RegExp(`the path of ${FAILING}`));
  assert.match(await stage.locator('g.node[data-node="around"]').getAttribute('class'), /failing/);
  assert.equal(await stage.locator('g.step-line.refused.on-path[data-from="denied"][data-to="around"]').count(), 1);
  // The detour the trace took: around --> toolBody --> around --> post, not denied --> post;
  // post --> final through the stages the level implies, drawn as such.
  for (const [from, to] of [['around', 'toolBody'], ['toolBody', 'around'], ['around', 'post']]) {
    assert.match(await stage.locator(`g.edge[data-from="${from}"][data-to="${to}"]`).first().getAttribute('class'), /on-path/, `${from} --> ${to}`);
  }
  assert.doesNotMatch(await stage.locator('g.edge[data-from="denied"][data-to="post"]').getAttribute('class'), /on-path/);
  assert.equal(await stage.locator('g.step-line.implied.on-path[data-from="post"][data-to="final"]').count(), 1);
  // The expected-outcome failure is on its call, not a graph fault: only the refused step's
  // two boxes are red, and its violation names no step.
  const expectation = detail.locator('li.violation.expectation', { hasText: 'expected-outcome' });
  assert.equal(await expectation.count(), 1);
  assert.equal(await expectation.getAttribute('data-step-graph'), null);
  assert.match(await expectation.locator('.where').textContent(), /call c1/);
  const red = await page.locator('figure.graph g.node.failing, figure.graph g.node.violated, figure.graph g.edge.failing').evaluateAll((els) => els.map((e) => e.dataset.node || e.dataset.edge).sort());
  assert.deepEqual(red, ['around', 'denied']);
  // Beside the row the picture is at its own size: its labels stay readable, and the refused
  // step is scrolled into the graph's view.
  const besideLabel = await stage.locator('g.node[data-node="denied"] text').first().boundingBox();
  assert.ok(besideLabel.height >= 12, `a node label beside the row is ${besideLabel.height}px high`);
  const [refusedBox, viewportBox] = [await stage.locator('g.step-line.refused.on-path').boundingBox(), await stage.locator('.viewport').boundingBox()];
  assert.ok(refusedBox.x >= viewportBox.x && refusedBox.x + refusedBox.width <= viewportBox.x + viewportBox.width, 'the refused step is in the graph\'s view');
  assert.ok(refusedBox.y >= viewportBox.y && refusedBox.y + refusedBox.height <= viewportBox.y + viewportBox.height, 'the refused step is in the graph\'s view');
  // Side by side on a wide screen: the graph and the row's violations are both in view.
  await detail.locator('ol.violations').scrollIntoViewIfNeeded();
  const [graphBox, violationsBox] = [await stage.boundingBox(), await detail.locator('ol.violations').boundingBox()];
  assert.ok(graphBox.x + graphBox.width <= violationsBox.x + 1, 'the graph is left of the violations');
  await stage.screenshot({ path: join(out, 'report-graph.png') });
  await page.screenshot({ path: join(out, 'report.png') });

  // Zoom: + enlarges the picture; fit gives it back the width.
  const before = (await stage.locator('svg').boundingBox()).width;
  await stage.locator('button[data-zoom="in"]').click();
  assert.ok((await stage.locator('svg').boundingBox()).width > before * 1.2);
  await stage.locator('button[data-zoom="fit"]').click();

  // Escape closes the scenario and gives the graph back to its section.
  await page.keyboard.press('Escape');
  assert.equal(await detail.isVisible(), false);
  assert.equal(await page.locator('#home-pipeline figure#graph-pipeline').count(), 1);

  // The keyboard reaches an edge; Enter lists the scenarios that took it.
  const edge = stage.locator('g.edge[data-from="pre"][data-to="denied"]');
  await edge.focus();
  await page.keyboard.press('Enter');
  const panel = page.locator('#edge-panel');
  assert.equal(await panel.isVisible(), true);
  assert.match(await panel.locator('h3').textContent(), /pre -->\|deny\| denied/);
  assert.match(await edge.getAttribute('class'), /selected/, 'the chosen edge is marked');
  const takers = await panel.locator('li a').allTextContents();
  assert.ok(takers.includes(FAILING), takers.join(', '));
  assert.equal(takers.length, Number(await edge.getAttribute('data-count')));
  // Space works as well, on another edge.
  await stage.locator('g.edge[data-from="model"]').focus();
  await page.keyboard.press(' ');
  assert.match(await panel.locator('h3').textContent(), /model --> toolCall/);
  // Escape closes the panel and unmarks the edge.
  await page.keyboard.press('Escape');
  assert.equal(await panel.isVisible(), false);
  assert.equal(await page.locator('.edge.selected').count(), 0);

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

/** The edge coverage a page shows: the results block's, and each figure's. */
async function pageCoverage(page) {
  const results = await page.locator('.coverage > div').first().locator('b').textContent();
  const figure = page.locator('figure#graph-pipeline');
  return {
    results,
    figure: `${await figure.getAttribute('data-taken')} of ${await figure.getAttribute('data-total')}`,
    caption: (await figure.locator('figcaption .caption').textContent()).match(/(\d+ of \d+) edges taken/)[1],
    // The edges drawn as taken, implied or not.
    drawn: await figure.locator('g.edge:not(.untaken):not(.unseen)').count(),
  };
}

test('one edge coverage: the page, the JSON and the terminal agree for a failing mutant', async () => {
  const json = JSON.parse(readFileSync(join(out, 'mutant.json'), 'utf8'));
  const { taken, total, edges } = json.coverage.edges;
  // The mutant runs the bodies of denied calls: their detour never counts as `denied --> post`.
  assert.equal(edges.find((e) => e.from === 'denied' && e.to === 'post').scenarios, 0);
  const { page, problems } = await open(join(out, 'report.html'));
  const shown = await pageCoverage(page);
  assert.deepEqual(shown, { results: `${taken} of ${total}`, figure: `${taken} of ${total}`, caption: `${taken} of ${total}`, drawn: taken });
  assert.match(await page.locator('figure#graph-pipeline g.edge[data-from="denied"][data-to="post"]').getAttribute('class'), /untaken/);
  const text = runTep(['run', '--mutant', MUTANT], 1).stdout;
  assert.match(text, new RegExp(`edge coverage: ${taken}/${total} edges`));
  assert.deepEqual(problems, []);
  await page.close();
});

test('one edge coverage for a session log: what level events cannot see is drawn apart', async () => {
  const log = join(root, 'cli/tests/data/deepseek-harness/rc8-session.jsonl');
  const report = join(out, 'session.html');
  const text = runTep(['check', '--from', 'deepseek-harness', log, '--html', report], 0).stdout;
  const { page, problems } = await open(report);
  const shown = await pageCoverage(page);
  const [taken, total] = shown.results.split(' of ').map(Number);
  assert.deepEqual(shown, { results: `${taken} of ${total}`, figure: `${taken} of ${total}`, caption: `${taken} of ${total}`, drawn: taken });
  // (`tep check` prints no coverage: the page's number is the only one.)
  assert.match(text, /0 violation\(s\)/);
  const seen = (await page.locator('.coverage .seen').first().textContent()).match(/(\d+) not seen at this level/);
  const figure = page.locator('figure#graph-pipeline');
  // An edge the level cannot see is drawn as such, with its own legend, never as untaken.
  const unseen = figure.locator('g.edge.unseen');
  assert.equal(await unseen.count(), Number(seen[1]));
  assert.ok(Number(seen[1]) > 0);
  assert.match(await unseen.first().locator('title').textContent(), /not seen at level events/);
  assert.equal(await figure.locator('g.edge.untaken').count(), total - taken - Number(seen[1]));
  assert.equal(await page.locator('#graphs .legend .swatch.unseen').count(), 1);
  // A log has traces, not scenarios.
  const words = await page.locator('#graphs .legend, #graphs g.edge title').allTextContents();
  assert.ok(words.every((w) => !/scenario/.test(w)), words.filter((w) => /scenario/.test(w)).join('\n'));
  const takenEdge = figure.locator('g.edge:not(.untaken):not(.unseen)').first();
  await takenEdge.focus();
  await page.keyboard.press('Enter');
  assert.match(await page.locator('#edge-panel p').textContent(), /^Taken by 1 trace:/);
  await page.screenshot({ path: join(out, 'session-graph.png') });
  assert.deepEqual(problems, []);
  await page.close();
});

/** Whether the box of `locator` lies inside the window. */
async function inView(page, locator) {
  const box = await locator.boundingBox();
  const { width, height } = page.viewportSize();
  return box && box.y >= 0 && box.x >= 0 && box.y + box.height <= height && box.x + box.width <= width;
}

test('an edge\'s list opens in view: after a click and after #edge=', async () => {
  const report = join(out, 'report.html');
  for (const viewport of [{ width: 1440, height: 1000 }, { width: 390, height: 844 }]) {
    const { page, problems } = await open(report, { viewport });
    const edge = page.locator('figure#graph-pipeline g.edge[data-from="guards"][data-to="denied"]');
    await edge.scrollIntoViewIfNeeded();
    // A click on the middle of the edge's line, where a person would click.
    const { x, y } = await edge.locator('path.hit').evaluate((path) => {
      const point = path.getPointAtLength(path.getTotalLength() / 2).matrixTransform(path.getScreenCTM());
      return { x: point.x, y: point.y };
    });
    await page.mouse.click(x, y);
    const panel = page.locator('#edge-panel');
    assert.equal(await panel.isVisible(), true);
    assert.ok(await inView(page, panel), `the list is in view after a click (${JSON.stringify(await panel.boundingBox())})`);
    await page.screenshot({ path: join(out, `edge-click-${viewport.width}.png`) });
    assert.deepEqual(problems, []);
    await page.close();
  }
  const { edges } = JSON.parse(readFileSync(join(out, 'mutant.json'), 'utf8')).coverage.edges;
  const [first, last] = [edges[0], edges[edges.length - 1]].map((e) => `#edge=${e.from}--${e.to}`);
  for (const hash of ['#edge=toolBody--around', '#edge=guards--denied', first, last]) {
    const { page, problems } = await open(report, { hash });
    const panel = page.locator('#edge-panel');
    assert.equal(await panel.isVisible(), true, hash);
    assert.ok(await inView(page, panel), `the list is in view after ${hash} (${JSON.stringify(await panel.boundingBox())})`);
    assert.deepEqual(problems, []);
    await page.close();
  }
});

test('a passing scenario can be selected: its path is drawn beside its row', async () => {
  const report = join(out, 'report.html');
  const PASSING = 'allow-runs-body';
  for (const how of ['click', 'link']) {
    const { page, problems } = await open(report, how === 'link' ? { hash: `#scenario=${PASSING}` } : {});
    const row = page.locator(`tr.scenario[data-name="${PASSING}"]`);
    assert.match(await row.getAttribute('class'), /passed/);
    if (how === 'click') await row.locator('td.why').click();
    const detail = page.locator(`#${(await row.getAttribute('id')).replace('s-', 'd-')}`);
    assert.equal(await detail.isVisible(), true, how);
    const figure = detail.locator('figure#graph-pipeline');
    assert.equal(await figure.count(), 1, `${how}: the graph is beside the row`);
    assert.match(await figure.locator('figcaption .caption').textContent(), new RegExp(`the path of ${PASSING}`));
    assert.ok((await figure.locator('g.edge.on-path').count()) > 3);
    // Beside its row: the row and its graph both in the first screen.
    await row.scrollIntoViewIfNeeded();
    const [rowBox, figureBox] = [await row.boundingBox(), await figure.boundingBox()];
    assert.ok(figureBox.y >= rowBox.y && figureBox.y - rowBox.y < 200, `${how}: the graph is ${figureBox.y - rowBox.y}px below its row`);
    await page.screenshot({ path: join(out, `passing-${how}.png`) });
    // Escape closes it, with no script error.
    await page.keyboard.press('Escape');
    assert.equal(await detail.isVisible(), false);
    assert.deepEqual(problems, []);
    await page.close();
  }
});

test('no deep link form raises a script error, then Escape', async () => {
  const report = join(out, 'report.html');
  const hashes = ['#scenario=allow-runs-body', `#scenario=${FAILING}`, '#scenario=no-such-scenario', '#scenario=',
    '#invariant=deny-skips-body', '#invariant=tool-call-once', '#invariant=nope', '#edge=toolBody--around',
    '#edge=guards--denied', '#edge=nope--nope', '#edge=toolBody', '#edge=', '#s-0', '#t-1-1', '#results', '#%E0%A4%A',
    '#scenario=tools-result-is-awaited-in-rev1', '#='];
  const { page, problems } = await open(report);
  for (const hash of hashes) {
    await page.evaluate((h) => { location.hash = h; }, hash);
    await page.waitForTimeout(50);
    await page.keyboard.press('Escape');
    await page.keyboard.press('Escape');
  }
  for (const hash of hashes) {
    const opened = await open(report, { hash });
    await opened.page.keyboard.press('Escape');
    await opened.page.keyboard.press('Escape');
    await opened.page.waitForTimeout(50);
    assert.deepEqual(opened.problems, [], hash);
    await opened.page.close();
  }
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

test('a phone: no horizontal overflow, the table reflows', async () => {
  const { page, problems } = await open(join(out, 'report.html'), { viewport: { width: 390, height: 844 } });
  const width = () => page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok((await width()) <= 390, `the page is ${await width()}px wide`);
  await page.screenshot({ path: join(out, 'phone-390.png') });
  // With a failing scenario open, its graph above its violations.
  const row = page.locator(`tr.scenario[data-name="${FAILING}"]`);
  await row.locator('button.expand').click();
  assert.ok((await width()) <= 390, `the page is ${await width()}px wide with a scenario open`);
  const graph = await page.locator('figure#graph-pipeline').boundingBox();
  const violations = await page.locator('tr.detail:visible ol.violations').boundingBox();
  assert.ok(graph.y + graph.height <= violations.y + 1, 'the graph is above the violations');
  await row.scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(out, 'phone-390-expanded.png') });
  assert.deepEqual(problems, []);
  await page.close();
});

test('deep links select what they name', async () => {
  const report = join(out, 'report.html');
  {
    const { page, problems } = await open(report, { hash: `#scenario=${FAILING}` });
    const row = page.locator(`tr.scenario[data-name="${FAILING}"]`);
    assert.equal(await row.locator('button.expand').getAttribute('aria-expanded'), 'true');
    assert.match(await page.locator('figure#graph-pipeline figcaption .caption').textContent(), new RegExp(FAILING));
    const top = (await row.boundingBox()).y;
    assert.ok(top >= 0 && top < 1000, `the row is in view (y = ${top})`);
    await page.screenshot({ path: join(out, 'deep-link-scenario.png') });
    assert.deepEqual(problems, []);
    await page.close();
  }
  {
    const { page, problems } = await open(report, { hash: '#invariant=deny-skips-body' });
    const failure = page.locator('#failure-deny-skips-body');
    assert.match(await failure.getAttribute('class'), /selected-invariant/);
    assert.match(await page.locator('#inv-deny-skips-body').getAttribute('class'), /selected-invariant/);
    // The invariant is embedded: its statement, level and sources, no file beside the page.
    assert.match(await page.locator('#inv-deny-skips-body').textContent(), /MUST.*Sources: /s);
    const top = (await failure.boundingBox()).y;
    assert.ok(top >= 0 && top < 1000, `the invariant is in view (y = ${top})`);
    // An invariant with no failure goes to its embedded entry.
    await page.evaluate(() => { location.hash = 'invariant=tool-call-once'; });
    await page.waitForFunction(() => document.getElementById('inv-tool-call-once')?.classList.contains('selected-invariant'));
    assert.deepEqual(problems, []);
    await page.close();
  }
  {
    const { page, problems } = await open(report, { hash: '#edge=toolBody--around' });
    const panel = page.locator('#edge-panel');
    assert.equal(await panel.isVisible(), true);
    assert.match(await panel.locator('h3').textContent(), /toolBody --> around/);
    const edge = page.locator('figure#graph-pipeline g.edge[data-from="toolBody"][data-to="around"]');
    assert.match(await edge.getAttribute('class'), /selected/);
    // The count on the edge and the scenarios listed agree (the detours taken included).
    assert.equal(await panel.locator('li a').count(), Number(await edge.getAttribute('data-count')));
    await page.screenshot({ path: join(out, 'deep-link-edge.png') });
    // The panel's scenario links are deep links too.
    const first = panel.locator('li a').first();
    const name = await first.textContent();
    await first.click();
    await page.waitForFunction((id) => document.querySelector('tr.scenario.selected-row')?.dataset.name === id, name);
    assert.match(await page.locator('figure#graph-pipeline figcaption .caption').textContent(), new RegExp(`the path of ${name}`));
    assert.deepEqual(problems, []);
    await page.close();
  }
});

test('tep report: the reference, a mutant and the Python kit side by side', async () => {
  const reference = join(out, 'reference.json');
  const python = join(out, 'python.json');
  const mutant = join(out, 'mutant.json');
  runTep(['run', '--json', reference], 0);
  const adapter = `python3 ${join(root, 'conformance/adapters/python/example/adapter.py')}`;
  runTep(['run', '--adapter', adapter, '--json', python], 0);
  const matrix = join(out, 'matrix.html');
  runTep(['report', '--html', matrix, reference, mutant, python], 0);
  const { page, problems } = await open(matrix);
  assert.equal(await page.locator('th.run').count(), 3);
  // The mutant's failing cells are the ones its JSON report says.
  const failing = await page.locator('tbody.scenarios tr.row').evaluateAll((rows) => rows
    .filter((row) => row.querySelectorAll('td.cell')[1].dataset.status === 'failed')
    .map((row) => row.dataset.id).sort());
  assert.deepEqual(failing, failingIds(mutant));
  assert.ok(failing.length > 0);
  for (const column of [0, 2]) {
    const bad = await page.locator('tbody.scenarios tr.row').evaluateAll((rows, k) => rows
      .filter((row) => row.querySelectorAll('td.cell')[k].dataset.status === 'failed').length, column);
    assert.equal(bad, 0, `column ${column} has no failing cell`);
  }
  await page.screenshot({ path: join(out, 'matrix.png') });
  // Only where they differ: every row left differs, and the mutant's failures are among them.
  await page.locator('#only-differ').check();
  const visible = await page.locator('tr.row:visible').evaluateAll((rows) => rows.map((r) => [r.dataset.id, r.dataset.differ]));
  assert.ok(visible.length < await page.locator('tr.row').count());
  assert.ok(visible.every(([, differ]) => differ === 'true'));
  for (const id of failing) assert.ok(visible.some(([v]) => v === id), id);
  // A cell opens that run's scenario: its violation; Escape closes it.
  const cell = page.locator(`tbody.scenarios tr.row[data-id="${FAILING}"] td.cell`).nth(1).locator('a');
  await cell.click();
  const panel = page.locator('#cell-panel');
  assert.equal(await panel.isVisible(), true);
  assert.match(await panel.textContent(), /deny-skips-body/);
  await page.screenshot({ path: join(out, 'matrix-cell.png') });
  await page.keyboard.press('Escape');
  assert.equal(await panel.isVisible(), false);

  // A tool for many rows: the header row stays in view after scrolling 3,000 px, and so does
  // the scenario column; each column says its pass rate and the command its run was made with.
  const scroller = page.locator('.matrix-scroll');
  await page.locator('#only-differ').uncheck();
  const header = page.locator('table.matrix thead th.run').first();
  await scroller.hover();
  await page.mouse.wheel(0, 3000);
  await page.waitForFunction(() => document.querySelector('.matrix-scroll').scrollTop + window.scrollY >= 2000);
  const headerBox = await header.boundingBox();
  assert.ok(headerBox.y >= 0 && headerBox.y + headerBox.height <= 1000, `the header is in view after scrolling (y = ${headerBox.y})`);
  const below = await page.locator('tbody tr.row').evaluateAll((rows) => rows
    .find((r) => r.getBoundingClientRect().top > 300)?.dataset.id);
  assert.ok(below, 'rows below the header');
  await page.screenshot({ path: join(out, 'matrix-scrolled.png') });
  const rates = await page.locator('thead th.run .rate').evaluateAll((els) => els.map((e) => e.dataset.rate));
  for (const [k, file] of [reference, mutant, python].entries()) {
    const json = JSON.parse(readFileSync(file, 'utf8'));
    const c = json.summary;
    const ran = c.passed + c.warned + c.failed + c.errored + c.expectedFailures;
    assert.equal(Number(rates[k]), Math.round((c.passed * 1000) / ran) / 10, `column ${k}'s pass rate`);
    assert.match(json.command, /^\S*tep run/, 'the JSON report records the command');
    assert.equal(await page.locator(`thead th.run[data-run="${k}"] code.command`).textContent(), json.command);
  }
  // The command is quoted for a shell: the adapter's command is one word.
  assert.match(JSON.parse(readFileSync(python, 'utf8')).command, /--adapter 'python3 [^']*adapter\.py'/);
  // The filter by name.
  await page.locator('#by-name').fill('deny');
  const named = await page.locator('tbody.scenarios tr.row:visible').evaluateAll((rows) => rows.map((r) => r.dataset.id));
  assert.ok(named.length > 0 && named.every((id) => id.includes('deny')), named.join(', '));
  await page.locator('#by-name').fill('');
  assert.deepEqual(problems, []);
  await page.close();

  const phone = await open(matrix, { viewport: { width: 390, height: 844 } });
  const width = await phone.page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the matrix page is ${width}px wide`);
  await phone.page.screenshot({ path: join(out, 'matrix-phone.png') });
  assert.deepEqual(phone.problems, []);
  await phone.page.close();
});

test('--compare: what changed since an earlier run; bad reports are usage errors', async () => {
  const reference = join(out, 'reference.json');
  const page = join(out, 'compared.html');
  const done = runTep(['run', '--mutant', MUTANT, '--compare', reference, '--html', page], 1);
  const failing = failingIds(join(out, 'mutant.json'));
  assert.match(done.stdout, new RegExp(`${failing.length} newly failing, 0 fixed`));
  const opened = await open(page);
  const newly = await opened.page.locator('#comparison dd[data-change="newly-failing"] a').allTextContents();
  assert.deepEqual(newly.sort(), failing);
  assert.equal(await opened.page.locator('#comparison dd[data-change="still-failing"]').textContent(), 'none');
  // Against itself, every failure is still failing, and listed so.
  const again = runTep(['run', '--mutant', MUTANT, '--compare', join(out, 'mutant.json')], 1);
  assert.match(again.stdout, new RegExp(`0 newly failing, 0 fixed, 0 new scenario\\(s\\), 0 gone, ${failing.length} still failing\n`));
  assert.deepEqual(opened.problems, []);
  await opened.page.close();

  writeFileSync(join(out, 'not-a-report.json'), '{"hello": "world"}\n');
  const bad = spawnSync(tep, ['report', '--html', join(out, 'x.html'), reference, 'not-a-report.json'], { cwd: out, encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /not-a-report\.json is not a JSON run report/);
  const newer = JSON.parse(readFileSync(reference, 'utf8'));
  newer.version = '99.0.0';
  writeFileSync(join(out, 'newer.json'), JSON.stringify(newer));
  const refused = spawnSync(tep, ['run', '--compare', 'newer.json'], { cwd: out, encoding: 'utf8' });
  assert.equal(refused.status, 2);
  assert.match(refused.stderr, /newer\.json was written by tep 99\.0\.0/);
});
