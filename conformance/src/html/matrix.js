// The page of `tep report`: the row filters, and a cell opening its run's scenario in a panel
// (Escape closes it). Everything it shows is in the page; it writes text only via the DOM.
(() => {
  'use strict';
  const all = (selector, root = document) => Array.from(root.querySelectorAll(selector));
  const rows = all('tr.row');
  const differ = document.getElementById('only-differ');
  const failing = document.getElementById('only-failing');
  const byName = document.getElementById('by-name');
  const shown = document.getElementById('shown');
  const panel = document.getElementById('cell-panel');
  const body = panel.querySelector('.body');
  let opener = null;

  function applyFilters() {
    let count = 0;
    const wanted = byName.value.trim().toLowerCase();
    for (const row of rows) {
      const visible = (!differ.checked || row.dataset.differ === 'true') && (!failing.checked || row.dataset.failing === 'true')
        && (wanted === '' || row.dataset.id.toLowerCase().includes(wanted));
      row.hidden = !visible;
      if (visible) count += 1;
    }
    shown.textContent = `${count} of ${rows.length} rows shown`;
  }
  differ.addEventListener('change', applyFilters);
  failing.addEventListener('change', applyFilters);
  byName.addEventListener('input', applyFilters);

  function openCell(id, link) {
    const detail = document.getElementById(id);
    if (!detail || !detail.classList.contains('cell-detail')) return false;
    for (const other of all('td.cell.selected')) other.classList.remove('selected');
    const cell = link || document.querySelector(`a[data-cell="${CSS.escape(id)}"]`);
    if (cell) cell.closest('td').classList.add('selected');
    opener = cell;
    body.replaceChildren(detail.cloneNode(true));
    body.firstElementChild.removeAttribute('id');
    panel.hidden = false;
    panel.focus();
    return true;
  }

  function closePanel() {
    panel.hidden = true;
    for (const other of all('td.cell.selected')) other.classList.remove('selected');
    if (opener) opener.focus();
  }

  for (const link of all('a[data-cell]')) {
    link.addEventListener('click', (event) => {
      event.preventDefault();
      history.replaceState(null, '', `#${link.dataset.cell}`);
      openCell(link.dataset.cell, link);
    });
  }
  panel.querySelector('button.close').addEventListener('click', closePanel);
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && !panel.hidden) closePanel();
  });

  function fromHash() {
    let hash;
    try {
      hash = decodeURIComponent(location.hash.slice(1));
    } catch {
      return; // not a link this page wrote
    }
    if (hash.startsWith('cell-')) openCell(hash);
  }
  window.addEventListener('hashchange', fromHash);
  applyFilters();
  fromHash();
})();
