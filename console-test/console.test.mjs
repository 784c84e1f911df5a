// The console in a real browser against a running `kplane up`: the page loads, lays the
// fat-tree out in layers (edge, aggregation, core), a switch's drill-down shows a live value
// that changes, a link's drill-down draws its utilisation over time, the microbursts show as
// congestion incidents (one opens with its timeline and affected flows, its switches
// highlighted on the topology) and, one click away, as threshold episodes with a peak (fewer
// than their raw crossings), the time range selector loads history from the store, a flow's path opens, a
// recommended intent is approved from the intents panel, the knowledge service's model status
// and a link's forecast against what happened are drawn, no console error is logged (a CSP
// violation would be one), the security headers are sent and the token leaves the address bar
// for session storage; a screenshot is saved.
// Usage: KPLANE_CONSOLE_URL='http://127.0.0.1:8080/#token=…' node console.test.mjs [shot.png]
import { chromium } from "playwright-core";

const url = process.env.KPLANE_CONSOLE_URL;
const shot = process.argv[2] || "console.png";
if (!url) {
  console.error("KPLANE_CONSOLE_URL is not set");
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
const errors = [];
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  const resp = await page.goto(url);
  // Framing refused, only its own scripts run, the token out of the address bar and kept for
  // this tab's session only.
  const h = resp.headers();
  if (!(h["content-security-policy"] || "").includes("frame-ancestors 'none'") || h["x-frame-options"] !== "DENY"
      || h["referrer-policy"] !== "no-referrer") throw new Error("console headers: " + JSON.stringify(h));
  await page.waitForSelector("#topology circle.switch", { timeout: 30000 });
  if (page.url().includes("token=")) throw new Error("the token stayed in the address bar: " + page.url());
  const stored = await page.evaluate(() => [localStorage.getItem("kplane-token"), sessionStorage.getItem("kplane-token")]);
  if (stored[0] !== null || !stored[1]) throw new Error("token storage: " + JSON.stringify(stored));
  const switches = await page.locator("#topology circle.switch").count();
  const links = await page.locator("#topology line.link").count();
  if (switches < 4 || links < 4) throw new Error(`topology too small: ${switches} switches, ${links} links`);
  // A live value that changes: the windows counter, refreshed every second.
  const first = Number(await page.textContent("#windows-seen"));
  await page.waitForFunction(
    (v) => Number(document.querySelector("#windows-seen").textContent) > v,
    first,
    { timeout: 20000 },
  );
  const later = Number(await page.textContent("#windows-seen"));
  // Layers inferred from the telemetry: the fat-tree's edge, aggregation and core switches,
  // core on top.
  await page.waitForFunction(() => ["edge", "aggregation", "core"].every(
    (r) => document.querySelectorAll(`#topology circle.switch[data-role="${r}"]`).length > 0), null, { timeout: 20000 });
  const roles = await page.evaluate(() => Object.fromEntries(["edge", "aggregation", "core"].map((r) => {
    const c = [...document.querySelectorAll(`#topology circle.switch[data-role="${r}"]`)];
    return [r, { n: c.length, y: Math.max(...c.map((x) => Number(x.getAttribute("cy")))) }];
  })));
  if (!(roles.core.y < roles.aggregation.y && roles.aggregation.y < roles.edge.y)) throw new Error("layers out of order: " + JSON.stringify(roles));
  // A switch's drill-down: its latest window, refreshed every second.
  await page.locator('#topology circle.switch[data-role="edge"]').first().click();
  await page.waitForFunction(() => !document.querySelector("#switch-detail").hidden
    && document.querySelector("#switch-window").textContent !== "–", null, { timeout: 20000 });
  const windowBefore = await page.textContent("#switch-window");
  await page.waitForFunction((v) => document.querySelector("#switch-window").textContent !== v, windowBefore, { timeout: 20000 });
  await page.waitForFunction(() => document.querySelectorAll("#switch-chart polyline.series-line").length > 0, null, { timeout: 20000 });
  const drilled = await page.getAttribute("#switch-detail", "data-node");
  // A link's drill-down: its utilisation over time from the store.
  await page.locator("#topology line.link:not(.failed)").first().click({ force: true });
  await page.waitForFunction(() => !document.querySelector("#link-detail").hidden
    && document.querySelectorAll("#link-chart polyline.series-line").length > 0, null, { timeout: 20000 });
  const link = await page.getAttribute("#link-detail", "data-link");
  // Incidents replace the raw feed: the microbursts' breaches are congestion incidents, one
  // per switch; one opens with its timeline and affected flows, its switches highlighted on
  // the topology.
  await page.waitForSelector('#incidents tbody tr[data-kind="congestion"]', { timeout: 60000 });
  const incidentRows = await page.locator("#incidents tbody tr").count();
  await page.locator('#incidents tbody tr[data-kind="congestion"]').first().click();
  await page.waitForFunction(() => {
    const d = document.querySelector("#incident-detail");
    return d && !d.hidden && d.textContent.includes("Timeline") && d.textContent.includes("Affected flows");
  }, null, { timeout: 20000 });
  await page.waitForSelector("#topology circle.switch.incident", { timeout: 10000 });
  const highlighted = await page.locator("#topology circle.switch.incident").count();
  const incident = await page.getAttribute("#incident-detail", "data-id");
  // The raw events stay one click away: the microbursts as threshold episodes with their
  // peak, fewer than the raw crossings.
  await page.click("#show-raw");
  await page.waitForSelector('#episodes tbody tr[data-kind="threshold"] td.peak', { timeout: 60000 });
  const peak = await page.textContent('#episodes tbody tr[data-kind="threshold"] td.peak');
  if (!/^\d+ \/ \d+$/.test(peak)) throw new Error("episode peak cell: " + peak);
  const tokenOf = new URLSearchParams(new URL(url).hash.slice(1)).get("token");
  const get = async (path) => (await (await fetch(new URL(path, url), { headers: { Authorization: "Bearer " + tokenOf } })).json()).events;
  // From the store, which keeps every alert (the live feed keeps only the latest): episodes
  // first, so the raw events read after include at least the alerts they were made from.
  // The store has them once their windows are committed.
  let grouped = 0;
  for (let i = 0; i < 60 && grouped === 0; i++) {
    grouped = (await get("/v1/events?since=10m&kind=threshold&limit=10000")).length;
    if (grouped === 0) await new Promise((r) => setTimeout(r, 500));
  }
  const raw = (await get("/v1/events?since=10m&raw=true&kind=threshold&limit=10000")).length;
  if (grouped === 0 || grouped > raw) throw new Error(`episodes ${grouped}, raw threshold events ${raw}`);
  // The time range selector: the last 5 minutes from the store.
  await page.click('#range button[data-range="5m"]');
  await page.waitForFunction(() => document.querySelector("#series-panel").dataset.loaded === "5m"
    && document.querySelectorAll("#latency-chart polyline.series-line").length > 0, null, { timeout: 30000 });
  await page.click('#range button[data-range="custom"]');
  await page.waitForFunction(() => document.querySelector("#series-panel").dataset.loaded === "custom"
    && document.querySelectorAll("#occupancy-chart polyline.series-line").length > 0, null, { timeout: 30000 });
  await page.click('#range button[data-range="live"]');
  await page.waitForFunction(() => document.querySelectorAll("#latency-chart polyline").length > 0, null, { timeout: 20000 });
  await page.waitForSelector("#flows tbody tr", { timeout: 20000 });
  const flows = await page.locator("#flows tbody tr").count();
  // Drill down into the first flow's path.
  await page.locator("#flows tbody tr").first().click();
  await page.waitForFunction(() => {
    const d = document.querySelector("#flow-detail");
    return d && !d.hidden && d.textContent.includes("p50");
  }, null, { timeout: 20000 });
  // A recommendation waits for approval in the intents panel; Approve applies it.
  const token = new URLSearchParams(new URL(url).hash.slice(1)).get("token");
  const r = await fetch(new URL("/v1/intents", url), {
    method: "POST",
    headers: { Authorization: "Bearer " + token, "content-type": "application/json" },
    body: JSON.stringify({
      kind: "block", match: { src: "10.99.0.1", protocol: "udp", "dst-port": "9" },
      origin: "recommendation", owner: "knowledge", reason: "console test: a recommended block",
    }),
  });
  const rec = await r.json();
  if (r.status !== 201 || rec.state !== "pending-approval") throw new Error("recommendation: " + r.status + " " + JSON.stringify(rec));
  const row = `#intents tr[data-id="${rec.id}"]`;
  await page.waitForSelector(`${row} button.approve`, { timeout: 10000 });
  await page.click(`${row} button.approve`);
  await page.waitForFunction(
    (sel) => {
      const s = document.querySelector(sel + " td.state-applying, " + sel + " td.state-verifying, " + sel + " td.state-active");
      return s != null;
    },
    row,
    { timeout: 10000 },
  );
  const approved = await page.textContent(`${row} td:nth-child(3)`);
  // The knowledge panels: the model registry's status, then (once the models are trained on
  // the first windows) a link's forecast drawn against what happened.
  await page.waitForFunction(() => document.querySelector("#models-status").textContent.startsWith("models:"), null, { timeout: 10000 });
  await page.waitForFunction(() => document.querySelectorAll("#forecast-chart polyline.predicted").length > 0
    && document.querySelectorAll("#forecast-chart polyline.actual").length > 0, null, { timeout: 90000 });
  const models = await page.textContent("#models-status");
  const forecastError = await page.textContent("#forecast-error");
  await page.screenshot({ path: shot, fullPage: true });
  if (errors.length) throw new Error("console errors: " + errors.join(" | "));
  console.log(`console ok: ${switches} switches (${roles.core.n} core, ${roles.aggregation.n} aggregation, ${roles.edge.n} edge), ${links} links, windows ${first} → ${later}, switch ${drilled} and link ${link} drilled into, ${incidentRows} incidents (${incident} opened, ${highlighted} switches highlighted), ${grouped} threshold episodes from ${raw} raw crossings (peak ${peak}), history loaded, ${flows} flows; intent ${rec.id} approved → ${approved}; ${models}; forecast ${forecastError}; screenshot ${shot}`);
} finally {
  await browser.close();
}
