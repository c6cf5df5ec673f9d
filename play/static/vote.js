// Vote mode on the play page (the same rounds as Discord's /vote): every tab may propose the
// composer's action and vote for one option per round; the round's deadline and tally come from
// the server. Uses app.js's helpers ($, el, api, attempt, toast, ME) and i18n.js's (t, tn); user
// text goes in as text.
"use strict";

const voting = { data: null };

async function refreshVote() {
  const d = await api(`/api/vote?player=${ME}`).catch(() => null);
  if (!d) return;
  voting.data = d;
  voting.fetchedAt = Date.now();
  renderVote();
}

function secondsLeft(r) {
  return Math.max(0, Math.ceil(r.seconds_left - (Date.now() - voting.fetchedAt) / 1000));
}

function renderVote() {
  const d = voting.data;
  if (!d) return;
  $("vote-enabled").checked = d.enabled;
  if (document.activeElement !== $("vote-seconds")) $("vote-seconds").value = d.round_seconds;
  $("vote").hidden = !d.enabled;
  $("act-button").hidden = d.enabled; // in vote mode the composer's action is proposed instead
  const r = d.round;
  const open = !!r && r.status === "open";
  $("vote").dataset.round = r ? r.status : "none";
  $("vote-status").textContent = open
    ? [
      t("open"),
      // TRANSLATORS: an open vote round; %(n)s is the number of players, "s" stands for seconds.
      tn("closes in %(seconds)s s, or when %(n)s player has voted (%(voted)s so far)",
        "closes in %(seconds)s s, or when all %(n)s players have voted (%(voted)s so far)",
        r.players, { seconds: number(secondsLeft(r)), voted: number(r.players_voted) }),
      t("a tie goes to the earliest proposal"),
    ].join(" · ")
    : r ? r.outcome || "" : t("No round yet: propose the action above.");
  $("vote-options").replaceChildren(...(r ? r.options : []).map((o) =>
    el("li", { class: `vote-option${o.winner ? " winner" : ""}${r.my_vote === o.number ? " mine" : ""}`,
               dataset: { number: String(o.number), votes: String(o.votes) } },
      el("span", { class: "who" }, o.author_name), ": ", el("span", { class: "instruction" }, o.instruction),
      el("span", { class: "muted" }, " · ", tn("%(n)s vote", "%(n)s votes", o.votes), o.winner ? [" · ", t("winner")] : null),
      open ? el("button", { type: "button", class: r.my_vote === o.number ? "chosen" : "quiet",
                            onclick: () => castVote(o.number) },
      r.my_vote === o.number ? t("Your vote") : t("Vote %(number)s", { number: o.number })) : null)));
}

async function castVote(number) {
  await attempt(async () => {
    await api("/api/vote/ballot", { player_id: ME_ID, option: number });
    await refreshVote();
  });
}

function wireVote() {
  $("vote-propose").addEventListener("click", () => attempt(async () => {
    const body = {
      player_id: ME_ID,
      name: sessionStorage.getItem("animegamer.name") || $("join-name").value,
      motion: $("act-motion").value,
      adverb: $("act-adverb").value,
      background: $("act-background").value,
      time_of_day: $("act-time").value,
      characters: [...$("act-others").querySelectorAll("input:checked")].map((i) => i.value),
    };
    const r = await api("/api/vote/propose", body);
    toast(r.notes.length
      ? t("Your proposal is option %(number)s. Changed: %(changes)s", { number: r.option, changes: r.notes.join("; ") })
      : t("Your proposal is option %(number)s.", { number: r.option }), "info");
    $("act-motion").value = "";
    await refreshVote();
  }));
  $("vote-open").addEventListener("click", () => attempt(async () => {
    await api("/api/vote/open", { player_id: ME_ID });
    await refreshVote();
  }));
  const setMode = () => attempt(async () => {
    const seconds = Number($("vote-seconds").value) || undefined;
    await api("/api/vote/mode", { enabled: $("vote-enabled").checked, seconds });
    await refreshVote();
  });
  $("vote-enabled").addEventListener("change", setMode);
  $("vote-seconds").addEventListener("change", () => { if ($("vote-enabled").checked) setMode(); });

  // Its own event stream: rounds change on NOTIFYs (session_changed "vote"), turns start them.
  const es = new EventSource("/api/events");
  es.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    if (["hello", "resync", "session_changed", "turn_queued"].includes(ev.type)) refreshVote();
  };
  setInterval(() => { if (voting.data && voting.data.round && voting.data.round.status === "open") renderVote(); }, 1000);
}

document.addEventListener("animegamer:language", () => refreshVote());

document.addEventListener("DOMContentLoaded", async () => {
  await i18nReady;
  wireVote();
  await refreshVote();
  window.animegamerVoteReady = true; // for tests
});
