// The page's language. Every text the page writes itself goes through t("...") or
// tn("singular", "plural", n), with gettext's %(name)s placeholders: `animegamer i18n extract`
// collects these calls from play/static/*.js into the catalogs the bot uses, and GET /api/i18n
// answers their translations in the locale the server chose (the language menu's `lang` cookie,
// else the browser's Accept-Language, i.e. navigator.languages), with the catalog's plural rule.
// index.html holds the English texts, replaced here by id once the translations arrive.
"use strict";

const i18n = {
  locale: "en", lang: "en", dir: "ltr", chosen: null, messages: {}, plurals: {}, languages: [],
  pluralIndex: (n) => (n === 1 ? 0 : 1),
};

// Placeholders are filled after translation (a translator may move them); `%%` is a literal %
// in a message that has placeholders, as in Python's gettext.
function fill(text, params) {
  if (!params || Object.keys(params).length === 0) return text;
  return text.replace(/%\((\w+)\)s|%%/g, (m, name) => (m === "%%" ? "%" : name in params ? String(params[name]) : m));
}

function t(msgid, params) {
  return fill(i18n.messages[msgid] || msgid, params);
}

// The same English word in another role (the bot's "progress stage" names): keyed as in a .mo.
function pgettext(context, msgid, params) {
  return fill(i18n.messages[`${context}\u0004${msgid}`] || msgid, params);
}

function number(n) {
  try { return new Intl.NumberFormat(i18n.lang).format(n); } catch { return String(n); }
}

// `n` in the message is the count, formatted for the locale (params may override it).
function tn(singular, plural, n, params) {
  const forms = i18n.plurals[singular];
  const text = forms ? forms[Math.min(i18n.pluralIndex(n), forms.length - 1)] : (n === 1 ? singular : plural);
  return fill(text, { n: number(n), ...params });
}

// A translated sentence with nodes in it (names in <strong>, an input): `fillNodes(t("..."), nodes)`
// is a list of strings and the nodes given, in the translation's order, for el() or replaceChildren().
function fillNodes(text, nodes) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(/%\((\w+)\)s|%%/g)) {
    out.push(text.slice(last, m.index));
    out.push(m[0] === "%%" ? "%" : m[1] in nodes ? nodes[m[1]] : m[0]);
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out.filter((part) => part !== "");
}

// The catalog's Plural-Forms expression (C's syntax, the same in JavaScript): the form's index.
function pluralFunction(expression) {
  try {
    const f = new Function("n", `"use strict"; return Number(${expression});`);
    if (Number.isInteger(f(1))) return f;
  } catch { /* English's rule below */ }
  return (n) => (n === 1 ? 0 : 1);
}

// The page's fixed texts, by element id.
function fixedTexts() {
  return {
    text: {
      "you-title": t("You"),
      "you-hint": t("No game yet: start one under Setup, then join it here."),
      "join-name-label": t("Name"),
      "join-character-label": t("Character"),
      "join-button": t("Join the game"),
      "leave-button": t("Leave"),
      "characters-title": t("Characters"),
      "players-empty": t("Nobody has joined yet."),
      "moderate-title": t("Moderate"),
      "pause-button": t("Pause"),
      "reset-button": t("Reset"),
      "setup-title": t("Setup (admin)"),
      "film-label": t("Film"),
      "start-button": t("Start a game"),
      "older": t("Load earlier turns"),
      "vote-title": t("Vote"),
      "vote-propose": t("Propose the action below"),
      "vote-open": t("Open a round"),
      // /act's fields, named as the refusals name them (game/sanitize.py's field labels).
      "act-motion-label": pgettext("field", "motion"),
      "act-adverb-label": pgettext("field", "adverb"),
      "act-background-label": pgettext("field", "background"),
      "act-time-label": pgettext("field", "time of day"),
      "act-button": t("Send"),
      "act-others-label": t("also in the shot:"),
      // TRANSLATORS: the badge on a page whose clips come from the preview backend (not the model).
      "backend-badge": t("PREVIEW"),
    },
    attributes: [
      ["join-name", "placeholder", t("your name")],
      ["act-adverb", "placeholder", t("(optional)")],
      ["act-time", "placeholder", t("(optional)")],
      ["messages", "data-empty", t("No turns yet. Join, then describe the next shot below.")],
      ["language", "aria-label", t("Language")],
      ["language", "title", t("Language")],
    ],
  };
}

function applyFixedTexts() {
  const byId = (id) => document.getElementById(id);
  // TRANSLATORS: the browser tab's title; "play" is the name of the page's one game channel.
  document.title = t("AnimeGamer — play");
  const texts = fixedTexts();
  for (const [id, text] of Object.entries(texts.text)) byId(id).textContent = text;
  for (const [id, name, value] of texts.attributes) byId(id).setAttribute(name, value);
  byId("me-line").replaceChildren(...fillNodes(t("You play %(character)s as %(name)s."),
    { character: byId("me-character"), name: byId("me-name") }));
  // TRANSLATORS: %(seconds)s is a number field; "s" stands for seconds.
  byId("vote-mode").replaceChildren(byId("vote-enabled"), " ",
    ...fillNodes(t("Play by vote, rounds of %(seconds)s s"), { seconds: byId("vote-seconds") }));
}

function renderLanguageMenu() {
  const menu = document.getElementById("language");
  const automatic = new Option(t("Browser's language"), "");
  menu.replaceChildren(automatic, ...i18n.languages.map((l) => {
    const option = new Option(l.name, l.code);
    option.lang = l.code.replace("_", "-");
    return option;
  }));
  menu.value = i18n.chosen || "";
}

async function loadLanguage() {
  const res = await fetch("/api/i18n", { cache: "no-store" });
  if (!res.ok) throw new Error(`GET /api/i18n: ${res.status}`);
  const data = await res.json();
  Object.assign(i18n, data, { pluralIndex: pluralFunction(data.plural.expression) });
  document.documentElement.lang = data.lang;
  document.documentElement.dir = data.dir;
  applyFixedTexts();
  renderLanguageMenu();
}

// The other scripts wait for this before their first render; the page stays English if it fails.
const i18nReady = loadLanguage().catch((e) => console.warn("the page's translations did not load:", e));

// Texts in another language: app.js and vote.js render again on this event.
async function languageChanged() {
  await loadLanguage().catch((e) => console.warn("the page's translations did not load:", e));
  document.dispatchEvent(new CustomEvent("animegamer:language", { detail: i18n.locale }));
}

function chooseLanguage(code) {
  document.cookie = code
    ? `lang=${encodeURIComponent(code)}; path=/; max-age=31536000; samesite=lax`
    : "lang=; path=/; max-age=0; samesite=lax";
  return languageChanged();
}

document.getElementById("language").addEventListener("change", (e) => chooseLanguage(e.target.value));
// The browser's languages changed (its settings): followed unless the menu chose one.
window.addEventListener("languagechange", () => { if (!i18n.chosen) languageChanged(); });
