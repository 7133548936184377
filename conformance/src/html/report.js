// The HTML report's behaviour: expanding scenarios, filtering the table, listing the scenarios
// that took an edge, and drawing one scenario's path on the graphs. Everything it shows comes
// from the page itself (data attributes and text), and it writes text only through textContent.
(() => {
  'use strict';
  const all = (selector, root = document) => Array.from(root.querySelectorAll(selector));
  const words = (value) => (value || '').split(' ').filter((w) => w !== '');
  const rows = all('tr.scenario');
  const graphs = all('figure.graph');
  const filters = all('select[data-filter]');
  const shown = document.getElementById('shown');
  const panel = document.getElementById('edge-panel');
  const focusNote = document.getElementById('focus-note');
  let focused = null;

  const detailOf = (row) => {
    const button = row.querySelector('button.expand');
    return button ? document.getElementById(button.getAttribute('aria-controls')) : null;
  };

  // One scenario's path on the graphs: its edges, and the nodes and edges of its failing steps.
  function focusOn(row) {
    focused = row;
    const detail = detailOf(row);
    const steps = detail ? all('[data-step-graph]', detail) : [];
    for (const figure of graphs) {
      const graph = figure.dataset.graph;
      const taken = new Set(words(graph === 'pipeline' ? row.dataset.edges : row.dataset.codeModeEdges));
      const mine = steps.filter((s) => s.dataset.stepGraph === graph);
      const nodes = new Set();
      for (const edge of all('.edge', figure)) {
        const on = taken.has(edge.dataset.edge);
        edge.classList.toggle('on-path', on);
        if (on) {
          nodes.add(edge.dataset.from);
          nodes.add(edge.dataset.to);
        }
      }
      for (const step of mine) {
        nodes.add(step.dataset.stepFrom);
        nodes.add(step.dataset.stepTo);
      }
      for (const node of all('.node', figure)) node.classList.toggle('on-path', nodes.has(node.dataset.node));
      for (const refused of all('.refused-step', figure)) {
        const hit = mine.some((s) => s.dataset.stepFrom === refused.dataset.from && s.dataset.stepTo === refused.dataset.to);
        refused.classList.toggle('on-path', hit);
      }
      figure.classList.toggle('focused', taken.size > 0 || mine.length > 0);
    }
    focusNote.querySelector('.name').textContent = row.dataset.name;
    focusNote.hidden = false;
  }

  function unfocus() {
    focused = null;
    for (const figure of graphs) figure.classList.remove('focused');
    focusNote.hidden = true;
  }

  function toggle(row, open) {
    const button = row.querySelector('button.expand');
    const detail = detailOf(row);
    if (!button || !detail) return;
    const expand = open === undefined ? button.getAttribute('aria-expanded') !== 'true' : open;
    button.setAttribute('aria-expanded', String(expand));
    detail.hidden = !expand;
    if (expand) focusOn(row);
    else if (focused === row) unfocus();
  }

  for (const row of rows) {
    const button = row.querySelector('button.expand');
    if (!button) continue;
    button.addEventListener('click', (event) => {
      event.stopPropagation();
      toggle(row);
    });
    // A click anywhere on the row expands it too (but not on its links).
    row.addEventListener('click', (event) => {
      if (event.target.closest('a, button')) return;
      toggle(row);
    });
  }
  focusNote.querySelector('button').addEventListener('click', unfocus);

  function applyFilters() {
    let count = 0;
    for (const row of rows) {
      const visible = filters.every((select) => {
        const wanted = select.value;
        return wanted === '' || words(row.dataset[select.dataset.filter]).includes(wanted);
      });
      row.hidden = !visible;
      const detail = detailOf(row);
      if (detail) {
        const button = row.querySelector('button.expand');
        detail.hidden = !visible || button.getAttribute('aria-expanded') !== 'true';
      }
      if (visible) count += 1;
    }
    shown.textContent = `${count} of ${rows.length} scenarios shown`;
  }
  for (const select of filters) select.addEventListener('change', applyFilters);

  // An edge lists the scenarios that took it.
  function selectEdge(edge) {
    const figure = edge.closest('figure.graph');
    const attribute = figure.dataset.graph === 'pipeline' ? 'edges' : 'codeModeEdges';
    const takers = rows.filter((row) => words(row.dataset[attribute]).includes(edge.dataset.edge));
    for (const other of all('.edge.selected')) other.classList.remove('selected');
    edge.classList.add('selected');
    panel.querySelector('h3').textContent = `${figure.dataset.title}: ${edge.dataset.label}`;
    panel.querySelector('p').textContent =
      takers.length === 1 ? 'Taken by 1 scenario:' : `Taken by ${takers.length} scenarios${takers.length ? ':' : '.'}`;
    const list = panel.querySelector('ul');
    list.replaceChildren(...takers.map((row) => {
      const item = document.createElement('li');
      const link = document.createElement('a');
      link.href = `#${row.id}`;
      link.textContent = row.dataset.name;
      link.className = row.dataset.status;
      item.append(link);
      return item;
    }));
    panel.hidden = false;
  }
  for (const edge of all('.graph .edge')) {
    edge.addEventListener('click', () => selectEdge(edge));
    edge.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        selectEdge(edge);
      }
    });
  }
  panel.querySelector('button.close').addEventListener('click', () => {
    panel.hidden = true;
    for (const other of all('.edge.selected')) other.classList.remove('selected');
  });

  applyFilters();
})();
