// The inspector in a real browser (a CTest test, through run.sh): Debian's
// chromium driven by playwright-core, against a mastra-platform that this
// test starts and stops. It logs in through the ready line's link, uploads
// a file, sees it, downloads it (same bytes) and deletes it; runs three
// commands through the Lua client (exit 0, exit 3, a timeout) and sees them
// in Sessions; checks that requests without the cookie are refused and
// that cross-site and cross-origin form posts change nothing; saves
// screenshots in ARTIFACTS (inspector.png, inspector-narrow.png).
//
// Environment: MASTRA_PLATFORM, MASTRA_LUA, LUA_PATH_5_4, LUA_CPATH_5_4,
// ARTIFACTS (a directory), CHROMIUM (default /usr/bin/chromium).
"use strict";

const { chromium } = require("playwright-core");
const { spawn } = require("child_process");
const crypto = require("crypto");
const fs = require("fs");
const http = require("http");
const os = require("os");
const path = require("path");
const assert = require("assert/strict");

const PLATFORM = process.env.MASTRA_PLATFORM;
const LUA = process.env.MASTRA_LUA;
const ARTIFACTS = process.env.ARTIFACTS;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const STEP_MS = 20000;

function log(msg) { process.stdout.write("browser test: " + msg + "\n"); }

// run fn; on failure, say which step failed
async function step(name, fn) {
  log(name);
  try {
    return await fn();
  } catch (e) {
    e.message = name + ": " + e.message;
    throw e;
  }
}

// the first line of a child's stdout
function firstLine(child, what) {
  return new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error(what + " printed no line within 15 s")), 15000);
    child.stdout.on("data", (d) => {
      buf += d;
      const i = buf.indexOf("\n");
      if (i >= 0) {
        clearTimeout(timer);
        resolve(buf.slice(0, i));
      }
    });
    child.on("exit", (code) => reject(new Error(what + " exited with " + code + " before its first line")));
  });
}

function exited(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("pid " + child.pid + " did not exit")), ms);
    child.on("exit", (code) => { clearTimeout(timer); resolve(code); });
  });
}

// a page on another origin that posts a form to url at once
function evilServer() {
  let target = "";
  const server = http.createServer((req, res) => {
    res.setHeader("Content-Type", "text/html");
    res.end("<!doctype html><title>elsewhere</title>"
      + "<form id=f method=POST enctype=text/plain action=\"" + target + "\">"
      + "<input name=x value=y></form><script>document.getElementById('f').submit()</script>");
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    server, port: server.address().port, aim(url) { target = url; } })));
}

async function main() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "mastra-inspector-"));
  const dataDir = path.join(scratch, "data");
  const profile = path.join(scratch, "chromium-profile");
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const stderrLog = fs.openSync(path.join(ARTIFACTS, "platform.log"), "w");
  const platform = spawn(PLATFORM, ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir],
    { stdio: ["ignore", "pipe", stderrLog] });
  let context = null, script = null, evil = null;
  try {
    const info = JSON.parse(await firstLine(platform, "mastra-platform"));
    const token = fs.readFileSync(info.tokenFile, "utf8").trim();
    const base = info.inspector; // http://127.0.0.1:PORT/
    const bearer = { Authorization: "Bearer " + token };
    const env = { project: "local", environment: "local", bucket: "local" };
    const objectUrl = (key) => base + "api/object?project=local&bucket=local&key=" + encodeURIComponent(key);
    assert.ok(info.url.startsWith("http://127.0.0.1:"), "the ready line still starts with url");

    // a folder and a file that stay in the bucket, for the screenshot
    for (const [key, body] of [["logs/build.log", "build ok\n"], ["README.md", "# demo\n"]]) {
      const r = await fetch(info.url + "/v1/projects/local/fs/local/" + key,
        { method: "PUT", headers: bearer, body });
      assert.equal(r.status, 200);
    }

    await step("without the cookie, nothing is shown", async () => {
      for (const p of ["", "api/session", "api/sessions?project=local&environment=local",
        "api/bucket?project=local&bucket=local"]) {
        const r = await fetch(base + p);
        assert.equal(r.status, 401, p);
        assert.ok(!(await r.text()).includes("README.md"), p);
      }
    });

    context = await step("chromium starts", () => chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
      viewport: { width: 1280, height: 900 },
      acceptDownloads: true,
    }));
    context.setDefaultTimeout(STEP_MS);
    const page = context.pages()[0] || await context.newPage();
    page.on("dialog", (d) => d.accept()); // the confirm() before a delete

    await step("logs in through the link", async () => {
      await page.goto(info.inspectorLogin);
      assert.equal(page.url(), base);
      await page.getByRole("heading", { name: "Sessions" }).waitFor();
      await page.locator("#objects tr[data-key='README.md']").waitFor();
      const cookies = await context.cookies(base);
      const c = cookies.find((x) => x.name.startsWith("mastra_inspector_"));
      assert.ok(c && c.httpOnly && c.sameSite === "Strict", JSON.stringify(cookies));
    });

    const bytes = Buffer.concat([crypto.randomBytes(70000), Buffer.from([0, 255, 10, 13])]);
    await step("uploads a file with the file picker and sees it", async () => {
      await page.getByLabel("Upload files").setInputFiles({ name: "payload.bin",
        mimeType: "application/octet-stream", buffer: bytes });
      const row = page.locator("#objects tr[data-key='payload.bin']");
      await row.waitFor();
      assert.match(await row.innerText(), /68\.4 KiB/);
    });

    await step("downloads it: the same bytes", async () => {
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.getByRole("link", { name: "Download payload.bin" }).click(),
      ]);
      const got = fs.readFileSync(await download.path());
      assert.equal(download.suggestedFilename(), "payload.bin");
      assert.ok(got.equals(bytes), "downloaded " + got.length + " bytes, uploaded " + bytes.length);
    });

    await step("deletes it", async () => {
      await page.getByRole("button", { name: "Delete payload.bin" }).click();
      await page.locator("#objects tr[data-key='payload.bin']").waitFor({ state: "detached" });
      const r = await fetch(objectUrl("payload.bin"), { headers: bearer });
      assert.equal(r.status, 404);
    });

    await step("uploads by drag and drop", async () => {
      const drop = await page.evaluateHandle(() => {
        const dt = new DataTransfer();
        dt.items.add(new File(["dropped, 1 2 3\n"], "dropped.csv", { type: "text/csv" }));
        return dt;
      });
      await page.dispatchEvent("#drop", "drop", { dataTransfer: drop });
      await page.locator("#objects tr[data-key='dropped.csv']").waitFor();
      const r = await fetch(objectUrl("dropped.csv"), { headers: bearer });
      assert.equal(await r.text(), "dropped, 1 2 3\n");
    });

    // three commands through the Lua client; it keeps its sandbox until
    // its stdin closes, so that the screenshot shows it
    const results = await step("runs three commands through the Lua client", async () => {
      const lua = path.join(scratch, "execs.lua");
      fs.writeFileSync(lua, [
        'local mastra = require "mastra"',
        'local sb = mastra.PlatformSandbox.new{ id = "inspector-demo" }',
        "sb:start()",
        "local function show(r)",
        '  io.write(("%d %s\\n"):format(r.exitCode, tostring(r.timedOut))); io.flush()',
        "end",
        'show(sb:executeCommand("sh", { "-c", "echo hello from the inspector test | tee hello.txt" }))',
        'show(sb:executeCommand("sh", { "-c", "echo failing >&2; exit 3" }))',
        'show(sb:executeCommand("sleep", { "30" }, { timeout = 700 }))',
        'io.write("ready\\n"); io.flush()',
        'io.read("l")',
        "sb:destroy()",
      ].join("\n"));
      script = spawn(LUA, [lua], { stdio: ["pipe", "pipe", "inherit"], env: Object.assign({}, process.env, {
        MASTRA_WORKSPACE_PROXY_URL: info.url, MASTRA_PLATFORM_ACCESS_TOKEN: token,
        MASTRA_PROJECT_ID: env.project, MASTRA_ENVIRONMENT_ID: env.environment }) });
      let out = "";
      script.stdout.on("data", (d) => { out += d; });
      const deadline = Date.now() + 90000;
      while (!out.includes("ready\n")) {
        if (script.exitCode !== null) throw new Error("the Lua script exited: " + out);
        if (Date.now() > deadline)
          throw new Error("the Lua script is not done after 90 s; its output: " + out);
        await new Promise((r) => setTimeout(r, 50));
      }
      return out.trim().split("\n").slice(0, 3);
    });
    assert.deepEqual(results, ["0 false", "3 false", "124 true"]);

    await step("sees them in Sessions, newest first, with their results", async () => {
      const rows = page.locator("#session-table tbody tr");
      await page.waitForFunction(() =>
        document.querySelectorAll("#session-table tbody tr[data-status]").length >= 3
        && !document.querySelector("#session-table tbody tr[data-status='running']"));
      const seen = await rows.evaluateAll((trs) => trs.map((tr) => ({
        status: tr.dataset.status, exit: tr.dataset.exit,
        text: tr.innerText.replace(/\s+/g, " ") })));
      assert.equal(seen.length, 3, JSON.stringify(seen));
      assert.match(seen[0].text, /sleep 30/);
      // at its timeout the client (exec-resume/1: a detach does not end
      // a command) sends the signal KILL: exit 137
      assert.equal(seen[0].status, "exited", JSON.stringify(seen[0]));
      assert.equal(seen[0].exit, "137", JSON.stringify(seen[0]));
      for (const row of seen) assert.match(row.text, /sbx_[0-9a-f]+ \(inspector-demo\)/);
      assert.match(seen[0].text, /exit 137/);
      assert.match(seen[1].text, /exit 3/);
      assert.equal(seen[1].exit, "3");
      assert.match(seen[2].text, /hello from the inspector test/);
      assert.equal(seen[2].exit, "0");
      assert.match(seen[2].text, /exit 0/);
      // the duration of the timed-out one: about 700 ms
      assert.match(seen[0].text, /\b(0\.[6-9]|1\.\d) s\b|\b[6-9]\d\d ms\b/, seen[0].text);
      const sandboxes = await page.locator("#sandbox-table tbody tr").innerText();
      assert.match(sandboxes, /inspector-demo/);
    });

    await step("sees a refused connection in Egress (the namespaces driver)", async () => {
      const health = await (await fetch(base + "api/health", { headers: bearer })).json();
      if (health.driver !== "namespaces") {
        log("the " + health.driver + " driver has no egress log: this step is skipped");
        return;
      }
      const list = await (await fetch(base + "api/sandboxes?project=local&environment=local",
        { headers: bearer })).json();
      const id = list.sandboxes.find((s) => s.recoveryKey === "inspector-demo").id;
      // a private range: refused by the proxy, logged, nothing leaves the machine
      const r = await fetch(info.url + "/v1/railway/projects/local/sandbox/" + id + "/exec", {
        method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, bearer),
        body: JSON.stringify({ command: "curl -sS -m 5 http://10.254.1.1/ || true" }) });
      assert.equal(r.status, 200);
      const row = page.locator("#egress-table tbody tr[data-allowed='false']").first();
      await row.waitFor();
      const text = (await row.innerText()).replace(/\s+/g, " ");
      assert.match(text, /10\.254\.1\.1:80/);
      assert.match(text, /refused: private \(10\/8\)/);
      assert.match(text, /inspector-demo/);
      assert.match(await page.locator("#health-list").innerText(), /Warm pool\s+\d+ of \d+ ready/);
    });

    await step("a request with the cookie but without the CSRF header changes nothing", async () => {
      const status = await page.evaluate(async (url) =>
        (await fetch(url, { method: "POST", body: "x" })).status, objectUrl("nocsrf.txt"));
      assert.equal(status, 403);
      assert.equal((await fetch(objectUrl("nocsrf.txt"), { headers: bearer })).status, 404);
    });

    evil = await evilServer();
    for (const [what, host] of [["a cross-site form post", "localhost"],
      ["a form post from another origin of the same site", "127.0.0.1"]]) {
      await step(what + " changes nothing", async () => {
        const key = "evil-" + host + ".txt";
        evil.aim(objectUrl(key));
        const answered = page.waitForResponse((r) => r.url().startsWith(base + "api/object"));
        await page.goto("http://" + host + ":" + evil.port + "/");
        const r = await answered;
        assert.ok(r.status() === 401 || r.status() === 403, "status " + r.status());
        assert.equal((await fetch(objectUrl(key), { headers: bearer })).status, 404);
      });
    }

    await step("both checkpoint retentions and each checkpoint's rule are shown", async () => {
      await page.goto(base);
      // the list is filled by the page's first refresh: wait for it
      await page.locator("#health-list dt", { hasText: "Template retention" }).waitFor({ timeout: 15000 });
      const health = await page.locator("#health-list").innerText();
      assert.match(health, /Checkpoint retention\s+7 days after the last use/);
      assert.match(health, /Template retention\s+7 days unused/);
      // the templates' table is there (this server's driver runs none)
      await page.locator("#template-table tbody", { hasText: "No templates." }).waitFor({ timeout: 15000 });
      assert.match(health, /never asked for\s+1 day/);
      // inspector-demo is an explicit id of our client: asked for, 7 days
      // (kept while its sandbox lives)
      const row = page.locator("#checkpoint-table tbody tr", { hasText: "inspector-demo" });
      await row.waitFor({ timeout: 15000 });
      assert.equal(await row.locator("td[data-rule]").getAttribute("data-rule"), "asked");
      assert.match(await row.innerText(), /asked for: 7 days/);
    });

    await step("screenshots", async () => {
      await page.goto(base);
      await page.locator("#session-table tbody tr[data-exit='137']").waitFor();
      await page.locator("#objects tr[data-key='dropped.csv']").waitFor();
      // the checkpoint of inspector-demo, captured 2 s after its commands
      await page.locator("#checkpoint-table tbody tr", { hasText: "inspector-demo" })
        .waitFor({ timeout: 15000 });
      await page.waitForFunction(() => !document.body.innerText.includes("measuring…"));
      await page.screenshot({ path: path.join(ARTIFACTS, "inspector.png"), fullPage: true });
      await page.setViewportSize({ width: 390, height: 844 });
      await page.screenshot({ path: path.join(ARTIFACTS, "inspector-narrow.png"), fullPage: true });
      log("screenshots in " + ARTIFACTS);
    });

    await step("the Lua script destroys its sandbox and exits", async () => {
      script.stdin.end();
      assert.equal(await exited(script, 20000), 0);
      script = null;
    });
  } finally {
    if (context) await context.close().catch(() => {});
    if (evil) evil.server.close();
    if (script) {
      script.kill("SIGKILL");
      await exited(script, 5000).catch(() => {});
    }
    platform.kill("SIGTERM");
    const code = await exited(platform, 20000).catch((e) => {
      platform.kill("SIGKILL");
      throw e;
    });
    fs.closeSync(stderrLog);
    fs.rmSync(scratch, { recursive: true, force: true });
    if (code !== 0) throw new Error("mastra-platform exited with " + code);
  }
}

main().then(() => log("ok"), (e) => {
  process.stderr.write("browser test FAILED: " + (e.stack || e) + "\n");
  process.exit(1);
});
