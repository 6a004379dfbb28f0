"use strict";
// The operator's page: the fabric with its link loads, the reservations
// over time, the jobs. It reads /v1/fabric once, /v1/status every second
// (link loads, queues), /v1/timeline every two seconds and whenever
// /v1/events says something changed. Everything it keeps is bounded (the
// last QUEUE_SAMPLES queue depths per link, the DOM redrawn, not grown),
// so a page left open stays the same size.

const SVG = "http://www.w3.org/2000/svg";
const QUEUE_SAMPLES = 120;
const MAX_ROWS = 80;
const MAX_BARS = 2000;
const STATUS_EVERY_MS = 1000;
const TIMELINE_EVERY_MS = 2000;

const page = {
  fabric: null,
  status: null,
  timeline: null,
  selected: null, // cable key
  queues: new Map(), // directed link id -> [{t, q}]
  stats: { renders: 0, events: 0, polls: 0, errors: 0 },
  refreshTimer: null,
};
window.foresight = page;

function el(tag, attrs, parent, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

function note(message) {
  document.getElementById("status-line").textContent = message;
}

// A cable is both directions of a link; its key names its two ends.
function cableKey(a, b) {
  return a < b ? `${a}|${b}` : `${b}|${a}`;
}

function utilColor(u) {
  if (u === undefined || u === null) return "#b7bec3";
  if (u < 0.5) return mix([76, 175, 80], [242, 182, 50], u / 0.5);
  return mix([242, 182, 50], [217, 65, 43], Math.min(1, (u - 0.5) / 0.5));
}

function mix(a, b, t) {
  const c = a.map((x, i) => Math.round(x + (b[i] - x) * t));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function rate(bps) {
  if (!bps) return "0";
  const units = [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]];
  for (const [u, v] of units) if (bps >= v) return `${(bps / v).toFixed(1)} ${u}bit/s`;
  return `${bps} bit/s`;
}

// ---- the fabric -------------------------------------------------------

function layout(fabric, width, height) {
  const tiers = [...new Set(fabric.switches.map((s) => s.tier))].sort((a, b) => b - a);
  const rows = tiers.length + 1; // and the hosts
  const pos = new Map();
  const rowY = (i) => 30 + (i * (height - 60)) / Math.max(1, rows - 1);
  tiers.forEach((tier, i) => {
    const here = fabric.switches
      .filter((s) => s.tier === tier)
      .sort((a, b) => a.pod - b.pod || a.name.localeCompare(b.name, undefined, { numeric: true }));
    here.forEach((s, j) => pos.set(s.name, { x: ((j + 0.5) * width) / here.length, y: rowY(i), kind: "switch" }));
  });
  const leaves = fabric.switches.filter((s) => s.tier === 1).map((s) => s.name);
  const hosts = [...fabric.hosts].sort(
    (a, b) => leaves.indexOf(a.leaf) - leaves.indexOf(b.leaf) || a.port - b.port,
  );
  hosts.forEach((h, j) => pos.set(h.name, { x: ((j + 0.5) * width) / hosts.length, y: rowY(rows - 1), kind: "host" }));
  return pos;
}

function cables(fabric) {
  const out = new Map();
  for (const l of fabric.links) {
    const a = `${l.from}:${l.from_port}`;
    const b = `${l.to}:${l.to_port}`;
    const key = cableKey(a, b);
    if (!out.has(key)) out.set(key, { key, a: l.from, b: l.to, ids: [], capacity: l.capacity_bps, host: false });
    out.get(key).ids.push(l.id);
  }
  const hosts = new Set(fabric.hosts.map((h) => h.name));
  for (const c of out.values()) c.host = hosts.has(c.a) || hosts.has(c.b);
  return [...out.values()];
}

function downCables(timeline) {
  const down = new Set();
  for (const text of (timeline && timeline.links_down) || []) {
    const [a, b] = text.split(" <-> ");
    if (a && b) down.add(cableKey(a.trim(), b.trim()));
  }
  return down;
}

function linkLoads(status) {
  const by = new Map();
  for (const l of (status && status.links) || []) by.set(l.link, l);
  return by;
}

function drawFabric() {
  const svg = document.getElementById("fabric");
  const fabric = page.fabric;
  if (!fabric) return;
  const width = svg.clientWidth || 600;
  const height = svg.clientHeight || 360;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  clear(svg);
  const pos = layout(fabric, width, height);
  const loads = linkLoads(page.status);
  const down = downCables(page.timeline);
  const wires = el("g", {}, svg);
  for (const c of cables(fabric)) {
    const p = pos.get(c.a);
    const q = pos.get(c.b);
    if (!p || !q) continue;
    if (c.host) {
      el("line", { class: "hostlink", x1: p.x, y1: p.y, x2: q.x, y2: q.y }, wires);
      continue;
    }
    const dirs = c.ids.map((id) => loads.get(id)).filter(Boolean);
    const util = dirs.length && dirs.some((d) => d.utilization !== null && d.utilization !== undefined)
      ? Math.max(...dirs.map((d) => d.utilization || 0))
      : null;
    const reserved = Math.max(0, ...dirs.map((d) => d.reserved_bps / Math.max(1, d.capacity_bps)));
    const g = el("g", {
      class: "link" + (page.selected === c.key ? " selected" : ""),
      "data-link": c.ids.join(" | "),
      "data-cable": c.key,
      "data-down": down.has(c.key) ? "true" : "false",
      "data-reserved": reserved.toFixed(3),
      "data-util": util === null ? "" : util.toFixed(3),
    }, wires);
    const d = `M ${p.x} ${p.y} L ${q.x} ${q.y}`;
    el("path", { class: "wire", d, stroke: utilColor(util) }, g);
    if (reserved > 0) el("path", { class: "held", d, "stroke-width": 3 + 9 * Math.min(1, reserved) }, g);
    el("path", { class: "hit", d }, g);
    const title = el("title", {}, g);
    title.textContent = `${c.ids.join("\n")}\nreserved ${(reserved * 100).toFixed(0)} %` +
      (util === null ? "" : `, measured ${(util * 100).toFixed(0)} %`) + (down.has(c.key) ? "\nDOWN" : "");
    g.addEventListener("click", () => select(c.key));
  }
  for (const [name, p] of pos) {
    if (p.kind === "switch") {
      const g = el("g", { class: "switch", "data-switch": name }, svg);
      el("rect", { x: p.x - 34, y: p.y - 11, width: 68, height: 22 }, g);
      el("text", { x: p.x, y: p.y }, g, name);
    } else {
      const g = el("g", { class: "host", "data-host": name }, svg);
      el("circle", { cx: p.x, cy: p.y, r: 5 }, g);
      el("text", { x: p.x, y: p.y + 14 }, g, name);
    }
  }
  drawLinkDetail();
}

function select(key) {
  page.selected = page.selected === key ? null : key;
  drawFabric();
}

function drawLinkDetail() {
  const box = document.getElementById("link-detail");
  const cable = page.fabric && cables(page.fabric).find((c) => c.key === page.selected);
  if (!cable) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  document.getElementById("link-title").textContent = `${cable.a} — ${cable.b}`;
  const loads = linkLoads(page.status);
  const table = document.getElementById("link-directions");
  table.innerHTML = "<tr><th>direction</th><th>capacity</th><th>reserved now</th><th>measured</th><th>queue</th></tr>";
  for (const id of cable.ids) {
    const l = loads.get(id);
    const row = table.insertRow();
    for (const text of [
      id,
      rate(cable.capacity),
      l ? rate(l.reserved_bps) : "0",
      l && l.utilization !== null && l.utilization !== undefined ? `${(l.utilization * 100).toFixed(0)} %` : "–",
      l && l.queue_packets !== null && l.queue_packets !== undefined ? String(l.queue_packets) : "–",
    ]) row.insertCell().textContent = text;
  }
  const list = document.getElementById("link-reservations");
  list.innerHTML = "";
  const now = page.timeline ? page.timeline.now_unix_ns : 0;
  for (const r of (page.timeline && page.timeline.reservations) || []) {
    const flows = r.flows.filter((f) => f.links.some((id) => cable.ids.includes(id)));
    if (!flows.length) continue;
    const li = document.createElement("li");
    li.dataset.reservation = r.id;
    const from = (Math.min(...flows.map((f) => f.start_unix_ns)) - now) / 1e9;
    const to = (Math.max(...flows.map((f) => f.end_unix_ns)) - now) / 1e9;
    li.textContent = `${r.id} (${r.state}${r.predicted ? ", predicted" : ""}): ${flows.length} flow(s), ` +
      `${rate(flows.reduce((s, f) => s + f.accepted_bps, 0))}, ${from.toFixed(1)} s to ${to.toFixed(1)} s`;
    list.appendChild(li);
  }
  if (!list.children.length) list.innerHTML = "<li>none in the window</li>";
  const spark = document.getElementById("link-queue");
  clear(spark);
  const samples = cable.ids.flatMap((id) => page.queues.get(id) || []);
  if (samples.length) {
    const w = spark.clientWidth || 300;
    const h = 44;
    const t0 = Math.min(...samples.map((s) => s.t));
    const t1 = Math.max(...samples.map((s) => s.t), t0 + 1);
    const qmax = Math.max(1, ...samples.map((s) => s.q));
    for (const id of cable.ids) {
      const pts = (page.queues.get(id) || [])
        .map((s) => `${((s.t - t0) / (t1 - t0)) * w},${h - (s.q / qmax) * (h - 4)}`)
        .join(" ");
      if (pts) el("polyline", { points: pts }, spark);
    }
    el("text", { x: 2, y: 10, "font-size": 10 }, spark, `max ${qmax}`);
  }
}

// ---- the timeline -------------------------------------------------------

function rowsOf(timeline, by) {
  const rows = new Map();
  const add = (key, bar) => {
    if (!rows.has(key)) rows.set(key, []);
    rows.get(key).push(bar);
  };
  for (const r of timeline.reservations) {
    if (by === "link") {
      for (const f of r.flows)
        for (const id of f.links) add(id, { r, start: f.start_unix_ns, end: f.end_unix_ns });
    } else {
      const job = r.job_id ? `${r.tenant}/${r.job_id}` : `${r.tenant}/${r.subject}`;
      add(job, { r, start: r.start_unix_ns, end: r.end_unix_ns });
    }
  }
  return [...rows.entries()].sort((a, b) => a[0].localeCompare(b[0], undefined, { numeric: true }));
}

function drawTimeline() {
  const svg = document.getElementById("timeline");
  const t = page.timeline;
  if (!t) return;
  const by = document.getElementById("group").value;
  const rows = rowsOf(t, by).slice(0, MAX_ROWS);
  const width = svg.clientWidth || 700;
  const label = 170;
  const rowH = 18;
  const top = 22;
  const height = top + Math.max(3, rows.length) * rowH + 8;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.style.height = `${height}px`;
  clear(svg);
  const span = Math.max(1, t.to_unix_ns - t.from_unix_ns);
  const x = (ns) => label + ((Math.min(Math.max(ns, t.from_unix_ns), t.to_unix_ns) - t.from_unix_ns) / span) * (width - label - 6);
  const axis = el("g", { class: "axis" }, svg);
  const seconds = span / 1e9;
  const step = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600].find((s) => seconds / s <= 12) || 900;
  const past = (t.now_unix_ns - t.from_unix_ns) / 1e9;
  for (let s = -Math.floor(past / step) * step; s <= seconds - past; s += step) {
    const ns = t.now_unix_ns + s * 1e9;
    el("line", { x1: x(ns), x2: x(ns), y1: top - 4, y2: height }, axis);
    el("text", { x: x(ns), y: 10 }, axis, `${s > 0 ? "+" : ""}${s} s`);
  }
  let bars = 0;
  rows.forEach(([key, items], i) => {
    const y = top + i * rowH;
    el("text", { class: "row-label", x: 4, y: y + rowH / 2 }, svg, key.length > 28 ? key.slice(0, 27) + "…" : key);
    for (const item of items) {
      if (bars++ >= MAX_BARS) return;
      const { r } = item;
      const g = el("g", {
        class: `bar ${r.state}${r.predicted ? " predicted" : ""}`,
        "data-reservation": r.id,
        "data-state": r.state,
        "data-row": key,
      }, svg);
      const x0 = x(item.start);
      const x1 = Math.max(x0 + 2, x(item.end));
      el("rect", { x: x0, y: y + 2, width: x1 - x0, height: rowH - 4, rx: 2 }, g);
      if (x1 - x0 > 60) el("text", { x: x0 + 3, y: y + rowH / 2 }, g, r.id);
      if (r.revision > 1) el("text", { class: "moved", x: x0 - 9, y: y + rowH / 2 + 4 }, g, "↻");
      const title = el("title", {}, g);
      title.textContent = `${r.id} — ${r.status}, ${r.state}${r.predicted ? ", predicted" : ""}, revision ${r.revision}` +
        (r.advisory ? `\n${r.advisory}` : "") +
        `\n${r.flows.length} flow(s): ${[...new Set(r.flows.map((f) => f.held_by))].join(", ")}`;
    }
  });
  const nowG = el("g", { class: "now" }, svg);
  el("line", { x1: x(t.now_unix_ns), x2: x(t.now_unix_ns), y1: top - 6, y2: height }, nowG);
  document.getElementById("window-label").textContent =
    `${rows.length} ${by === "link" ? "links" : "jobs"}, ${t.reservations.length} reservations, last ${past.toFixed(0)} s and next ${(seconds - past).toFixed(0)} s`;
}

function drawJobs() {
  const body = document.querySelector("#jobs tbody");
  body.innerHTML = "";
  for (const j of (page.timeline && page.timeline.jobs) || []) {
    const row = body.insertRow();
    row.dataset.job = `${j.tenant}/${j.job_id}`;
    const l = j.learning;
    const period = l && (l.period_s !== null && l.period_s !== undefined
      ? `${l.period_s.toFixed(3)} s`
      : l.gap_s !== null && l.gap_s !== undefined ? `gap ${l.gap_s.toFixed(3)} s` : "–");
    for (const text of [j.tenant, j.job_id, String(j.generation), l ? l.state : "not learned",
      period || "–", l ? String(l.observed) : "–", l ? String(l.reserved_ahead) : "–"]) {
      row.insertCell().textContent = text;
    }
  }
}

function render() {
  drawFabric();
  drawTimeline();
  drawJobs();
  page.stats.renders += 1;
  if (page.fabric && page.timeline && page.status) document.body.dataset.ready = "1";
}

// ---- reading the controller ----------------------------------------------

function windowQuery() {
  const clamp = (id, d) => Math.min(3600, Math.max(1, Number(document.getElementById(id).value) || d));
  return `past_s=${clamp("past", 30)}&ahead_s=${clamp("ahead", 60)}`;
}

let statusBusy = false;
async function pollStatus() {
  if (statusBusy) return;
  statusBusy = true;
  try {
    page.status = await getJson("/v1/status");
    page.stats.polls += 1;
    const t = Date.now();
    for (const l of page.status.links || []) {
      if (l.queue_packets === null || l.queue_packets === undefined) continue;
      const samples = page.queues.get(l.link) || [];
      samples.push({ t, q: l.queue_packets });
      if (samples.length > QUEUE_SAMPLES) samples.splice(0, samples.length - QUEUE_SAMPLES);
      page.queues.set(l.link, samples);
    }
    document.getElementById("clock").textContent = new Date(page.status.controller.now_unix_ns / 1e6).toLocaleTimeString();
    drawFabric();
  } catch (e) {
    page.stats.errors += 1;
    note(String(e));
  } finally {
    statusBusy = false;
  }
}

let timelineBusy = false;
async function pollTimeline() {
  if (timelineBusy) return;
  timelineBusy = true;
  try {
    page.timeline = await getJson(`/v1/timeline?${windowQuery()}`);
    render();
  } catch (e) {
    page.stats.errors += 1;
    note(String(e));
  } finally {
    timelineBusy = false;
  }
}

function soon() {
  if (page.refreshTimer) return;
  page.refreshTimer = setTimeout(async () => {
    page.refreshTimer = null;
    await pollStatus();
    await pollTimeline();
  }, 200);
}

function listen() {
  const live = document.getElementById("live");
  const events = new EventSource("/v1/events");
  events.onopen = () => {
    live.dataset.live = "open";
    live.textContent = "live";
    soon();
  };
  events.onerror = () => {
    live.dataset.live = "closed";
    live.textContent = "reconnecting";
  };
  for (const kind of ["reservation", "link", "prediction_withdrawn", "mismatch", "resync"]) {
    events.addEventListener(kind, (e) => {
      page.stats.events += 1;
      note(`${new Date().toLocaleTimeString()} ${kind}: ${e.data}`);
      soon();
    });
  }
  // A commit that changed anything (fabric-wide viewers only): redraw, quietly.
  events.addEventListener("state", () => {
    page.stats.events += 1;
    soon();
  });
}

async function start() {
  try {
    page.fabric = await getJson("/v1/fabric");
    document.getElementById("fabric-name").textContent = page.fabric.fabric;
  } catch (e) {
    note(`cannot read the fabric: ${e}`);
    return;
  }
  for (const id of ["past", "ahead", "group"]) document.getElementById(id).addEventListener("change", soon);
  window.addEventListener("resize", render);
  await pollStatus();
  await pollTimeline();
  listen();
  setInterval(pollStatus, STATUS_EVERY_MS);
  setInterval(pollTimeline, TIMELINE_EVERY_MS);
}

start();
