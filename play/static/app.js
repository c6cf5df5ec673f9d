// The play page: one game channel. Everything shown comes from the server's JSON; every piece of
// user text goes into the page as text (textContent / text nodes), never as markup. The page's own
// words go through t() / tn() (i18n.js), in the language the server chose.
"use strict";

const $ = (id) => document.getElementById(id);

// Build an element: attributes (plain strings, or `on*` handlers) and children (nodes or text).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// Each tab is a player: its id lives in sessionStorage, so two tabs are two players.
function playerId() {
  let id = sessionStorage.getItem("animegamer.player");
  if (!id) {
    const r = crypto.getRandomValues(new Uint32Array(2));
    id = String((r[0] & 0x1fffff) * 4294967296 + r[1] + 1);
    sessionStorage.setItem("animegamer.player", id);
  }
  return id;
}
const ME = playerId();
const ME_ID = Number(ME); // ids are JSON numbers in request bodies (below 2^53: exact)

const page = {
  state: null,
  sessionId: null,
  turns: new Map(), // id -> turn JSON
  oldestSeq: null,
  loading: Promise.resolve(),
  players: new Map(), // user_id -> {name, character}, for "joined"/"left" lines
  conn: null, // the event stream: null (not yet), "on", "off"
};

// --- talking to the server

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  let res;
  try {
    res = await fetch(path, opts);
  } catch (e) {
    throw new Error(t("The play server is not reachable. Is `animegamer play` still running?"));
  }
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error(data.message || t("The server answered %(status)s.", { status: res.status }));
    err.code = data.error;
    err.field = data.field;
    throw err;
  }
  return data;
}

let toastTimer = null;
function toast(message, kind = "error") {
  const box = $("toast");
  box.textContent = message;
  box.className = `toast ${kind}`;
  box.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.hidden = true; }, 8000);
}

async function attempt(fn) {
  try {
    return await fn();
  } catch (e) {
    toast(e.message);
    return undefined;
  }
}

// --- words for the server's codes

function sessionStatus(status) {
  const names = { active: t("active"), paused: t("paused"), archived: t("ended") };
  return names[status] || status;
}

// A worker's progress stage (as it reports it) in words: the bot's names for them (bot/parts/embeds.py).
function stageName(stage) {
  const steps = /^(render|denoise) (\d+)\/(\d+)$/.exec(stage || "");
  if (steps) {
    const done = number(Number(steps[2]));
    const total = number(Number(steps[3]));
    return steps[1] === "render"
      ? pgettext("progress stage", "drawing frame %(done)s of %(total)s", { done, total })
      : pgettext("progress stage", "refining, step %(done)s of %(total)s", { done, total });
  }
  const names = {
    "": t("starting"),
    mllm: pgettext("progress stage", "imagining the scene"),
    decode: pgettext("progress stage", "drawing the frames"),
    vae: pgettext("progress stage", "decoding the frames"),
    encode: pgettext("progress stage", "encoding the clip"),
    done: pgettext("progress stage", "finishing"),
    "preview rules": pgettext("progress stage", "applying the preview's rules"),
  };
  return stage in names || !stage ? names[stage || ""]
    // TRANSLATORS: a progress stage the page has no name for; %(stage)s is the worker's own word for it
    : pgettext("progress stage", "working (%(stage)s)", { stage });
}

function stateLabel(name) {
  return (page.state && page.state.state_labels && page.state.state_labels[name]) || name;
}

function percent(fraction) {
  try { return new Intl.NumberFormat(i18n.lang, { style: "percent" }).format(fraction); } catch { return `${Math.round(fraction * 100)}%`; }
}

function renderConn() {
  const conn = $("conn");
  conn.className = page.conn ? `conn ${page.conn}` : "conn";
  conn.title = page.conn === "on" ? t("live") : page.conn === "off" ? t("reconnecting…") : t("live updates");
}

// --- the side panel

function renderState(st) {
  const prevPlayers = page.players;
  page.state = st;
  const session = st.session;
  // TRANSLATORS: the name of the page's one game channel, shown as "#play" when no film is chosen.
  $("channel-title").textContent = st.film ? st.film.title : t("play");
  const status = $("session-status");
  status.textContent = session ? sessionStatus(session.status) : t("no game");
  status.className = `badge ${session ? session.status : "none"}`;
  status.title = session && session.paused_reason ? session.paused_reason : "";
  $("backend-badge").hidden = st.backend !== "preview";
  $("backend-badge").title = t("Clips come from the preview backend, not the AnimeGamer model.");

  // Setup: film and cast (the guild's configuration).
  const filmSel = $("film-select");
  filmSel.replaceChildren(...st.films.map((f) => el("option", { value: f.id, selected: f.id === st.config.film }, f.title)));
  const castFilm = st.films.find((f) => f.id === st.config.film);
  $("cast").replaceChildren(el("legend", {}, t("Playable characters")), ...(castFilm ? castFilm.characters : []).map((c) =>
    el("label", { class: "check" },
      el("input", { type: "checkbox", value: c.id, checked: st.config.playable.includes(c.id),
        onchange: (e) => attempt(() => api("/api/cast", { character: c.id, enabled: e.target.checked }).then(refreshState)) }),
      c.name)));
  $("start-button").hidden = !!session;
  if (page.hadSession !== !!session) $("setup").open = !session; // only when a game starts or ends
  page.hadSession = !!session;

  // You: join form or who you are.
  const mine = st.me;
  $("join-form").hidden = !!mine || !session;
  $("you-hint").hidden = !!session;
  $("me").hidden = !mine;
  if (mine) {
    $("me-name").textContent = mine.name;
    $("me-character").textContent = (st.film.characters.find((c) => c.id === mine.character) || { name: mine.character }).name;
  }
  const taken = new Set(st.players.map((p) => p.character));
  // The playable cast: the configured one, when the game is of the configured film.
  const cast = (st.film ? st.film.characters : [])
    .filter((c) => st.config.film !== st.film.id || st.config.playable.includes(c.id));
  const joinSel = $("join-character");
  const chosen = joinSel.value;
  joinSel.replaceChildren(...cast
    .map((c) => el("option", { value: c.id, disabled: taken.has(c.id) },
      taken.has(c.id) ? t("%(character)s (taken)", { character: c.name }) : c.name)));
  if (chosen && [...joinSel.options].some((o) => o.value === chosen && !o.disabled)) joinSel.value = chosen;
  else { const free = [...joinSel.options].find((o) => !o.disabled); if (free) joinSel.value = free.value; }
  if (!$("join-name").value) $("join-name").value = sessionStorage.getItem("animegamer.name") || "";

  // Players and their characters' bars.
  $("players").replaceChildren(...st.players.map((p) =>
    el("li", { dataset: { userId: p.user_id } },
      fillNodes(t("%(player)s plays %(character)s"),
        { player: el("span", { class: "who" }, p.name), character: el("strong", {}, p.character_name) }),
      p.user_id === ME ? el("span", { class: "muted you" }, t("(you)")) : null)));
  $("players-empty").hidden = st.players.length > 0;
  const castOrder = st.film ? st.film.characters.map((c) => c.id) : [];
  const stateRows = Object.entries(st.states).sort(([x], [y]) => castOrder.indexOf(x) - castOrder.indexOf(y));
  $("states").replaceChildren(...stateRows.map(([cid, s]) =>
    el("div", { class: "char", dataset: { character: cid } },
      el("div", { class: "char-name" }, s.name),
      st.state_names.map((k) => bar(cid, k, s[k], null)))));

  // Composer: examples from the film's suggestions, the other characters who may be in the shot,
  // and the pause button.
  if (st.options) {
    $("act-motion").placeholder = st.options.motions[0] || "";
    $("act-background").placeholder = st.options.backgrounds[0] || "";
  }
  // Each field's cap as the game counts it (the server's table, the same as /act's in Discord).
  for (const [inputId, field] of SUGGEST) $(inputId).maxLength = st.limits.fields[field];
  const others = $("act-others");
  const ticked = new Set([...others.querySelectorAll("input:checked")].map((i) => i.value));
  others.replaceChildren(...cast.filter((c) => !mine || c.id !== mine.character).map((c) =>
    el("label", { class: "check" }, el("input", { type: "checkbox", value: c.id, checked: ticked.has(c.id) }), c.name)));
  const paused = session && session.status === "paused";
  $("pause-button").textContent = paused ? t("Resume") : t("Pause");
  $("pause-button").disabled = !session;
  $("reset-button").disabled = !session;
  $("act-button").disabled = !mine || paused;
  $("act-form").classList.toggle("disabled", !mine || !!paused);

  // "joined"/"left" lines in the log, from the change in the player list.
  const now = new Map(st.players.map((p) => [p.user_id, { name: p.name, character: p.character_name }]));
  if (page.sessionId === (session && session.id) && prevPlayers.size + now.size > 0) {
    for (const [id, who] of now) if (!prevPlayers.has(id)) systemLine(t("%(name)s (%(character)s) joined the game.", who));
    for (const [id, who] of prevPlayers) if (!now.has(id)) systemLine(t("%(name)s (%(character)s) left the game.", who));
  }
  page.players = now;
}

// One state bar: `data-value` carries the number the bar shows (tests compare it with the DB).
function bar(character, name, value, before) {
  const change = before === null || before === undefined ? null : value - before;
  return el("div", { class: "bar", dataset: { character, state: name, value: String(value) } },
    el("span", { class: "bar-label" }, stateLabel(name)),
    el("span", { class: `bar-track ${name}` }, (() => {
      const fill = el("span", { class: "bar-fill" });
      fill.style.width = `${Math.max(0, Math.min(100, value))}%`;
      return fill;
    })()),
    el("span", { class: "bar-value" }, String(value)),
    change === null ? null : el("span", {
      class: `bar-change ${change > 0 ? "up" : change < 0 ? "down" : "same"}`, dataset: { change: String(change) },
    }, change === 0 ? "±0" : (change > 0 ? `+${number(change)}` : number(change))));
}

// --- the log

function nearBottom() {
  const log = $("log");
  return log.scrollHeight - log.scrollTop - log.clientHeight < 120;
}
function scrollToBottom() { const log = $("log"); log.scrollTop = log.scrollHeight; }

function systemLine(text) {
  const stick = nearBottom();
  $("messages").append(el("div", { class: "system" }, text));
  if (stick) scrollToBottom();
}

function timeOf(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  try { return d.toLocaleTimeString(i18n.lang, { hour: "2-digit", minute: "2-digit" }); } catch { return d.toLocaleTimeString(); }
}

function turnBody(turn) {
  const parts = [];
  if (turn.status === "queued") {
    parts.push(el("div", { class: "status queued" },
      turn.position ? t("Queued — position %(position)s", { position: number(turn.position) }) : t("Queued"),
      el("button", { type: "button", class: "quiet small", onclick: () => attempt(() => api(`/api/turns/${turn.id}/cancel`, {})) }, t("Cancel"))));
  } else if (turn.status === "running") {
    const fill = el("span", { class: "progress-fill" });
    fill.style.width = `${Math.round(turn.progress * 100)}%`;
    parts.push(el("div", { class: "status running" },
      el("span", { class: "progress", role: "progressbar", "aria-valuenow": Math.round(turn.progress * 100),
        "aria-label": t("Progress") }, fill),
      // TRANSLATORS: a running turn's progress: the stage's name, then the percentage done.
      el("span", { class: "stage" }, t("%(stage)s · %(percent)s", { stage: stageName(turn.stage), percent: percent(turn.progress) }))));
    // The clip forming (the latest preview from the event stream), in the place its video will take.
    if (turn.preview) {
      parts.push(el("figure", { class: "clip forming" },
        el("img", { class: "preview-still", src: turn.preview, alt: t("The clip as it is being made") })));
    }
  } else if (turn.status === "failed") {
    // TRANSLATORS: %(error)s is the generator's reason (stored as the worker wrote it).
    parts.push(el("div", { class: "status failed" }, t("This turn could not be generated: %(error)s", { error: turn.error_text || t("unknown error") })));
  } else if (turn.status === "cancelled") {
    parts.push(el("div", { class: "status cancelled" },
      turn.error_text ? t("Cancelled (%(reason)s)", { reason: turn.error_text }) : t("Cancelled")));
  } else if (turn.status === "done") {
    if (turn.video) {
      parts.push(el("figure", { class: "clip" },
        el("video", { src: turn.video, controls: true, muted: true, autoplay: true, loop: true, playsinline: true, preload: "auto" }),
        turn.is_preview ? el("span", { class: "preview-label", title: t("A preview clip from the preview backend, not the AnimeGamer model.") }, t("PREVIEW")) : null));
    } else {
      parts.push(el("div", { class: "status muted" }, turn.video_pruned ? t("The clip was pruned (older than the retention period).") : t("No clip.")));
    }
    const after = turn.states_after || {};
    const before = turn.states_before || {};
    const names = Object.fromEntries(turn.characters.map((c) => [c.id, c.name]));
    const order = turn.characters.map((c) => c.id).filter((cid) => cid in after); // as named in the instruction
    parts.push(el("div", { class: "turn-bars" }, order.map((cid) =>
      el("div", { class: "char", dataset: { character: cid } },
        el("div", { class: "char-name" }, names[cid] || cid),
        (page.state ? page.state.state_names : ["stamina", "social", "entertainment"]).map((k) =>
          bar(cid, k, after[cid][k], before[cid] ? before[cid][k] : null))))));
    if (turn.prediction) {
      const level = t("motion level %(level)s", { level: number(turn.prediction.motion_level) });
      const scope = turn.motion_scope !== null ? t("motion scope %(scope)s", { scope: number(turn.motion_scope) }) : null;
      parts.push(el("div", { class: "meta muted" }, [level, scope, turn.backend].filter(Boolean).join(" · ")));
    }
  }
  if (turn.status === "done" || turn.status === "failed") { // shown on the latest turn only (style.css)
    parts.push(el("button", { type: "button", class: "quiet small regenerate", title: t("Generate this turn again with a new seed"),
      onclick: () => attempt(() => api("/api/regenerate", {})) }, t("Regenerate")));
  }
  return parts;
}

function renderTurn(turn) {
  const known = page.turns.get(turn.id);
  if (turn.status === "running" && !turn.preview && known && known.preview) turn = { ...turn, preview: known.preview };
  page.turns.set(turn.id, turn);
  const existing = document.querySelector(`article.turn[data-turn-id="${turn.id}"]`);
  const node = el("article", { class: `turn ${turn.status}`, dataset: { turnId: String(turn.id), seq: String(turn.seq), status: turn.status } },
    el("div", { class: "avatar" }, (turn.author_name || "?").slice(0, 1).toUpperCase()),
    el("div", { class: "turn-main" },
      el("div", { class: "turn-head" },
        el("span", { class: "author" }, turn.author_name),
        turn.author_id === ME ? el("span", { class: "muted you" }, t("(you)")) : null,
        // TRANSLATORS: after the author's name: the turn's number and the time it was sent.
        el("span", { class: "muted" }, " · ", t("turn %(number)s · %(time)s", { number: turn.seq, time: timeOf(turn.created_at) }))),
      el("div", { class: "instruction" }, turn.instruction),
      turnBody(turn)));
  if (existing) {
    // Keep a playing video element when only the surrounding text changed.
    const oldVideo = existing.querySelector("video");
    const newVideo = node.querySelector("video");
    if (oldVideo && newVideo && oldVideo.getAttribute("src") === newVideo.getAttribute("src")) newVideo.replaceWith(oldVideo);
    existing.replaceWith(node);
    return;
  }
  // Insert in sequence order (older pages arrive later than newer turns).
  const stick = nearBottom();
  const later = [...document.querySelectorAll("article.turn")].find((a) => Number(a.dataset.seq) > turn.seq);
  if (later) later.before(node);
  else $("messages").append(node);
  if (stick && !later) scrollToBottom();
}

function updateProgress(ev) {
  const turn = page.turns.get(ev.turn_id);
  if (!turn) return loadTurn(ev.turn_id);
  if (turn.status === "done" || turn.status === "failed") return;
  renderTurn({ ...turn, status: "running", progress: ev.progress, stage: ev.stage, preview: ev.preview_url || turn.preview });
}

async function loadTurn(id) {
  const turn = await attempt(() => api(`/api/turns/${id}`));
  if (turn && turn.session_id === page.sessionId) renderTurn(turn);
}

async function refreshPending() {
  const r = await attempt(() => api("/api/turns?pending=1"));
  if (r && r.session_id === page.sessionId) r.turns.forEach(renderTurn);
}

// (Re)load the latest page of the log. `page.loading` lets a caller wait for it, so a line
// added after a reload is not wiped by a reload still under way.
function loadLog() {
  page.loading = (async () => {
    const r = await attempt(() => api("/api/turns?limit=20"));
    if (!r) return;
    page.turns.clear();
    $("messages").replaceChildren();
    page.sessionId = r.session_id;
    r.turns.forEach(renderTurn);
    page.oldestSeq = r.turns.length ? r.turns[0].seq : null;
    $("older").hidden = !r.more;
    scrollToBottom();
  })();
  return page.loading;
}

async function loadOlder() {
  if (page.oldestSeq === null) return;
  const log = $("log");
  const fromBottom = log.scrollHeight - log.scrollTop;
  const r = await attempt(() => api(`/api/turns?limit=20&before=${page.oldestSeq}`));
  if (!r || r.session_id !== page.sessionId) return;
  r.turns.forEach(renderTurn);
  if (r.turns.length) page.oldestSeq = r.turns[0].seq;
  $("older").hidden = !r.more;
  log.scrollTop = log.scrollHeight - fromBottom; // keep the view where it was
}

async function refreshState() {
  const st = await attempt(() => api(`/api/state?player=${ME}`));
  if (!st) return;
  const sid = st.session ? st.session.id : null;
  if (sid !== page.sessionId) {
    page.sessionId = sid; // at once, so a concurrent refresh does not reload the log again
    page.players = new Map();
    renderState(st);
    await loadLog();
  } else {
    renderState(st);
  }
}

// --- live updates

function connect() {
  const es = new EventSource("/api/events");
  es.onopen = () => { page.conn = "on"; renderConn(); };
  es.onerror = () => { page.conn = "off"; renderConn(); };
  es.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    handle(ev);
  };
}

async function handle(ev) {
  switch (ev.type) {
    case "hello": // (re)connected: events sent before this may be missed, so re-read all
    case "resync":
      await refreshState();
      await loadLog();
      break;
    case "turn_progress":
      if (ev.session_id === page.sessionId) updateProgress(ev);
      break;
    case "turn_queued":
      // (also sent on cancel and regenerate, which changes the bars)
      if (ev.session_id === page.sessionId) { await loadTurn(ev.turn_id); await refreshPending(); await refreshState(); }
      break;
    case "turn_finished":
      if (ev.session_id === page.sessionId) { await loadTurn(ev.turn_id); await refreshPending(); await refreshState(); }
      break;
    case "session_changed": {
      const before = page.sessionId;
      await refreshState();
      await page.loading;
      if (ev.event === "paused") systemLine(t("The game was paused."));
      else if (ev.event === "active") systemLine(t("The game was resumed."));
      else if (ev.event === "reset" && before !== null) {
        systemLine(t("The game was reset: every character starts again from %(start)s.", { start: number(50) }));
      } else if (ev.event === "started") systemLine(t("A new game started."));
      else if (ev.event === "removed") { await loadLog(); systemLine(t("A shot was removed; the characters keep their states.")); }
      break;
    }
  }
}

// --- suggestions: the same list /act's autocomplete offers

const SUGGEST = [["act-motion", "motion", "dl-motion"], ["act-adverb", "adverb", "dl-adverb"],
  ["act-background", "background", "dl-background"], ["act-time", "time_of_day", "dl-time"]];

function wireSuggestions() {
  for (const [inputId, field, listId] of SUGGEST) {
    let timer = null;
    const fill = async () => {
      const q = $(inputId).value;
      const items = await api(`/api/suggest?field=${field}&q=${encodeURIComponent(q)}`).catch(() => null);
      if (items) $(listId).replaceChildren(...items.map((v) => el("option", { value: v })));
    };
    $(inputId).addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(fill, 120); });
    $(inputId).addEventListener("focus", fill);
  }
}

// --- forms and buttons

function wire() {
  $("join-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("join-name").value;
    sessionStorage.setItem("animegamer.name", name);
    attempt(async () => {
      await api("/api/join", { player_id: ME_ID, name, character: $("join-character").value });
      await refreshState();
    });
  });
  $("leave-button").addEventListener("click", () => attempt(async () => {
    await api("/api/leave", { player_id: ME_ID });
    await refreshState();
  }));
  $("act-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const body = {
      player_id: ME_ID,
      motion: $("act-motion").value,
      adverb: $("act-adverb").value,
      background: $("act-background").value,
      time_of_day: $("act-time").value,
      characters: [...$("act-others").querySelectorAll("input:checked")].map((i) => i.value),
    };
    attempt(async () => {
      const r = await api("/api/act", body);
      if (r.notes && r.notes.length) toast(t("Sent, with changes: %(changes)s", { changes: r.notes.join("; ") }), "info");
      $("act-motion").value = "";
      await loadTurn(r.turn_id);
      scrollToBottom();
    });
  });
  $("pause-button").addEventListener("click", () => attempt(async () => {
    const paused = page.state && page.state.session && page.state.session.status === "paused";
    await api("/api/pause", { paused: !paused });
    await refreshState();
  }));
  $("reset-button").addEventListener("click", () => {
    if (!confirm(t("Reset the game? Queued turns are cancelled and every character starts again from %(start)s.", { start: number(50) }))) return;
    attempt(async () => { await api("/api/reset", {}); await refreshState(); });
  });
  $("film-select").addEventListener("change", (e) => {
    const live = page.state && page.state.session;
    if (live && live.film !== e.target.value &&
        !confirm(t("Changing the film resets the game in progress; players join again with the new cast."))) {
      e.target.value = page.state.config.film;
      return;
    }
    attempt(async () => { await api("/api/film", { film: e.target.value }); await refreshState(); });
  });
  $("start-button").addEventListener("click", () => attempt(async () => { await api("/api/start", {}); await refreshState(); }));
  $("older").addEventListener("click", loadOlder);
  $("log").addEventListener("scroll", () => { if ($("log").scrollTop === 0 && !$("older").hidden) loadOlder(); });
  wireSuggestions();
}

document.addEventListener("DOMContentLoaded", async () => {
  await i18nReady; // the first render is in the page's language
  renderConn();
  wire();
  await refreshState();
  connect();
  window.animegamerReady = true; // for tests: the first render is done
});

// Another language chosen: everything the page wrote is written again (the server's texts too).
document.addEventListener("animegamer:language", async () => {
  renderConn();
  await refreshState();
  await loadLog();
});
