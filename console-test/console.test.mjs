// The console in a real browser against a running `kplane up`: the page loads, shows the
// topology and a live value that changes, logs no console error; a screenshot is saved.
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
  await page.goto(url);
  await page.waitForSelector("#topology circle.switch", { timeout: 30000 });
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
  await page.waitForFunction(() => document.querySelectorAll("#latency-chart polyline").length > 0, null, { timeout: 20000 });
  await page.waitForSelector("#flows tbody tr", { timeout: 20000 });
  const flows = await page.locator("#flows tbody tr").count();
  // Drill down into the first flow's path.
  await page.locator("#flows tbody tr").first().click();
  await page.waitForFunction(() => {
    const d = document.querySelector("#flow-detail");
    return d && !d.hidden && d.textContent.includes("p50");
  }, null, { timeout: 20000 });
  await page.screenshot({ path: shot, fullPage: true });
  if (errors.length) throw new Error("console errors: " + errors.join(" | "));
  console.log(`console ok: ${switches} switches, ${links} links, windows ${first} → ${later}, ${flows} flows; screenshot ${shot}`);
} finally {
  await browser.close();
}
