// The HTML report's behaviour: expanding scenarios, filtering the table, listing the scenarios
// that took an edge, drawing one scenario's path on the graphs (moved beside its row), zoom and
// pan, and deep links (#scenario=ID, #invariant=ID, #edge=A--B). Everything it shows comes
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
  let focused = null;

  const detailOf = (row) => {
    const button = row.querySelector('button.expand');
    return button ? document.getElementById(button.getAttribute('aria-controls')) : null;
  };
  const rowNamed = (name) => rows.find((row) => row.dataset.name === name);

  // Zoom: "fit" follows the width; a number scales the picture's own size.
  function zoom(figure, how) {
    const svg = figure.querySelector('svg');
    const natural = Number(svg.getAttribute('width'));
    const current = figure.dataset.zoom === undefined || figure.dataset.zoom === 'fit'
      ? svg.getBoundingClientRect().width / natural : Number(figure.dataset.zoom);
    let next;
    if (how === 'fit') next = 'fit';
    else if (how === 'one') next = 1;
    else next = Math.min(4, Math.max(0.2, current * (how === 'in' ? 1.25 : 0.8)));
    figure.dataset.zoom = String(next);
    svg.style.width = next === 'fit' ? '' : `${natural * next}px`;
    figure.classList.toggle('zoomed', next !== 'fit');
  }
  for (const figure of graphs) {
    for (const button of all('button[data-zoom]', figure)) {
      button.addEventListener('click', () => zoom(figure, button.dataset.zoom));
    }
    const viewport = figure.querySelector('.viewport');
    viewport.addEventListener('wheel', (event) => {
      if (!event.ctrlKey) return;
      event.preventDefault();
      zoom(figure, event.deltaY < 0 ? 'in' : 'out');
    }, { passive: false });
    viewport.addEventListener('keydown', (event) => {
      if (event.target !== viewport) return;
      if (event.key === '+' || event.key === '=') zoom(figure, 'in');
      else if (event.key === '-') zoom(figure, 'out');
      else if (event.key === '0') zoom(figure, 'fit');
    });
    // Drag to pan a zoomed picture.
    let drag = null;
    viewport.addEventListener('pointerdown', (event) => {
      if (!figure.classList.contains('zoomed') || event.target.closest('.edge')) return;
      drag = { x: event.clientX, y: event.clientY, left: viewport.scrollLeft, top: viewport.scrollTop };
    });
    viewport.addEventListener('pointermove', (event) => {
      if (!drag) return;
      viewport.scrollLeft = drag.left - (event.clientX - drag.x);
      viewport.scrollTop = drag.top - (event.clientY - drag.y);
    });
    for (const end of ['pointerup', 'pointerleave']) viewport.addEventListener(end, () => { drag = null; });
    figure.querySelector('button.unfocus').addEventListener('click', unfocus);
  }

  // The steps of a path that are not one edge: `from>to:r` (refused) or `from>to:i` (implied).
  const lineSteps = (value) => words(value).map((w) => {
    const [fromTo, kind] = w.split(':');
    const [from, to] = fromTo.split('>');
    return { from, to, kind };
  });

  // One scenario's path on the graphs, each moved beside its row.
  function focusOn(row) {
    focused = row;
    const detail = detailOf(row);
    const place = detail ? detail.querySelector('.beside') : null;
    for (const figure of graphs) {
      const graph = figure.dataset.graph;
      const taken = new Set(words(graph === 'pipeline' ? row.dataset.edges : row.dataset.codeModeEdges));
      const lines = lineSteps(graph === 'pipeline' ? row.dataset.steps : row.dataset.codeModeSteps);
      const faults = detail ? all(`[data-step-graph="${graph}"]`, detail) : [];
      const nodes = new Set();
      for (const edge of all('.edge', figure)) {
        const on = taken.has(edge.dataset.edge);
        edge.classList.toggle('on-path', on);
        if (on) {
          nodes.add(edge.dataset.from);
          nodes.add(edge.dataset.to);
        }
      }
      for (const line of all('.step-line', figure)) {
        const on = lines.some((s) => s.from === line.dataset.from && s.to === line.dataset.to);
        line.classList.toggle('on-path', on);
        if (on) {
          nodes.add(line.dataset.from);
          nodes.add(line.dataset.to);
        }
      }
      const faultNodes = new Set(faults.map((f) => f.dataset.stepTo));
      for (const node of all('.node', figure)) {
        node.classList.toggle('on-path', nodes.has(node.dataset.node));
        node.classList.toggle('fault', faultNodes.has(node.dataset.node));
      }
      const on = taken.size > 0 || lines.length > 0;
      figure.classList.toggle('focused', on);
      figure.querySelector('.caption').textContent = on
        ? `${figure.dataset.title}: the path of ${row.dataset.name}`
        : figure.dataset.caption;
      figure.querySelector('button.unfocus').hidden = false;
      const home = document.getElementById(`home-${graph}`);
      if (place && on) {
        place.append(figure);
        // Beside the row the picture keeps its own size (readable labels), scrolled to where
        // the scenario went wrong, else to where its path starts.
        zoom(figure, 'one');
        // Without a fault, where the path starts: its topmost stage.
        const start = all('.node.on-path', figure)
          .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)[0];
        const spot = ['.step-line.on-path.refused', '.node.fault']
          .map((selector) => figure.querySelector(selector)).find((el) => el) || start;
        if (spot) {
          const viewport = figure.querySelector('.viewport');
          const [box, view] = [spot.getBoundingClientRect(), viewport.getBoundingClientRect()];
          viewport.scrollLeft += box.left + box.width / 2 - (view.left + view.width / 2);
          viewport.scrollTop += box.top + box.height / 2 - (view.top + view.height / 2);
        }
        const moved = home.querySelector('.moved');
        moved.hidden = false;
        const link = moved.querySelector('a');
        link.href = `#scenario=${row.dataset.name}`;
        link.textContent = row.dataset.name;
      } else if (figure.parentElement !== home) {
        home.append(figure);
        zoom(figure, 'fit');
      }
    }
  }

  function unfocus() {
    focused = null;
    for (const figure of graphs) {
      figure.classList.remove('focused');
      figure.querySelector('.caption').textContent = figure.dataset.caption;
      figure.querySelector('button.unfocus').hidden = true;
      const home = document.getElementById(`home-${figure.dataset.graph}`);
      home.querySelector('.moved').hidden = true;
      if (figure.parentElement !== home) {
        home.append(figure);
        zoom(figure, 'fit');
      }
    }
  }

  function toggle(row, open) {
    const button = row.querySelector('button.expand');
    const detail = detailOf(row);
    if (!button || !detail) return;
    const expand = open === undefined ? button.getAttribute('aria-expanded') !== 'true' : open;
    button.setAttribute('aria-expanded', String(expand));
    detail.hidden = !expand;
    if (expand) {
      // One scenario at a time beside the graphs.
      for (const other of rows) if (other !== row && other.querySelector('button.expand[aria-expanded="true"]')) toggle(other, false);
      focusOn(row);
    } else if (focused === row) unfocus();
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

  // An edge lists the scenarios (or traces) that took it, in a box beside the edge, inside the
  // window: at the point clicked, or the edge's middle for a key or a deep link.
  const [one, many] = [panel.dataset.one || 'scenario', panel.dataset.many || 'scenarios'];
  function placePanel(x, y) {
    const margin = 8;
    const [width, height] = [document.documentElement.clientWidth, window.innerHeight];
    panel.style.left = '0px';
    panel.style.top = '0px';
    const box = panel.getBoundingClientRect();
    let left = x + 16;
    if (left + box.width > width - margin) left = x - 16 - box.width;
    left = Math.max(margin, Math.min(left, width - margin - box.width));
    const top = Math.max(margin, Math.min(y - box.height / 2, height - margin - box.height));
    panel.style.left = `${left + window.scrollX}px`;
    panel.style.top = `${top + window.scrollY}px`;
  }
  function selectEdge(edge, at) {
    const figure = edge.closest('figure.graph');
    const attribute = figure.dataset.graph === 'pipeline' ? 'edges' : 'codeModeEdges';
    const takers = rows.filter((row) => words(row.dataset[attribute]).includes(edge.dataset.edge));
    for (const other of all('.edge.selected')) other.classList.remove('selected');
    edge.classList.add('selected');
    panel.querySelector('h3').textContent = `${figure.dataset.title}: ${edge.dataset.label}`;
    const state = edge.getAttribute('aria-label') || '';
    panel.querySelector('p').textContent = takers.length === 0
      ? state.slice(state.indexOf(': ') + 2) + '.'
      : `Taken by ${takers.length} ${takers.length === 1 ? one : many}:`;
    const list = panel.querySelector('ul');
    list.replaceChildren(...takers.map((row) => {
      const item = document.createElement('li');
      const link = document.createElement('a');
      link.href = `#scenario=${encodeURIComponent(row.dataset.name)}`;
      link.textContent = row.dataset.name;
      link.className = row.dataset.status;
      item.append(link);
      return item;
    }));
    panel.hidden = false;
    let point = at;
    if (!point) {
      const box = (edge.querySelector('path:not(.hit)') || edge).getBoundingClientRect();
      point = { x: box.left + box.width / 2, y: box.top + box.height / 2 };
    }
    placePanel(point.x, point.y);
  }
  function closePanel() {
    panel.hidden = true;
    for (const other of all('.edge.selected')) other.classList.remove('selected');
  }
  for (const edge of all('.graph .edge')) {
    edge.addEventListener('click', (event) => selectEdge(edge, { x: event.clientX, y: event.clientY }));
    edge.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        selectEdge(edge);
      }
    });
  }
  panel.querySelector('button.close').addEventListener('click', closePanel);
  // Escape closes what is open, and the deep link that opened it goes from the address.
  const forgetHash = () => {
    if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  };
  document.addEventListener('keydown', (event) => {
    if (event.key !== 'Escape') return;
    if (!panel.hidden) closePanel();
    else if (focused) {
      const row = focused;
      const button = row.querySelector('button.expand');
      if (button) toggle(row, false);
      else unfocus();
      row.classList.remove('selected-row');
      (button || row).focus({ preventScroll: true });
    } else return;
    forgetHash();
  });

  // Deep links: #scenario=ID, #invariant=ID, #edge=FROM--TO.
  function fromHash() {
    let hash;
    try {
      hash = decodeURIComponent(location.hash.slice(1));
    } catch {
      return; // not a link this page wrote
    }
    const [kind, ...rest] = hash.split('=');
    const value = rest.join('=');
    if (kind === 'scenario') {
      const row = rowNamed(value);
      if (!row) return;
      if (row.hidden) {
        for (const select of filters) select.value = '';
        applyFilters();
      }
      for (const other of all('tr.scenario.selected-row')) other.classList.remove('selected-row');
      row.classList.add('selected-row');
      if (row.querySelector('button.expand')) toggle(row, true);
      else focusOn(row);
      row.scrollIntoView({ block: 'start' });
      if (!panel.hidden) closePanel();
      (row.querySelector('button.expand') || row).focus({ preventScroll: true });
    } else if (kind === 'invariant') {
      for (const el of all('.selected-invariant')) el.classList.remove('selected-invariant');
      const failure = document.getElementById(`failure-${value}`);
      const entry = document.getElementById(`inv-${value}`);
      const target = failure || entry;
      if (!target) return;
      if (failure) failure.classList.add('selected-invariant');
      if (entry) entry.classList.add('selected-invariant');
      target.scrollIntoView({ block: 'start' });
    } else if (kind === 'edge') {
      const [from, to] = value.split('--');
      if (!from || !to) return;
      const edge = document.querySelector(`.graph .edge[data-from="${CSS.escape(from)}"][data-to="${CSS.escape(to)}"]`);
      if (!edge) return;
      edge.scrollIntoView({ block: 'center' });
      edge.focus({ preventScroll: true });
      selectEdge(edge);
    }
  }
  window.addEventListener('hashchange', fromHash);

  applyFilters();
  fromHash();
})();
