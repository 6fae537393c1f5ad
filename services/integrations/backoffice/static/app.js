"use strict";
// The pit boss's page: live tables over server-sent events, the last coups with their cards, the five
// scoreboard roads, today's results per table, the alerts (filters, every one counted through the
// cursor, a case panel to acknowledge, assign and close them, their evidence). No build step, no library.
const ROADS = [["bead_plate", "bead plate"], ["big_road", "big road"], ["big_eye_boy", "big eye boy"],
               ["small_road", "small road"], ["cockroach_pig", "cockroach pig"]];
const SUITS = { S: "\u2660", H: "\u2665", D: "\u2666", C: "\u2663" };
let apiKey = null;
let pageSize = 500;  // alerts per request; the list follows the cursor past any count
const alerts = { cursor: null, filters: "", total: 0, newest: [], byId: new Map() };
const SHOWN = 50;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else if (k === "style") node.style.cssText = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function money(minor) {
  const sign = minor < 0 ? "-" : "", abs = Math.abs(minor);
  return sign + Math.floor(abs / 100).toLocaleString("en") + "." + String(abs % 100).padStart(2, "0");
}

async function api(path, init = {}) {
  const r = await fetch(path, { ...init, headers: { Authorization: "Bearer " + apiKey, ...(init.headers || {}) } });
  if (r.status === 401 || r.status === 403) {
    showLogin(r.status === 401 ? "unknown API key" : "this key's role may not see the tables");
    const e = new Error(String(r.status)); e.shown = true; throw e;
  }
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

function cardNode(card) {
  const suit = card.slice(-1), rank = card.slice(0, -1) === "T" ? "10" : card.slice(0, -1);
  return el("span", { class: "card" + ("HD".includes(suit) ? " red" : ""), "data-card": card }, rank + SUITS[suit]);
}

function roadNode(name, cells) {
  const road = el("div", { class: "road", "data-road": name });
  for (const c of cells) {
    road.append(el("span", { class: "cell " + c.value, style: `grid-column:${c.col + 1};grid-row:${c.row + 1}`,
                              title: c.value + (c.ties ? " +" + c.ties + " tie" : "") }, c.ties ? String(c.ties) : ""));
  }
  return road;
}

async function tableCard(t) {
  const [rounds, roads] = await Promise.all([
    api(`/v1/tables/${encodeURIComponent(t.table_id)}/rounds?limit=6`),
    api(`/v1/tables/${encodeURIComponent(t.table_id)}/roads`),
  ]);
  const r = t.report || { coups: 0, bets: 0, handle_minor: 0, win_minor: 0, commission_minor: 0, hold_pct: 0, bank_minor: 0 };
  const results = el("div", { class: "results" },
    el("div", {}, "coups", el("b", { "data-field": "coups" }, r.coups)),
    el("div", {}, "bets", el("b", {}, r.bets)),
    el("div", {}, "handle", el("b", { "data-field": "handle" }, money(r.handle_minor))),
    el("div", {}, "win", el("b", { "data-field": "win" }, money(r.win_minor))),
    el("div", {}, "commission", el("b", {}, money(r.commission_minor))),
    el("div", {}, "hold", el("b", { "data-field": "hold" }, r.hold_pct.toFixed(2) + " %")));
  if (r.bank_minor) {  // a player-banked table: the player-banker's share beside the house's win
    results.append(el("div", { title: "what the players holding the bank won (or lost)" }, "bank",
                      el("b", { "data-field": "bank" }, money(r.bank_minor))));
  }
  const coups = el("ul", { class: "coups" });
  for (const c of rounds.rounds) {
    const hands = el("span", {});
    for (const [name, h] of Object.entries(c.hands)) {
      hands.append(el("span", { class: "hand" }, el("span", { class: "name" }, name), ...h.cards.map(cardNode), " " + h.total + "  "));
    }
    coups.append(el("li", { class: "coup", "data-coup": c.coup_id },
      el("span", {}, "#" + c.coup_number), el("span", { class: "outcome " + c.outcome }, c.outcome + (c.natural ? " ★" : "")), hands));
  }
  const roadGrid = el("div", { class: "roads" });
  for (const [name, label] of ROADS) roadGrid.append(el("span", {}, label), roadNode(name, roads[name]));
  return el("article", { class: "table-card", "data-table": t.table_id },
    el("h3", {}, t.table_id, el("span", { class: "sub" }, t.variant + " · " + (t.shoe_id || "no shoe"))),
    results, coups, roadGrid);
}

async function refresh() {
  const data = await api("/v1/tables");
  document.getElementById("day").textContent = data.day ? "gaming day " + data.day : "no play yet";
  const cards = await Promise.all(data.tables.map(tableCard));
  document.getElementById("tables").replaceChildren(...cards);
  await followAlerts();
  document.body.dataset.position = String(data.position);
}

function alertFilters() {
  const q = new URLSearchParams();
  for (const [id, name] of [["f-detector", "detector"], ["f-status", "status"], ["f-account", "account"],
                            ["f-since", "since"], ["f-until", "until"]]) {
    const v = document.getElementById(id).value.trim();
    if (v) q.set(name, v);
  }
  return q.toString();
}

function resetAlerts() {
  Object.assign(alerts, { cursor: null, filters: alertFilters(), total: 0, newest: [] });
  alerts.byId.clear();
}

// Reads every alert after the last cursor, page by page, so the list stays live past any count: only
// the newest SHOWN are kept in the page, the rest are counted. One reading at a time (a refresh that
// comes while one runs waits for it), so no alert is counted twice.
let alertsRun = Promise.resolve();
function followAlerts() {
  alertsRun = alertsRun.then(readAlerts, readAlerts);
  return alertsRun;
}

async function readAlerts() {
  if (alerts.filters !== alertFilters()) resetAlerts();
  for (;;) {
    const q = new URLSearchParams(alerts.filters);
    q.set("limit", String(pageSize));
    if (alerts.cursor) q.set("cursor", alerts.cursor);
    const page = await api("/v1/alerts?" + q.toString());
    for (const a of page.alerts) {
      alerts.total += 1;
      alerts.newest.push(a);
      alerts.cursor = String(a.offset);
    }
    alerts.newest = alerts.newest.slice(-SHOWN);
    if (!page.next_cursor) break;
  }
  const detectors = document.getElementById("f-detector-list");
  const known = new Set([...detectors.options].map(o => o.value));
  for (const a of alerts.newest) if (!known.has(a.detector)) { detectors.append(el("option", { value: a.detector })); known.add(a.detector); }
  drawAlerts();
}

function drawAlerts() {
  alerts.byId = new Map(alerts.newest.map(a => [a.event_id, a]));
  const rows = alerts.newest.slice().reverse().map(a => el("tr", { class: "alert", "data-severity": a.severity, "data-alert": a.event_id, "data-status": a.status },
    el("td", {}, a.occurred_at), el("td", { class: "sev-" + a.severity }, a.severity), el("td", {}, a.table_id),
    el("td", {}, a.detector), el("td", { class: "accounts" }, (a.account_ids || []).join(" ")),
    el("td", { class: "status" }, a.status + (a.assignee ? " · " + a.assignee : "")), el("td", {}, a.detail)));
  document.querySelector("#alerts tbody").replaceChildren(...rows);
  document.getElementById("alert-count").textContent = String(alerts.total);
}

async function showAlert(id) {
  const [a, c] = await Promise.all([api(`/v1/alerts/${encodeURIComponent(id)}`), api(`/v1/alerts/${encodeURIComponent(id)}/case`)]);
  const panel = document.getElementById("case");
  const steps = el("ol", { class: "steps" }, ...a.steps.map(s => el("li", { "data-refused": s.refused || "" },
    `${s.occurred_at} ${s.by}: ${s.action}` + (s.assignee ? " → " + s.assignee : "") + (s.note ? " — " + s.note : "") +
    (s.refused ? ` (refused: ${s.refused})` : ""))));
  const linked = c.linked_accounts.map(x => `${x.account_id} (${x.shared_alerts})`).join(", ") || "none";
  const tables = c.tables.map(t => `${t.table_id}: ${t.bets} bets, ${money(t.staked_minor)} staked, ${t.alerts} alerts`).join("; ");
  const button = (label, action) => el("button", { type: "button", "data-action": action }, label);
  const actions = el("div", { class: "actions" }, button("Acknowledge", "acknowledge"), button("Assign…", "assign"), button("Close…", "close"),
    button("Evidence (JSON)", "json"), button("Evidence (CSV)", "csv"));
  actions.addEventListener("click", ev => { const b = ev.target.closest("button"); if (b) act(a.event_id, b.dataset.action).catch(showError); });
  panel.replaceChildren(el("h3", {}, `${a.detector} · ${a.table_id} · `, el("span", { id: "case-status" }, a.status)),
    el("p", {}, a.detail), el("p", {}, "accounts: ", el("b", { id: "case-accounts" }, a.account_ids.join(", ") || "none")),
    el("p", {}, "linked accounts: ", el("span", { id: "case-linked" }, linked)), el("p", {}, "tables: " + tables),
    el("p", {}, `${c.alerts_total} alerts on these accounts; assignee: ${a.assignee || "none"}`), actions, steps);
  panel.hidden = false;
  panel.dataset.alert = a.event_id;
}

async function act(id, action) {
  const base = `/v1/alerts/${encodeURIComponent(id)}`;
  if (action === "json" || action === "csv") {
    const r = await fetch(`${base}/evidence?format=${action}`, { headers: { Authorization: "Bearer " + apiKey } });
    if (!r.ok) throw new Error("evidence: HTTP " + r.status);
    const link = el("a", { href: URL.createObjectURL(await r.blob()), download: `evidence-${id}.${action}` });
    link.click();
    return;
  }
  const body = {};
  if (action === "assign") { const who = prompt("Assign to (analyst id)"); if (!who) return; body.assignee = who.trim(); }
  if (action === "close") { const note = prompt("Closing note"); if (!note) return; body.note = note; }
  const r = await fetch(`${base}/${action}`, { method: "POST", body: JSON.stringify(body), headers: {
    Authorization: "Bearer " + apiKey, "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() } });
  const answer = await r.json();
  if (!r.ok) showError(answer.detail || ("HTTP " + r.status));
  const shown = alerts.byId.get(id);
  if (shown && answer.status) { shown.status = answer.status; shown.assignee = answer.assignee; drawAlerts(); }
  await showAlert(id);
}

let pending = null;
function scheduleRefresh() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh().catch(showError); }, 200);
}

async function follow() {
  const live = document.getElementById("live");
  for (;;) {
    try {
      const r = await fetch("/v1/stream?max_seconds=600", { headers: { Authorization: "Bearer " + apiKey, Accept: "text/event-stream" } });
      if (r.status === 401 || r.status === 403) { showLogin(r.status === 401 ? "unknown API key" : "this key's role may not see the tables"); return; }
      if (!r.ok) throw new Error("stream: HTTP " + r.status);
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          const data = block.split("\n").filter(l => l.startsWith("data:")).map(l => l.slice(5)).join("\n");
          if (!data) continue;
          const { position } = JSON.parse(data);
          live.textContent = "live · offset " + position; live.className = "live on";
          scheduleRefresh();
        }
      }
    } catch (e) { live.textContent = "reconnecting"; live.className = "live off"; }
    if (apiKey === null) return;
    await new Promise(ok => setTimeout(ok, 2000));
  }
}

function showError(e) { if (e.shown) return; const p = document.getElementById("error"); p.textContent = String(e.message || e); p.hidden = false; }

function showLogin(why) {
  sessionStorage.removeItem("casino-ledger-key");
  apiKey = null;
  document.getElementById("main").hidden = true;
  document.getElementById("login").hidden = false;
  if (why) showError(why);
}

function start(key) {
  apiKey = key;
  sessionStorage.setItem("casino-ledger-key", key);
  document.getElementById("login").hidden = true;
  document.getElementById("error").hidden = true;
  document.getElementById("main").hidden = false;
  refresh().catch(showError);
  follow();
}

window.addEventListener("DOMContentLoaded", () => {
  const m = location.hash.match(/key=([^&]+)/);
  const size = location.hash.match(/page=(\d+)/);
  if (size) pageSize = Math.max(1, Math.min(500, Number(size[1])));
  document.getElementById("filters").addEventListener("change", () => followAlerts().catch(showError));
  document.querySelector("#alerts tbody").addEventListener("click", ev => {
    const row = ev.target.closest("tr[data-alert]");
    if (row) showAlert(row.dataset.alert).catch(showError);
  });
  if (m) history.replaceState(null, "", location.pathname);  // the key never stays in the address bar
  const key = m ? decodeURIComponent(m[1]) : sessionStorage.getItem("casino-ledger-key");
  document.getElementById("login").addEventListener("submit", ev => {
    ev.preventDefault();
    const v = document.getElementById("key").value.trim();
    if (v) start(v);
  });
  if (key) start(key); else showLogin();
});
