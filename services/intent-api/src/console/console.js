// kplane console: plain JavaScript, no build step. Data from the intent API with the bearer
// token given in the URL fragment (#token=…), which never reaches a server log.
"use strict";

const token = new URLSearchParams(location.hash.slice(1)).get("token") || localStorage.getItem("kplane-token") || "";
if (token) localStorage.setItem("kplane-token", token);
const headers = token ? { Authorization: "Bearer " + token } : {};

async function api(path) {
  const r = await fetch(path, { headers });
  if (r.status === 401 || r.status === 403) {
    document.getElementById("auth-error").hidden = false;
    throw new Error("unauthorised");
  }
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

const el = (id) => document.getElementById(id);
const svgNs = "http://www.w3.org/2000/svg";
function svg(tag, attrs, parent) {
  const e = document.createElementNS(svgNs, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

// Green → red for a 0..1 load.
function heat(x) {
  const v = Math.max(0, Math.min(1, x || 0));
  return `hsl(${Math.round(120 - 120 * v)}, 70%, 45%)`;
}

function drawTopology(live) {
  const root = el("topology");
  const occupancy = new Map();
  for (const q of live.queues) {
    occupancy.set(q.node_id, Math.max(occupancy.get(q.node_id) || 0, q.occupancy_max || 0));
  }
  const edges = new Map();
  for (const l of live.links) {
    if (l.next_node_id == null) continue;
    const [a, b] = [l.node_id, l.next_node_id].sort((x, y) => x - y);
    const key = a + "-" + b;
    edges.set(key, { a, b, util: Math.max(edges.get(key)?.util || 0, l.tx_utilization_mean || 0) });
  }
  const nodes = [...new Set([...occupancy.keys(), ...[...edges.values()].flatMap((e) => [e.a, e.b])])].sort((x, y) => x - y);
  if (nodes.length === 0) return;
  const pos = new Map();
  nodes.forEach((n, i) => {
    const t = (2 * Math.PI * i) / nodes.length - Math.PI / 2;
    pos.set(n, [300 + 180 * Math.cos(t), 210 + 180 * Math.sin(t)]);
  });
  root.replaceChildren();
  for (const e of edges.values()) {
    const [x1, y1] = pos.get(e.a), [x2, y2] = pos.get(e.b);
    const line = svg("line", { x1, y1, x2, y2, stroke: heat(e.util / 1000), "stroke-width": 2 + (6 * e.util) / 1000, class: "link" }, root);
    svg("title", {}, line).textContent = `${e.a} – ${e.b}: tx utilisation ${(e.util / 10).toFixed(1)} %`;
  }
  for (const n of nodes) {
    const [cx, cy] = pos.get(n);
    const occ = occupancy.get(n) || 0;
    const c = svg("circle", { cx, cy, r: 14, fill: heat(occ / 64), stroke: "#1d2330", class: "switch", "data-node": n }, root);
    svg("title", {}, c).textContent = `switch ${n}: queue occupancy max ${occ}`;
    svg("text", { x: cx, y: cy + 4, "text-anchor": "middle", "font-size": 11, fill: "#fff" }, root).textContent = n;
  }
}

const history = { latency: [], occupancy: [] };
function plot(id, values) {
  const root = el(id);
  root.replaceChildren();
  if (values.length < 2) return;
  const max = Math.max(...values, 1);
  const pts = values.map((v, i) => `${(i * 400) / (values.length - 1)},${100 - (95 * v) / max}`).join(" ");
  svg("polyline", { points: pts, fill: "none", stroke: "#3367d6", "stroke-width": 1.5, "vector-effect": "non-scaling-stroke" }, root);
}

async function refreshLive() {
  try {
    const live = await api("/v1/live");
    el("status").textContent = "live " + new Date().toLocaleTimeString();
    el("windows-seen").textContent = live.windows_seen;
    el("alerts-seen").textContent = live.alerts_seen;
    drawTopology(live);
    const p50 = live.hop_latency.map((h) => h.p50_ns).filter((v) => v != null);
    const latency = p50.length ? p50.reduce((a, b) => a + b, 0) / p50.length : 0;
    const occupancy = Math.max(0, ...live.queues.map((q) => q.occupancy_max || 0));
    el("latency-now").textContent = Math.round(latency);
    el("occupancy-now").textContent = occupancy;
    for (const [k, v] of [["latency", latency], ["occupancy", occupancy]]) {
      history[k].push(v);
      if (history[k].length > 120) history[k].shift();
    }
    plot("latency-chart", history.latency);
    plot("occupancy-chart", history.occupancy);
  } catch (e) {
    el("status").textContent = "disconnected";
  }
}

function flowId(f) {
  return [f.src_ip, f.src_port, f.dst_ip, f.dst_port, f.protocol].join(",");
}

async function refreshFlows() {
  const q = el("flow-search").value.trim();
  const params = new URLSearchParams({ since: "5m", limit: "50", sort: "latency" });
  if (q) params.set("src", q);
  try {
    const { flows } = await api("/v1/flows?" + params);
    const body = el("flows").tBodies[0];
    body.replaceChildren();
    for (const f of flows) {
      const tr = body.insertRow();
      for (const v of [`${f.src_ip}:${f.src_port}`, `${f.dst_ip}:${f.dst_port}`, f.protocol, f.reports, f.bytes, f.latency_max_ns, (f.path || []).join(" → ")]) {
        tr.insertCell().textContent = v;
      }
      tr.onclick = () => showPath(flowId(f));
    }
  } catch (e) {
    /* a bad filter or no data yet: keep the table */
  }
}

async function showPath(id) {
  const d = el("flow-detail");
  d.hidden = false;
  d.textContent = "loading " + id + "…";
  try {
    const { windows } = await api(`/v1/flows/${encodeURIComponent(id)}/path?since=5m`);
    d.replaceChildren();
    const h = document.createElement("b");
    h.textContent = id;
    d.appendChild(h);
    for (const w of windows.slice(-10)) {
      const line = document.createElement("div");
      const hops = w.hops.map((x) => `${x.node_id} (p50 ${x.p50_ns} / p99 ${x.p99_ns} ns)`).join(" → ");
      line.textContent = `${w.window_start}${w.path_changed ? " [path changed]" : ""}: ${hops}`;
      d.appendChild(line);
    }
  } catch (e) {
    d.textContent = "no path for " + id;
  }
}

// What a switch status says, shortened for a table cell.
function switchSummary(switches) {
  const all = Object.entries(switches || {});
  const installed = all.filter(([, s]) => s === "installed").length;
  const other = all.filter(([, s]) => s !== "installed").map(([n, s]) => `${n}: ${s}`);
  return { text: `${installed}/${all.length} installed`, title: other.join("\n") || "every switch holds its entries" };
}

async function approve(id) {
  const msg = el("intent-message");
  try {
    const r = await fetch(`/v1/intents/${encodeURIComponent(id)}/approve`, { method: "POST", headers });
    const v = await r.json();
    msg.hidden = r.ok;
    if (!r.ok) msg.textContent = `${id}: ${v.error || r.status}`;
  } catch (e) {
    msg.hidden = false;
    msg.textContent = `${id}: ${e}`;
  }
  refreshIntents();
}

async function refreshIntents() {
  try {
    const { intents } = await api("/v1/intents");
    const body = el("intents").tBodies[0];
    body.replaceChildren();
    // Open ones first (pending approval on top), newest first; the last 20 ended ones after.
    const rank = (i) => (i.state === "pending-approval" ? 0 : ["applying", "verifying", "active"].includes(i.state) ? 1 : 2);
    const rows = intents.slice().sort((a, b) => rank(a) - rank(b) || b.created_ms - a.created_ms);
    let ended = 0;
    for (const i of rows) {
      if (rank(i) === 2 && ++ended > 20) break;
      const tr = body.insertRow();
      tr.dataset.id = i.id;
      tr.title = (i.expected_effect || "") + (i.evidence && i.evidence.length ? "\n" + i.evidence.join("\n") : "");
      const sw = switchSummary(i.switches);
      const cells = [i.id, i.spec.kind, i.state, sw.text, i.spec.owner || i.submitted_by, i.spec.reason || ""];
      cells.forEach((v, n) => {
        const td = tr.insertCell();
        td.textContent = v;
        if (n === 2) td.className = "state-" + i.state;
        if (n === 3) td.title = sw.title;
      });
      const action = tr.insertCell();
      if (i.state === "pending-approval") {
        const b = document.createElement("button");
        b.textContent = "Approve";
        b.className = "approve";
        b.onclick = () => approve(i.id);
        action.appendChild(b);
      }
    }
  } catch (e) {
    /* shown by the status */
  }
}

function addEvent(a) {
  const li = document.createElement("li");
  const k = document.createElement("span");
  k.className = "kind";
  k.textContent = a.kind;
  li.appendChild(k);
  const what = a.src_ip ? `${a.src_ip}:${a.src_port} → ${a.dst_ip}:${a.dst_port}` : `switch ${a.node_id}` + (a.queue_id != null ? ` queue ${a.queue_id}` : "");
  const extra = a.path && a.path.length ? " path " + a.path.join("-") : "";
  li.appendChild(document.createTextNode(`${what}${a.value != null ? " value " + a.value : ""}${extra}`));
  const list = el("events");
  list.prepend(li);
  while (list.children.length > 200) list.lastChild.remove();
}

// Server-sent events through fetch, so that the bearer token can be sent.
async function streamEvents() {
  for (;;) {
    try {
      const r = await fetch("/v1/events/stream", { headers });
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const msg = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = msg.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).join("");
          if (data) addEvent(JSON.parse(data));
        }
      }
    } catch (e) {
      /* reconnect below */
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const time = (ns) => new Date(ns / 1e6).toLocaleTimeString();

async function refreshAnomalies() {
  try {
    const models = await api("/v1/models");
    el("models-status").textContent = `models: ${models.status}` + (models.version ? ` v${models.version}` : "") + (models.message ? ` — ${models.message}` : "");
    const { anomalies } = await api("/v1/anomalies?limit=30");
    const body = el("anomalies").tBodies[0];
    body.replaceChildren();
    for (const a of anomalies) {
      const tr = body.insertRow();
      tr.dataset.id = a.id;
      const open = a.end_ns == null;
      const cells = [time(a.start_ns), a.type, `${a.entity_kind} ${a.entity}`, `${a.score.toFixed(1)} / ${a.threshold.toFixed(1)}`, open ? "open" : "closed", a.summary];
      cells.forEach((v, n) => {
        const td = tr.insertCell();
        td.textContent = v;
        if (n === 4 && open) td.className = "open";
      });
      tr.onclick = () => showAnomaly(a.id);
    }
  } catch (e) {
    /* shown by the status */
  }
}

async function showAnomaly(id) {
  const d = el("anomaly-detail");
  d.hidden = false;
  try {
    const a = await api(`/v1/anomalies/${encodeURIComponent(id)}`);
    const b = a.explanation.blast_radius;
    const lines = [
      a.explanation.summary,
      "features: " + a.explanation.features.slice(0, 5).map((f) => `${f.name} ${f.value.toFixed(1)} (normal ${f.normal.toFixed(1)}, z ${f.z.toFixed(1)})`).join("; "),
      `blast radius: ${b.flows_total} flows over switches ${b.nodes.join(", ")}; ${b.other_flows} other flows share them`,
      "recommended: " + (a.recommendations.map((r) => r.reason || r.kind).join("; ") || "nothing"),
      "intents: " + (a.intents.map((i) => `${i.id} ${i.kind} (${i.state})`).join(", ") || "none"),
    ];
    d.textContent = lines.join("\n");
  } catch (e) {
    d.textContent = "no anomaly " + id;
  }
}

// Predicted (dashed) against actual (solid) for one link, on one scale.
async function refreshForecast() {
  try {
    const select = el("forecast-entity");
    const { forecasts } = await api("/v1/forecasts?series=link_utilization&windows=120");
    const entities = forecasts.map((f) => f.entity).sort();
    if (select.options.length !== entities.length) {
      const keep = select.value;
      select.replaceChildren(...entities.map((e) => new Option(`link ${e}`, e)));
      if (entities.includes(keep)) select.value = keep;
    }
    const f = forecasts.find((x) => x.entity === select.value);
    const root = el("forecast-chart");
    root.replaceChildren();
    if (!f || f.points.length < 2) return;
    const pts = f.points;
    const max = Math.max(1, ...pts.map((p) => Math.max(p.predicted, p.actual ?? 0)));
    const x = (i) => (i * 400) / (pts.length - 1);
    const y = (v) => 115 - (110 * v) / max;
    const line = (values, attrs) => {
      const xy = values.map((v, i) => (v == null ? null : `${x(i)},${y(v)}`)).filter(Boolean).join(" ");
      svg("polyline", { points: xy, fill: "none", "stroke-width": 1.5, "vector-effect": "non-scaling-stroke", ...attrs }, root);
    };
    line(pts.map((p) => p.actual), { stroke: "#1d2330", class: "actual" });
    line(pts.map((p) => p.predicted), { stroke: "#3367d6", "stroke-dasharray": "4 3", class: "predicted" });
    const scored = pts.filter((p) => p.actual != null && p.actual > 0);
    const mape = (k) => (100 * scored.reduce((s, p) => s + Math.abs(p[k] - p.actual) / p.actual, 0)) / Math.max(1, scored.length);
    el("forecast-error").textContent = scored.length ? `over ${scored.length} windows: error ${mape("predicted").toFixed(1)} % (EWMA ${mape("ewma").toFixed(1)} %), max ${max.toFixed(0)} ‰` : "";
  } catch (e) {
    /* shown by the status */
  }
}

async function start() {
  try {
    const { events } = await api("/v1/events?live=true&limit=50");
    events.reverse().forEach(addEvent);
  } catch (e) {
    /* shown by the status */
  }
  refreshLive();
  refreshFlows();
  refreshIntents();
  setInterval(refreshLive, 1000);
  setInterval(refreshIntents, 2000);
  setInterval(refreshFlows, 5000);
  refreshAnomalies();
  refreshForecast();
  setInterval(refreshAnomalies, 2000);
  setInterval(refreshForecast, 2000);
  el("forecast-entity").addEventListener("change", refreshForecast);
  el("flow-search").addEventListener("change", refreshFlows);
  streamEvents();
}
start();
