// The review page: a list of clips by filter, the open clip, its fields saved on each change.
// Never builds markup from data: every value is set as text or as an attribute.
'use strict';

const $ = (id) => document.getElementById(id);
const TEXT = ['character', 'motion', 'adverb', 'background', 'time'];
const NUMBERS = ['social', 'entertainment', 'stamina', 'caption_level'];
const FIELDS = [...TEXT, ...NUMBERS];
const STATUS_NAMES = {needs_review: 'needs review', captioned: 'captioned', accepted: 'accepted', rejected: 'rejected'};

const page = {
  meta: null,        // /api/state
  filter: {status: '', character: '', level: ''},
  clips: [],         // the loaded rows, in order
  total: 0,
  current: -1,       // index into clips
  queue: Promise.resolve(),  // saves, one after another, in the order they were made
  keys: Promise.resolve(),   // shortcuts, one after another: a held "j" or a fast "a a a" loses no step
  loading: null,             // the page of rows being fetched, shared by whoever needs it
  openId: null,              // the clip shown
};

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

async function api(path, options = {}) {
  const res = await fetch(path, {credentials: 'same-origin', ...options});
  let body = null;
  try { body = await res.json(); } catch (e) { body = {message: res.statusText}; }
  if (!res.ok) throw Object.assign(new Error(body.message || res.statusText), {status: res.status, body});
  return body;
}

function saveState(text, bad = false) {
  const s = $('save-state');
  s.textContent = text;
  s.classList.toggle('bad', bad);
}

// --- the place in the list lives in the URL's hash, so a reload comes back to it

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  for (const k of Object.keys(page.filter)) page.filter[k] = h.get(k) || '';
  return h.get('clip') || '';
}

function writeHash() {
  const h = new URLSearchParams();
  for (const [k, v] of Object.entries(page.filter)) if (v) h.set(k, v);
  const clip = page.clips[page.current];
  if (clip) h.set('clip', clip.id);
  history.replaceState(null, '', '#' + h.toString());
}

// --- filters and counts

function renderFilters() {
  const cast = page.meta.cast;
  const ch = $('filter-character');
  ch.replaceChildren(el('option', {value: ''}, 'Any'),
    ...cast.map((m) => el('option', {value: m.id}, m.name)), el('option', {value: '-'}, 'None yet'));
  const lv = $('filter-level');
  lv.replaceChildren(el('option', {value: ''}, 'Any'), ...[1, 2, 3, 4, 5].map((n) => el('option', {value: String(n)}, String(n))));
  for (const r of document.querySelectorAll('input[name=status]')) r.checked = r.value === page.filter.status;
  ch.value = page.filter.character;
  lv.value = page.filter.level;
  renderCounts(page.meta.counts);
}

function renderCounts(counts) {
  page.meta.counts = counts;
  for (const c of document.querySelectorAll('[data-count]')) c.textContent = String(counts.status[c.dataset.count] ?? 0);
  for (const o of $('filter-character').options) {
    const key = o.value === '-' ? '' : o.value;
    const name = o.value === '' ? 'Any' : o.value === '-' ? 'None yet' : page.meta.cast.find((m) => m.id === o.value).name;
    o.textContent = o.value === '' ? name : `${name} (${counts.character[key] ?? 0})`;
  }
  for (const o of $('filter-level').options) {
    o.textContent = o.value === '' ? 'Any' : `${o.value} (${counts.level[o.value] ?? 0})`;
  }
}

function renderVocabulary() {
  const fill = (id, values) => $(id).replaceChildren(...values.map((v) => el('option', {value: v})));
  $('dl-character').replaceChildren(...page.meta.cast.map((m) => el('option', {value: m.id, label: m.name})));
  for (const f of ['motion', 'adverb', 'background', 'time']) {
    fill('dl-' + f, page.meta.vocabulary[f] || []);
    $('f-' + f).maxLength = page.meta.text_max[f];
  }
}

// --- the list

function query(offset) {
  const q = new URLSearchParams({offset: String(offset), limit: String(page.meta.page_size)});
  for (const [k, v] of Object.entries(page.filter)) if (v) q.set(k, v);
  return '/api/clips?' + q.toString();
}

function row(clip) {
  const thumb = clip.media.stills[0];
  const what = [clip.character, clip.motion].filter(Boolean).join(' · ') || 'no caption yet';
  const button = el('button', {type: 'button', class: 'clip-row', 'data-id': clip.id},
    thumb ? el('img', {src: thumb, alt: '', loading: 'lazy', width: '72', height: '48'}) : el('span'),
    el('span', {class: 'line'}, el('span', {class: 'id', text: clip.id}),
      el('span', {class: 'badge ' + clip.status, text: STATUS_NAMES[clip.status] || clip.status})),
    el('span', {class: 'line'}, el('span', {class: 'what', text: what}),
      el('span', {class: 'level', text: 'level ' + clip.motion_level})));
  button.addEventListener('click', () => select(page.clips.findIndex((c) => c.id === clip.id)));
  return el('li', {}, button);
}

function renderSummary() {
  const shown = page.clips.length;
  $('list-summary').textContent = page.total === shown ? `${page.total}` : `${shown} of ${page.total}`;
  $('more').hidden = shown >= page.total;
  $('more').textContent = `Show ${Math.min(page.meta.page_size, page.total - shown)} more`;
}

// wanted: the clip to open; deep: look for it past the first page (a link or a reload does; a
// new filter shows its first clip rather than fetching every page for the old one)
async function loadList(wanted = '', deep = false) {
  const body = await api(query(0));
  page.clips = body.clips;
  page.total = body.total;
  renderCounts(body.counts);
  $('clip-list').replaceChildren(...page.clips.map(row));
  renderSummary();
  let index = wanted ? page.clips.findIndex((c) => c.id === wanted) : -1;
  while (deep && wanted && index < 0 && page.clips.length < page.total) {  // the clip is further down: load on to it
    await loadMore();
    index = page.clips.findIndex((c) => c.id === wanted);
  }
  select(index >= 0 ? index : (page.clips.length ? 0 : -1));
}

function loadMore() {
  page.loading ||= (async () => {
    try {
      const body = await api(query(page.clips.length));
      page.total = body.total;
      const known = new Set(page.clips.map((c) => c.id));
      const fresh = body.clips.filter((c) => !known.has(c.id));
      page.clips.push(...fresh);
      $('clip-list').append(...fresh.map(row));
      renderSummary();
    } finally {
      page.loading = null;
    }
  })();
  return page.loading;
}

function updateRow(clip) {
  const i = page.clips.findIndex((c) => c.id === clip.id);
  if (i < 0) return;
  page.clips[i] = clip;
  const old = document.querySelector(`.clip-row[data-id="${CSS.escape(clip.id)}"]`);
  if (old) {
    const fresh = row(clip);
    old.parentElement.replaceWith(fresh);
    if (i === page.current) fresh.firstChild.setAttribute('aria-current', 'true');
  }
}

// --- the open clip

function select(index) {
  const before = page.openId;
  page.current = index;
  for (const b of document.querySelectorAll('.clip-row[aria-current]')) b.removeAttribute('aria-current');
  const clip = page.clips[index];
  $('empty').hidden = !!clip;
  $('clip-view').hidden = !clip;
  if (!clip) {
    page.openId = null;
    $('clip-title').textContent = 'Film review';
    writeHash();
    return;
  }
  const button = document.querySelector(`.clip-row[data-id="${CSS.escape(clip.id)}"]`);
  if (button) {
    button.setAttribute('aria-current', 'true');
    button.scrollIntoView({block: 'nearest'});
  }
  renderClip(clip, before !== clip.id);  // the same clip again (a new filter): keep its video and fields
  page.openId = clip.id;
  writeHash();
}

function renderClip(clip, fresh) {
  $('clip-title').textContent = 'Clip ' + clip.id;
  const status = $('clip-status');
  status.className = 'badge ' + clip.status;
  status.textContent = STATUS_NAMES[clip.status] || clip.status;
  $('clip-issue').textContent = clip.issue ? 'Needs review because: ' + clip.issue : '';
  if (fresh) {
    const video = $('clip-video');
    video.src = clip.media.clip;
    video.setAttribute('aria-label', 'Clip ' + clip.id);
    video.play().catch(() => {});
    $('stills').replaceChildren(...clip.media.stills.map((src, i) =>
      el('li', {}, el('img', {src, alt: `Frame ${i + 1} of ${clip.media.stills.length}`, width: '112', height: '75'}))));
    clearErrors();
  }
  $('clip-source').textContent = `${clip.source}, ${clip.start_s.toFixed(2)}–${clip.end_s.toFixed(2)} s (shot ${clip.shot})`;
  $('motion-flow').textContent = `${clip.motion_flow.toFixed(2)} px/frame`;
  $('motion-level').textContent = `${clip.motion_level} of 5`;
  $('caption-level-shown').textContent = clip.caption_level == null ? 'none' : `${clip.caption_level} of 5`;
  const member = page.meta.cast.find((m) => m.id === clip.character);
  const img = $('reference-img');
  $('reference').hidden = !member || !member.reference;
  if (member && member.reference) {
    img.src = member.reference;
    img.alt = 'Reference image of ' + member.name;
    $('reference-caption').textContent = `${member.name} (reference)`;
  }
  for (const f of FIELDS) {
    const input = $('f-' + f);
    // the field being typed in keeps what is typed; the others show what is saved
    if (!fresh && document.activeElement === input) continue;
    input.value = clip[f] == null ? '' : String(clip[f]);
  }
}

function clearErrors() {
  for (const f of [...FIELDS, 'status']) {
    $('err-' + f).textContent = '';
    const input = document.getElementById('f-' + f);
    if (input) input.removeAttribute('aria-invalid');
  }
}

function showProblems(problems, fallback) {
  clearErrors();
  let shown = false;
  for (const p of problems || []) {
    const own = document.getElementById('err-' + p.field);
    const box = own || $('err-status');
    // by its own field, the message needs no field name in front
    const text = own && p.message.startsWith(p.field + ': ') ? p.message.slice(p.field.length + 2) : p.message;
    box.textContent = box.textContent ? box.textContent + ' ' + text : text;
    const input = document.getElementById('f-' + p.field);
    if (input) input.setAttribute('aria-invalid', 'true');
    shown = true;
  }
  if (!shown) $('err-status').textContent = fallback;
}

// A field's value as the server takes it: trimmed text or null; a number or null. A character
// typed by name becomes its id.
function fieldValue(f) {
  const raw = $('f-' + f).value.trim();
  if (NUMBERS.includes(f)) return raw === '' ? null : Number(raw);
  if (raw === '') return null;
  if (f === 'character') {
    const key = raw.toLowerCase();
    const m = page.meta.cast.find((c) => c.id === key || c.name.toLowerCase() === key);
    return m ? m.id : raw;
  }
  return raw;
}

// Saves one change; resolves to the saved clip, or null when it was refused (shown by the fields).
function save(clipId, changes) {
  const run = async () => {
    saveState('Saving…');
    try {
      const body = await api('/api/clips/' + encodeURIComponent(clipId), {
        method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(changes)});
      renderCounts(body.counts);
      updateRow(body.clip);
      const open = page.clips[page.current];
      if (open && open.id === clipId) {
        clearErrors();
        renderClip(body.clip, false);
      }
      saveState(`Saved ${clipId}` + (body.games === 'failed' ? ' (games not rebuilt: see the terminal)' : ''));
      return body.clip;
    } catch (e) {
      const open = page.clips[page.current];
      const problems = e.body && e.body.problems;
      if (open && open.id === clipId) showProblems(problems, e.message);
      saveState(problems && problems.length
        ? `Not saved (${clipId}): ${problems.length === 1 ? 'a problem' : problems.length + ' problems'}, shown by the fields`
        : `Not saved (${clipId}): ${e.message}`, true);
      return null;
    }
  };
  page.queue = page.queue.then(run);
  return page.queue;
}

async function decide(status, advance) {
  const clip = page.clips[page.current];
  if (!clip) return;
  const saved = await save(clip.id, {status});
  if (saved && advance) await move(1);
}

async function move(step) {
  const next = page.current + step;
  if (next >= page.clips.length && page.clips.length < page.total) await loadMore();
  if (next < 0 || next >= page.clips.length) return;
  select(next);
}

// --- keys: never while typing in a field

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable ||
    target.matches('input:not([type=radio]):not([type=checkbox]), select, textarea'));
}

function onKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const target = e.target;
  if (typing(target)) {
    if (e.key === 'Escape' && target.form === $('edit-form')) target.blur();  // its change is saved
    return;
  }
  if ($('help').open) return;  // the dialog handles its own keys (Esc closes it)
  const inRadio = target instanceof HTMLInputElement && target.type === 'radio';
  const actions = {
    j: () => move(1), k: () => move(-1), a: () => decide('accepted', true), r: () => decide('rejected', true),
    u: () => decide('needs_review', false), e: () => page.clips[page.current] && $('f-character').focus(),
    p: () => { const v = $('clip-video'); if (v.paused) v.play().catch(() => {}); else v.pause(); },
    '?': () => $('help').showModal(),
  };
  if (!inRadio) Object.assign(actions, {ArrowDown: actions.j, ArrowUp: actions.k});
  const act = actions[e.key];
  if (!act) return;
  e.preventDefault();
  page.keys = page.keys.then(act).catch((err) => saveState(err.message, true));
}

// --- start

async function start() {
  const wanted = readHash();
  page.meta = await api('/api/state');
  $('folder').textContent = page.meta.folder;
  renderFilters();
  renderVocabulary();
  // a new filter keeps the open clip open when it still shows it
  const refilter = (key, value) => {
    page.filter[key] = value;
    const open = page.clips[page.current];
    loadList(open ? open.id : '').catch((e) => saveState(e.message, true));
  };
  for (const r of document.querySelectorAll('input[name=status]')) r.addEventListener('change', () => refilter('status', r.value));
  $('filter-character').addEventListener('change', (e) => refilter('character', e.target.value));
  $('filter-level').addEventListener('change', (e) => refilter('level', e.target.value));
  $('more').addEventListener('click', loadMore);
  for (const f of FIELDS) {
    $('f-' + f).addEventListener('change', () => {
      const clip = page.clips[page.current];
      if (clip) save(clip.id, {[f]: fieldValue(f)});
    });
  }
  $('accept').addEventListener('click', () => decide('accepted', true));
  $('reject').addEventListener('click', () => decide('rejected', true));
  $('reopen').addEventListener('click', () => decide('needs_review', false));
  $('help-button').addEventListener('click', () => $('help').showModal());
  document.addEventListener('keydown', onKey);
  await loadList(wanted, true);
  document.body.dataset.ready = '1';
}

start().catch((e) => saveState('The page could not load: ' + e.message, true));
