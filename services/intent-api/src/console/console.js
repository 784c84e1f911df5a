// kplane console: plain JavaScript, no build step. Data from the intent API with the bearer
// token given in the URL fragment (#token=…), which never reaches a server log. The token is
// taken out of the address bar at once and kept for this tab's session only.
"use strict";

const fragment = new URLSearchParams(location.hash.slice(1));
const token = fragment.get("token") || sessionStorage.getItem("kplane-token") || "";
// `#incident=<id>`: the link an Alertmanager notification carries.
const linkedIncident = fragment.get("incident");
if (token) sessionStorage.setItem("kplane-token", token);
if (location.hash.includes("token=")) history.replaceState(null, "", location.pathname + location.search);
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

// Roles from the telemetry: switches at either end of a flow's path face hosts (edge / leaf);
// the others are ranked by hops from them (aggregation, then core; or spine). A graph whose
// links do not all join adjacent layers (a Watts–Strogatz graph) gets a force layout.
function layers(nodes, edges, paths) {
  const adj = new Map(nodes.map((n) => [n, []]));
  for (const e of edges) {
    adj.get(e.a)?.push(e.b);
    adj.get(e.b)?.push(e.a);
  }
  const edge = new Set();
  for (const p of paths) {
    if (p.length) {
      edge.add(p[0]);
      edge.add(p[p.length - 1]);
    }
  }
  const depth = new Map();
  let frontier = [...edge].filter((n) => adj.has(n));
  frontier.forEach((n) => depth.set(n, 0));
  while (frontier.length) {
    const next = [];
    for (const n of frontier) {
      for (const m of adj.get(n)) {
        if (!depth.has(m)) {
          depth.set(m, depth.get(n) + 1);
          next.push(m);
        }
      }
    }
    frontier = next;
  }
  const max = Math.max(0, ...depth.values());
  const layered = edge.size > 0 && max >= 1 && depth.size === nodes.length
    && edges.every((e) => Math.abs(depth.get(e.a) - depth.get(e.b)) === 1);
  if (!layered) return null;
  const names = max === 1 ? ["leaf", "spine"] : ["edge", "aggregation", "core"];
  const role = (d) => names[Math.min(d, names.length - 1)];
  return { depth, max, role };
}

// A deterministic spring layout (no layers): 300 steps from a circle.
function forceLayout(nodes, edges) {
  const pos = new Map(nodes.map((n, i) => {
    const t = (2 * Math.PI * i) / nodes.length;
    return [n, [300 + 150 * Math.cos(t), 210 + 150 * Math.sin(t)]];
  }));
  for (let step = 0; step < 300; step++) {
    const force = new Map(nodes.map((n) => [n, [0, 0]]));
    for (const a of nodes) {
      for (const b of nodes) {
        if (a === b) continue;
        const [ax, ay] = pos.get(a), [bx, by] = pos.get(b);
        const dx = ax - bx, dy = ay - by, d2 = Math.max(dx * dx + dy * dy, 25);
        force.get(a)[0] += (2000 * dx) / d2;
        force.get(a)[1] += (2000 * dy) / d2;
      }
    }
    for (const e of edges) {
      const [ax, ay] = pos.get(e.a), [bx, by] = pos.get(e.b);
      force.get(e.a)[0] += (bx - ax) * 0.02; force.get(e.a)[1] += (by - ay) * 0.02;
      force.get(e.b)[0] += (ax - bx) * 0.02; force.get(e.b)[1] += (ay - by) * 0.02;
    }
    for (const n of nodes) {
      const [x, y] = pos.get(n), [fx, fy] = force.get(n);
      pos.set(n, [Math.max(20, Math.min(580, x + Math.max(-5, Math.min(5, fx)))), Math.max(20, Math.min(400, y + Math.max(-5, Math.min(5, fy))))]);
    }
  }
  return pos;
}

// Links seen before and absent now, while both their switches still report: failed.
const seenLinks = new Map();
let selectedSwitch = null;
// The incident shown: its switches and links are highlighted on the topology.
let highlight = { nodes: new Set(), links: new Set() };
let lastLive = null;

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
  const now = Date.now();
  for (const [k, e] of edges) seenLinks.set(k, { ...e, at: now });
  const reporting = new Set([...occupancy.keys(), ...live.links.map((l) => l.node_id)]);
  const failed = [...seenLinks.entries()]
    .filter(([k, e]) => !edges.has(k) && now - e.at > 3000 && reporting.has(e.a) && reporting.has(e.b))
    .map(([, e]) => e);
  const all = [...edges.values(), ...failed];
  const nodes = [...new Set([...occupancy.keys(), ...all.flatMap((e) => [e.a, e.b])])].sort((x, y) => x - y);
  if (nodes.length === 0) return;
  const paths = live.flows.map((f) => f.path || []);
  const lay = layers(nodes, all, paths);
  let pos;
  if (lay) {
    pos = new Map();
    for (let d = 0; d <= lay.max; d++) {
      const row = nodes.filter((n) => lay.depth.get(n) === d);
      const y = 380 - (d * 330) / Math.max(1, lay.max);
      row.forEach((n, i) => pos.set(n, [90 + ((i + 0.5) * 500) / row.length, y]));
    }
  } else {
    pos = forceLayout(nodes, all);
  }
  root.replaceChildren();
  if (lay) {
    for (let d = 0; d <= lay.max; d++) {
      svg("text", { x: 4, y: 384 - (d * 330) / Math.max(1, lay.max), class: "role-label" }, root).textContent = lay.role(d);
    }
  }
  for (const e of all) {
    const [x1, y1] = pos.get(e.a), [x2, y2] = pos.get(e.b);
    const down = !edges.has(e.a + "-" + e.b);
    const line = svg("line", { x1, y1, x2, y2, stroke: down ? "#c62828" : heat(e.util / 1000), "stroke-width": down ? 2 : 2 + (6 * e.util) / 1000, class: (down ? "link failed" : "link") + (highlight.links.has(`${e.a}-${e.b}`) ? " incident" : ""), "data-link": `${e.a}-${e.b}` }, root);
    line.addEventListener("click", () => selectLink(e.a, e.b));
    svg("title", {}, line).textContent = down ? `${e.a} – ${e.b}: no telemetry for ${((now - seenLinks.get(e.a + "-" + e.b).at) / 1000).toFixed(0)} s (failed?)` : `${e.a} – ${e.b}: tx utilisation ${(e.util / 10).toFixed(1)} %`;
  }
  for (const n of nodes) {
    const [cx, cy] = pos.get(n);
    const occ = occupancy.get(n) || 0;
    const role = lay ? lay.role(lay.depth.get(n)) : "switch";
    const c = svg("circle", { cx, cy, r: 13, fill: heat(occ / 64), stroke: "#1d2330", class: "switch" + (n === selectedSwitch ? " selected" : "") + (highlight.nodes.has(n) ? " incident" : ""), "data-node": n, "data-role": role }, root);
    svg("title", {}, c).textContent = `${role} switch ${n}: worst queue occupancy ${occ}`;
    c.addEventListener("click", () => selectSwitch(n));
    svg("text", { x: cx, y: cy + 4, "text-anchor": "middle", "font-size": 11, fill: "#fff", "pointer-events": "none" }, root).textContent = n;
  }
}

// A time-series chart with axes: `series` is [{name, points: [[t_ms, value]…]}].
const palette = ["#3367d6", "#c62828", "#1a7f37", "#b36b00", "#7b1fa2", "#00838f", "#5d4037", "#455a64"];
function chart(id, series, unit) {
  const root = el(id);
  root.replaceChildren();
  const pts = series.flatMap((s) => s.points);
  if (pts.length < 2) {
    svg("text", { x: 200, y: 70, "text-anchor": "middle" }, root).textContent = "no data in this range yet";
    return;
  }
  const [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  const max = Math.max(1, ...pts.map((p) => p[1]));
  const L = 46, R = 395, T = 8, B = 120;
  const x = (t) => L + ((t - x0) * (R - L)) / Math.max(1, x1 - x0);
  const y = (v) => B - ((B - T) * v) / max;
  svg("line", { x1: L, y1: B, x2: R, y2: B, class: "axis" }, root);
  svg("line", { x1: L, y1: T, x2: L, y2: B, class: "axis" }, root);
  const fmt = (v) => (v >= 1e6 ? (v / 1e6).toFixed(1) + "M" : v >= 1e3 ? (v / 1e3).toFixed(1) + "k" : v.toFixed(v < 10 ? 1 : 0));
  for (const v of [0, max / 2, max]) {
    svg("text", { x: L - 3, y: y(v) + 3, "text-anchor": "end", class: "tick-y" }, root).textContent = fmt(v);
  }
  svg("text", { x: 2, y: T + 2, class: "unit" }, root).textContent = unit;
  const clock = (t) => new Date(t).toLocaleTimeString();
  svg("text", { x: L, y: B + 13, class: "tick-x" }, root).textContent = clock(x0);
  svg("text", { x: R, y: B + 13, "text-anchor": "end", class: "tick-x" }, root).textContent = clock(x1);
  series.forEach((s, i) => {
    if (s.points.length < 1) return;
    const xy = s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
    svg("polyline", { points: xy, fill: "none", stroke: palette[i % palette.length], "stroke-width": 1.5, class: "series-line" }, root);
    if (series.length > 1) {
      svg("text", { x: R - 4, y: T + 10 + 10 * i, "text-anchor": "end", fill: palette[i % palette.length] }, root).textContent = s.name;
    }
  });
}

// The fabric series: live (from the in-memory windows) or from the store for 5 min / 1 h.
let range = "live";
const recent = { latency: [], occupancy: [] };

// One query in flight at a time: the API limits each token's concurrent queries
// (`query-concurrency`, 2 by default), and a range change asks for several at once.
let queries = Promise.resolve();
function query(sql) {
  const run = queries.then(async () => {
    const r = await fetch("/v1/query", { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ sql }) });
    if (!r.ok) throw new Error("query: " + r.status);
    return (await r.json()).rows;
  });
  queries = run.catch(() => {});
  return run;
}

// The selected range as a SQL condition on `window_start` (live: the last 5 minutes).
function rangeWhere() {
  if (range === "custom") {
    const iso = (id) => new Date(el(id).value).toISOString();
    if (el("range-from").value && el("range-to").value) {
      return `window_start >= TIMESTAMP '${iso("range-from")}' AND window_start < TIMESTAMP '${iso("range-to")}'`;
    }
  }
  return `window_start >= now() - INTERVAL '${range === "1h" ? "1 hour" : "5 minutes"}'`;
}

async function loadHistory() {
  if (range === "live") return;
  const since = rangeWhere();
  try {
    const lat = await query(`SELECT CAST(window_start AS BIGINT) / 1000000 AS t, avg(p50_ns) AS v FROM hop_latency WHERE ${since} GROUP BY window_start ORDER BY window_start`);
    const occ = await query(`SELECT CAST(window_start AS BIGINT) / 1000000 AS t, max(occupancy_max) AS v FROM queues WHERE ${since} GROUP BY window_start ORDER BY window_start`);
    if (range === "live") return;
    chart("latency-chart", [{ name: "p50", points: lat.map((r) => [r.t, r.v]) }], "ns");
    chart("occupancy-chart", [{ name: "max", points: occ.map((r) => [r.t, r.v]) }], "packets");
    el("series-panel").dataset.loaded = range;
  } catch (e) {
    /* shown by the status */
  }
}

function setRange(r) {
  range = r;
  el("custom-range").hidden = r !== "custom";
  if (r === "custom" && !el("range-from").value) {
    // Local time for the inputs: the last 15 minutes to begin with.
    const local = (ms) => new Date(ms - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16);
    el("range-from").value = local(Date.now() - 900000);
    el("range-to").value = local(Date.now() + 60000);
  }
  for (const b of document.querySelectorAll("#range button")) b.classList.toggle("active", b.dataset.range === r);
  delete el("series-panel").dataset.loaded;
  const label = { live: "last 5 min", "5m": "last 5 min", "1h": "last hour", custom: "custom range" }[r];
  for (const s of document.querySelectorAll(".range-label")) s.textContent = label;
  loadHistory();
  if (selectedSwitch != null) loadSwitch(selectedSwitch);
  const link = el("link-detail");
  if (!link.hidden) {
    const [a, b] = link.dataset.link.split("-").map(Number);
    selectLink(a, b);
  }
}

async function refreshLive() {
  try {
    const live = await api("/v1/live");
    lastLive = live;
    el("status").textContent = "live " + new Date().toLocaleTimeString();
    el("windows-seen").textContent = live.windows_seen;
    el("alerts-seen").textContent = live.alerts_seen;
    drawTopology(live);
    const p50 = live.hop_latency.map((h) => h.p50_ns).filter((v) => v != null);
    const latency = p50.length ? p50.reduce((a, b) => a + b, 0) / p50.length : 0;
    const occupancy = Math.max(0, ...live.queues.map((q) => q.occupancy_max || 0));
    el("latency-now").textContent = Math.round(latency);
    el("occupancy-now").textContent = occupancy;
    const t = Date.now();
    for (const [k, v] of [["latency", latency], ["occupancy", occupancy]]) {
      recent[k].push([t, v]);
      while (recent[k].length && recent[k][0][0] < t - 300000) recent[k].shift();
    }
    if (range === "live") {
      chart("latency-chart", [{ name: "p50", points: recent.latency }], "ns");
      chart("occupancy-chart", [{ name: "max", points: recent.occupancy }], "packets");
    }
    if (selectedSwitch != null) switchNow(live);
  } catch (e) {
    el("status").textContent = "disconnected";
  }
}

// ---- a link's drill-down --------------------------------------------------------------------

// Its utilisation in each direction over the selected range (the links table: each switch's
// egress port towards the other), and the flows whose latest path crosses it.
async function selectLink(a, b) {
  const d = el("link-detail");
  d.hidden = false;
  d.dataset.link = `${a}-${b}`;
  el("link-title").textContent = `Link ${a} – ${b}`;
  const flows = (lastLive ? lastLive.flows : []).filter((f) => {
    const p = f.path || [];
    return p.some((n, i) => i > 0 && ((p[i - 1] === a && n === b) || (p[i - 1] === b && n === a)));
  });
  el("link-flows").textContent = `flows on it in the latest windows: ${flows.length}` + (flows.length ? " — " + flows.slice(0, 8).map((f) => `port ${f.src_port}→${f.dst_port} via ${(f.path || []).join("-")}`).join(", ") : "");
  const since = rangeWhere();
  try {
    const rows = await query(`SELECT CAST(window_start AS BIGINT) / 1000000 AS t, node_id, next_node_id, max(tx_utilization_mean) AS v FROM links WHERE ${since} AND ((node_id = ${a} AND next_node_id = ${b}) OR (node_id = ${b} AND next_node_id = ${a})) GROUP BY window_start, node_id, next_node_id ORDER BY window_start`);
    const series = [[a, b], [b, a]].map(([x, y]) => ({ name: `${x}→${y}`, points: rows.filter((r) => r.node_id === x).map((r) => [r.t, r.v / 10]) }));
    chart("link-chart", series, "% tx");
  } catch (e) {
    chart("link-chart", [], "% tx");
  }
}

// ---- a switch's drill-down ------------------------------------------------------------------

function selectSwitch(n) {
  selectedSwitch = n;
  el("switch-detail").hidden = false;
  el("switch-detail").dataset.node = n;
  el("switch-title").textContent = `Switch ${n}`;
  for (const c of document.querySelectorAll("#topology circle.switch")) c.classList.toggle("selected", Number(c.dataset.node) === n);
  if (lastLive) switchNow(lastLive);
  loadSwitch(n);
}

// What the latest window says about the selected switch (refreshed every second).
function switchNow(live) {
  const n = selectedSwitch;
  const queues = live.queues.filter((q) => q.node_id === n);
  el("switch-occupancy").textContent = queues.length ? Math.max(...queues.map((q) => q.occupancy_max || 0)) : "–";
  const ends = queues.map((q) => q.window_end).filter(Boolean).sort();
  el("switch-window").textContent = ends.length ? ends[ends.length - 1] : "–";
  const links = live.links.filter((l) => l.node_id === n);
  el("switch-links").textContent = "ports: " + (links.map((l) => `${l.egress_port}→${l.next_node_id ?? "host"} ${(l.tx_utilization_mean / 10).toFixed(1)} %`).join(", ") || "none in this window");
  const flows = live.flows.filter((f) => (f.path || []).includes(n));
  el("switch-flows").textContent = `flows crossing it in the latest windows: ${flows.length}` + (flows.length ? " — " + flows.slice(0, 5).map((f) => `port ${f.src_port}→${f.dst_port} via ${(f.path || []).join("-")}`).join(", ") : "");
  const mine = [...episodes.values()].filter((e) => e.node_id === n).slice(0, 5);
  el("switch-episodes").textContent = "episodes: " + (mine.map((e) => `${e.kind} ${e.metric || ""} peak ${e.peak ?? "–"} (${e.end_ns == null ? "open" : "ended"})`).join("; ") || "none");
}

async function loadSwitch(n) {
  let span = "since=" + (range === "1h" ? "1h" : "5m");
  if (range === "custom" && el("range-from").value && el("range-to").value) {
    const iso = (id) => encodeURIComponent(new Date(el(id).value).toISOString());
    span = `from=${iso("range-from")}&to=${iso("range-to")}`;
  }
  try {
    const { queues } = await api(`/v1/switches/${n}/queues?${span}`);
    if (selectedSwitch !== n) return;
    const byQueue = new Map();
    // A queue is a port's queue: one series per (egress port, queue id).
    for (const q of queues) {
      const name = (q.egress_port != null ? `port ${q.egress_port} ` : "") + `queue ${q.queue_id}`;
      const s = byQueue.get(name) || { order: [q.egress_port ?? -1, q.queue_id], points: [] };
      s.points.push([Date.parse(q.window_start), q.occupancy_max]);
      byQueue.set(name, s);
    }
    const series = [...byQueue.entries()].sort((a, b) => a[1].order[0] - b[1].order[0] || a[1].order[1] - b[1].order[1]);
    chart("switch-chart", series.map(([name, s]) => ({ name, points: s.points })), "packets");
  } catch (e) {
    chart("switch-chart", [], "packets");
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

// Episodes by id: started, updated and ended by the SSE stream.
const episodes = new Map();

function entityOf(e) {
  if (e.src_ip) return `${e.src_ip}:${e.src_port} → ${e.dst_ip}:${e.dst_port}` + (e.node_id != null ? ` at switch ${e.node_id}` : "");
  if (e.node_id != null) return `switch ${e.node_id}` + (e.egress_port != null ? ` port ${e.egress_port}` : "") + (e.queue_id != null ? ` queue ${e.queue_id}` : "");
  return "—";
}

function drawEpisodes() {
  const body = el("episodes").tBodies[0];
  body.replaceChildren();
  // Open ones first, then newest first.
  const rank = (e) => (e.end_ns == null ? 0 : 1);
  const rows = [...episodes.values()].sort((a, b) => rank(a) - rank(b) || b.start_ns - a.start_ns);
  for (const e of rows.slice(0, 100)) {
    const tr = body.insertRow();
    tr.dataset.id = e.id;
    tr.dataset.kind = e.kind;
    const open = e.end_ns == null;
    const lasted = ((open ? e.last_ns : e.end_ns) - e.start_ns) / 1e9;
    const cells = [
      time(e.start_ns), e.severity, e.kind + (e.metric ? " " + e.metric : ""), entityOf(e),
      e.peak != null ? `${e.peak}` + (e.threshold != null ? ` / ${e.threshold}` : "") : "",
      e.crossings, open ? "open" : `ended after ${lasted.toFixed(lasted < 10 ? 2 : 0)} s`,
    ];
    cells.forEach((v, n) => {
      const td = tr.insertCell();
      td.textContent = v;
      if (n === 1) td.className = "sev-" + e.severity;
      if (n === 4) td.className = "peak";
      if (n === 6 && open) td.className = "open";
    });
    if (e.node_id != null) tr.onclick = () => selectSwitch(e.node_id);
  }
  while (episodes.size > 500) episodes.delete([...episodes.keys()][0]);
}

// Server-sent events through fetch, so that the bearer token can be sent: `apply` gets each
// `kind` event's data, `redraw` runs after each chunk that had one.
async function follow(path, kind, apply, redraw) {
  for (;;) {
    try {
      const r = await fetch(path, { headers });
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        let changed = false;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const msg = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const lines = msg.split("\n");
          const k = lines.find((l) => l.startsWith("event:"))?.slice(6).trim();
          const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).join("");
          if (k === kind && data) {
            apply(JSON.parse(data));
            changed = true;
          }
        }
        if (changed) redraw();
      }
    } catch (e) {
      /* reconnect below */
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// Incidents by id: opened, updated and resolved by their SSE stream.
const incidents = new Map();

function drawIncidents() {
  const body = el("incidents").tBodies[0];
  body.replaceChildren();
  const rank = (i) => (i.state === "open" ? 0 : 1);
  const rows = [...incidents.values()].sort((a, b) => rank(a) - rank(b) || b.start_ns - a.start_ns);
  for (const i of rows.slice(0, 100)) {
    const tr = body.insertRow();
    tr.dataset.id = i.id;
    tr.dataset.kind = i.kind;
    if (i.id === el("incident-detail").dataset.id) tr.className = "selected";
    const open = i.state === "open";
    const lasted = ((open ? i.last_ns : i.end_ns) - i.start_ns) / 1e9;
    const cells = [
      time(i.start_ns), i.severity, i.kind.replaceAll("_", " "), `${i.root.kind} ${i.root.entity}`, i.members,
      i.flows + (i.flows_truncated ? "+" : ""), open ? "open" : `resolved after ${lasted.toFixed(lasted < 10 ? 1 : 0)} s`, i.summary,
    ];
    cells.forEach((v, n) => {
      const td = tr.insertCell();
      td.textContent = v;
      if (n === 1) td.className = "sev-" + i.severity;
      if (n === 6 && open) td.className = "open";
    });
    tr.onclick = () => showIncident(i.id);
  }
  while (incidents.size > 500) incidents.delete([...incidents.keys()][0]);
}

function markHighlight() {
  for (const c of document.querySelectorAll("#topology circle.switch")) c.classList.toggle("incident", highlight.nodes.has(Number(c.dataset.node)));
  for (const l of document.querySelectorAll("#topology line.link")) l.classList.toggle("incident", highlight.links.has(l.dataset.link));
}

// A titled list; an item is text or an array of nodes.
function list(title, items) {
  const h = document.createElement("h3");
  h.textContent = title;
  const ul = document.createElement("ul");
  for (const item of items) {
    const li = document.createElement("li");
    if (typeof item === "string") li.textContent = item;
    else li.append(...item);
    ul.appendChild(li);
  }
  return [h, ul];
}

// One incident: its timeline, affected flows and paths (highlighted on the topology), and
// the knowledge service's explanation with its recommended intents, approvable here.
async function showIncident(id) {
  const d = el("incident-detail");
  d.hidden = false;
  d.dataset.id = id;
  for (const tr of el("incidents").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.id === id);
  try {
    const i = await api(`/v1/incidents/${encodeURIComponent(id)}`);
    const nodes = new Set();
    const links = new Set();
    if (i.root.kind === "switch" || i.root.kind === "link") nodes.add(Number(i.root.entity.split(":")[0]));
    // The affected flows' latest paths (a flow's breach carries its switch, not its path).
    const affected = new Set(i.top_flows.map((f) => f.flow));
    const flowPaths = (lastLive?.flows || [])
      .filter((f) => affected.has(`${f.src_ip}:${f.src_port}>${f.dst_ip}:${f.dst_port}/${f.protocol}`))
      .map((f) => f.path || []);
    for (const p of [...i.paths, ...flowPaths]) {
      p.forEach((n, k) => {
        nodes.add(n);
        if (k > 0) links.add([p[k - 1], n].sort((x, y) => x - y).join("-"));
      });
    }
    highlight = { nodes, links };
    markHighlight();
    const head = document.createElement("h3");
    head.textContent = `${i.kind.replaceAll("_", " ")} at ${i.root.kind} ${i.root.entity} — ${i.severity}, ${i.state}`;
    const summary = document.createElement("div");
    summary.textContent = i.summary + (i.queues.length ? `; queues ${i.queues.join(", ")}` : "");
    const parts = [head, summary];
    parts.push(...list("Timeline", i.timeline.slice(0, 200).map((t) => `${time(t.time_ns)} ${t.event.replace("_", " ")}${t.member ? " " + t.member : ""}`)));
    parts.push(...list("Affected flows (worst first)", i.top_flows.map((f) => `${f.flow}: ${f.ratio.toFixed(1)}× its threshold`)));
    parts.push(...list("Paths", i.paths.map((p) => p.join(" → "))));
    for (const m of i.member_list.filter((m) => m.source === "anomaly")) {
      const a = await api(`/v1/anomalies/${encodeURIComponent(m.id)}`);
      const items = [a.explanation.summary, collateralLine(a), "recommended: " + (a.recommendations.map((r) => r.reason || r.kind).join("; ") || "nothing")];
      for (const intent of a.intents) {
        const row = [document.createTextNode(`intent ${intent.id} ${intent.kind} (${intent.state}) `)];
        if (intent.state === "pending-approval") {
          const b = document.createElement("button");
          b.textContent = "Approve";
          b.className = "approve";
          b.onclick = async () => {
            await approve(intent.id);
            showIncident(id);
          };
          row.push(b);
        }
        items.push(row);
      }
      parts.push(...list(`Knowledge: ${m.kind} (${m.id})`, items));
    }
    const members = i.member_list.slice(0, 200).map((m) => `${m.source} ${m.kind} ${m.id}${m.end_ns == null ? " (open)" : ""}`);
    parts.push(...list(`Breaches (${i.members}${i.members_truncated ? ", the first kept" : ""})`, members));
    d.replaceChildren(...parts);
  } catch (e) {
    d.textContent = "no incident " + id + " (it may have aged out)";
  }
}

async function refreshAudit() {
  try {
    const { audit } = await api("/v1/audit?limit=30");
    const body = el("audit").tBodies[0];
    body.replaceChildren();
    for (const a of audit.slice().reverse()) {
      const tr = body.insertRow();
      [new Date(a.time_ms).toLocaleTimeString(), a.intent || "", `${a.action}: ${a.result}`, a.actor, a.detail || ""].forEach((v) => {
        tr.insertCell().textContent = v;
      });
    }
  } catch (e) {
    /* shown by the status */
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

// The entities an anomaly explains, raised with it rather than on their own (its attackers,
// the queues and links on their paths, a scanner's targets).
function collateralLine(a) {
  const c = a.explanation.blast_radius.collateral || [];
  return "with it: " + (c.map((x) => `${x.kind} ${x.entity} (${x.type.replaceAll("_", " ")})`).join(", ") || "nothing else raised");
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
      collateralLine(a),
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
    const { events } = await api("/v1/events?live=true&limit=200");
    for (const e of events) episodes.set(e.id, e);
    drawEpisodes();
    const { incidents: list } = await api("/v1/incidents?limit=200");
    for (const i of list) incidents.set(i.id, i);
    drawIncidents();
  } catch (e) {
    /* shown by the status */
  }
  if (linkedIncident) showIncident(linkedIncident);
  el("show-raw").addEventListener("click", () => {
    el("raw-events").hidden = !el("raw-events").hidden;
    el("show-raw").textContent = el("raw-events").hidden ? "raw events" : "hide raw events";
  });
  for (const b of document.querySelectorAll("#range button")) b.addEventListener("click", () => setRange(b.dataset.range));
  for (const id of ["range-from", "range-to"]) el(id).addEventListener("change", () => setRange("custom"));
  setInterval(loadHistory, 10000);
  refreshAudit();
  setInterval(refreshAudit, 5000);
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
  follow("/v1/events/stream", "episode", ({ episode }) => episodes.set(episode.id, episode), drawEpisodes);
  // A merged incident leaves the list; its page turns to the incident it joined.
  let mergedInto = null;
  follow("/v1/incidents/stream", "incident", ({ change, incident }) => {
    if (change === "merge") {
      incidents.delete(incident.id);
      if (el("incident-detail").dataset.id === incident.id) mergedInto = incident.merged_into;
    } else {
      incidents.set(incident.id, incident);
    }
  }, () => {
    drawIncidents();
    if (mergedInto) el("incident-detail").dataset.id = mergedInto;
    mergedInto = null;
    const shown = el("incident-detail").dataset.id;
    if (shown && incidents.has(shown) && !el("incident-detail").hidden) showIncident(shown);
  });
}
start();
