// The inspector's page: reads the JSON endpoints of docs/inspector.md and
// draws each view with DOM calls (text is never parsed as HTML). Changes
// send the X-Mastra-CSRF header that /api/session hands out.
"use strict";

const state = { csrf: null, project: null, environment: null, bucket: null,
  prefix: "", maxObject: 0 };
const $ = (id) => document.getElementById(id);

function setStatus(text, error) {
  const s = $("status");
  s.textContent = text;
  s.className = error ? "error" : "";
}

async function api(path, options) {
  const opts = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
  if (opts.method && opts.method !== "GET") opts.headers["X-Mastra-CSRF"] = state.csrf || "";
  const res = await fetch(path, opts);
  if (res.status === 401) {
    setStatus("Not logged in: open a new login link (mastra-platform inspect).", true);
    throw new Error("not logged in");
  }
  if (!res.ok) {
    let msg = res.status + " " + res.statusText;
    try { msg = (await res.json()).error.message; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return res.status === 204 || res.status === 202 ? null : res.json();
}

function q(params) {
  return Object.entries(params).map(([k, v]) => k + "=" + encodeURIComponent(v)).join("&");
}
function envQuery(extra) {
  return q(Object.assign({ project: state.project, environment: state.environment }, extra || {}));
}

// {------ formatting ------
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") e.addEventListener("click", v);
    else if (k === "className") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}
function size(n) {
  if (n == null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
}
function duration(ms) {
  if (ms == null) return "–";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  if (ms < 3600000) return Math.floor(ms / 60000) + " min " + Math.round(ms % 60000 / 1000) + " s";
  return (ms / 3600000).toFixed(1) + " h";
}
const pad = (n) => String(n).padStart(2, "0");
function when(ms) {
  if (ms == null) return el("span", { className: "muted" }, "–");
  const d = new Date(ms), now = new Date(), diff = ms - now.getTime();
  const rel = Math.abs(diff) < 1000 ? "now"
    : diff < 0 ? duration(-diff) + " ago" : "in " + duration(diff);
  const time = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  const day = d.toDateString() === now.toDateString() ? ""
    : d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " ";
  return el("time", { datetime: d.toISOString(), title: d.toString() },
    day + time, " ", el("span", { className: "muted" }, "(" + rel + ")"));
}
// the rows of a table; each cell is labelled with its column's heading
// (narrow screens show the rows as cards, with those labels)
function fill(tableId, rows, emptyText, columns) {
  const table = $(tableId), body = table.tBodies[0];
  const heads = Array.from(table.tHead.rows[0].cells, (c) => c.textContent);
  body.replaceChildren();
  if (rows.length === 0) {
    body.append(el("tr", {}, el("td", { colspan: columns, className: "empty" }, emptyText)));
    return;
  }
  for (const r of rows) {
    Array.from(r.cells).forEach((c, i) => c.setAttribute("data-label", heads[i] || ""));
    body.append(r);
  }
}
function button(label, onclick, danger, name) {
  return el("button", { type: "button", className: danger ? "danger" : "",
    "aria-label": name || label, onclick }, label);
}
// }------

async function act(what, fn) {
  try {
    setStatus(what + "…");
    await fn();
    setStatus(what + ": done");
  } catch (e) {
    setStatus(what + " failed: " + e.message, true);
  }
  refresh();
}

// {------ views ------
function days(n) { return n ? n + (n === 1 ? " day" : " days") : "forever"; }

async function loadHealth() {
  const h = await api("/api/health");
  const items = [["Driver", h.driver], ["Live sandboxes", h.liveSandboxes],
    ["Running commands", h.runningCommands],
    ["Disk use of the data directory", h.diskUseBytes == null ? "measuring…" : size(h.diskUseBytes)],
    ["Data directory", h.dataDir],
    ["Checkpoint retention", days(h.checkpointRetentionDays) + " after the last use"],
    ["Checkpoint retention, never asked for", days(h.checkpointRetentionUnusedDays)
      + " (no create restored it, no explicit capture or id)"],
    ["Template retention", days(h.templateRetentionDays) + " unused (never while a sandbox uses it)"]];
  if (h.warmPool)
    items.push(["Warm pool", h.warmPool.ready + " of " + h.warmPool.size + " ready"
      + (h.warmPool.warming ? ", " + h.warmPool.warming + " starting" : "")]);
  for (const t of (h.warmPool && h.warmPool.templates) || [])
    items.push(["Warm pool, template " + t.key.slice(0, 12), t.ready + " of "
      + h.warmPool.perTemplate + " ready" + (t.warming ? ", " + t.warming + " starting" : "")]);
  $("health-list").replaceChildren(...items.map(([k, v]) =>
    el("div", {}, el("dt", {}, k), el("dd", {}, v))));
}

async function loadBuckets() {
  const r = await api("/api/buckets?" + q({ project: state.project }));
  const names = r.buckets.slice();
  if (!names.includes(state.environment) && names.length === 0) names.push(state.environment);
  if (!state.bucket || !names.includes(state.bucket))
    state.bucket = names.includes(state.environment) ? state.environment : names[0];
  const sel = $("bucket-name");
  sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  sel.value = state.bucket;
}

function crumbs() {
  const parts = state.prefix.split("/").filter(Boolean);
  const list = [el("li", {}, el("button", { type: "button", className: "linklike",
    onclick: () => { state.prefix = ""; loadObjects(); } }, state.bucket + " (root)"))];
  parts.forEach((p, i) => {
    const prefix = parts.slice(0, i + 1).join("/") + "/";
    list.push(el("li", {}, el("button", { type: "button", className: "linklike",
      onclick: () => { state.prefix = prefix; loadObjects(); } }, p)));
  });
  $("crumbs").replaceChildren(...list);
}

async function loadObjects() {
  crumbs();
  const base = { project: state.project, bucket: state.bucket };
  const r = await api("/api/bucket?" + q(Object.assign({ prefix: state.prefix }, base)));
  const rows = r.folders.map((f) => el("tr", {},
    el("td", {}, el("button", { type: "button", className: "linklike",
      onclick: () => { state.prefix = f.prefix; loadObjects(); } }, f.name)),
    el("td", { className: "num" }, "folder"), el("td", {}, "–"),
    el("td", {}, button("Delete", () => {
      if (confirm("Delete the folder " + f.prefix + " and everything in it?"))
        act("Deleting " + f.prefix, () => api("/api/object?" + q(Object.assign({ key: f.prefix }, base)), { method: "DELETE" }));
    }, true, "Delete folder " + f.name))));
  for (const o of r.objects) {
    rows.push(el("tr", { "data-key": o.key },
      el("td", { className: "mono" }, o.name),
      el("td", { className: "num" }, size(o.size)),
      el("td", {}, when(o.lastModified)),
      el("td", {},
        el("a", { href: "/api/object?" + q(Object.assign({ key: o.key }, base)),
          download: o.name, "aria-label": "Download " + o.name }, "Download"), " ",
        button("Delete", () => {
          if (confirm("Delete " + o.key + "?"))
            act("Deleting " + o.key, () => api("/api/object?" + q(Object.assign({ key: o.key }, base)), { method: "DELETE" }));
        }, true, "Delete " + o.name))));
  }
  fill("objects", rows, "This folder is empty.", 4);
}

async function upload(files) {
  for (const f of files) {
    if (state.maxObject && f.size > state.maxObject) {
      setStatus(f.name + " is larger than the platform takes (" + size(state.maxObject) + ")", true);
      continue;
    }
    const key = state.prefix + f.name;
    await act("Uploading " + key, () => api("/api/object?" + q({ project: state.project,
      bucket: state.bucket, key }), { method: "POST", body: f,
      headers: { "Content-Type": f.type || "application/octet-stream" } }));
  }
}

function result(s) {
  if (s.status === "running") return el("span", { className: "warn" }, "running");
  if (s.status === "exited")
    return el("span", { className: s.exitCode === 0 ? "ok" : "bad" }, "exit " + s.exitCode);
  if (s.status === "timeout")
    return el("span", { className: "bad", title: s.message }, "timed out (exit " + s.exitCode + ")");
  if (s.status === "killed")
    return el("span", { className: "bad", title: s.message }, "killed: client closed (timeout or cancel)");
  return el("span", { className: "bad", title: s.message || "" }, "did not start: " + (s.message || ""));
}

async function loadSessions() {
  const r = await api("/api/sessions?" + envQuery());
  fill("session-table", r.sessions.map((s) => el("tr", { "data-status": s.status,
    "data-exit": s.exitCode == null ? "" : String(s.exitCode) },
    el("td", {}, when(s.startedAt)),
    el("td", { className: "mono cmd" }, s.command),
    el("td", {}, result(s)),
    el("td", { className: "num" }, duration(s.durationMs)),
    el("td", { className: "mono" }, s.sandboxId,
      s.recoveryKey ? el("span", { className: "muted" }, " (" + s.recoveryKey + ")") : ""))),
    "No commands have run here yet.", 5);
}

async function loadEgress() {
  const r = await api("/api/egress?" + envQuery());
  fill("egress-table", r.connections.map((c) => el("tr", { "data-allowed": String(c.allowed) },
    el("td", {}, when(Date.parse(c.time))),
    el("td", { className: "mono" }, (c.name && c.name !== c.address ? c.name + " " : "")
      + c.address + ":" + c.port),
    el("td", {}, c.protocol),
    el("td", { className: "num" }, size(c.bytesOut) + " / " + size(c.bytesIn)),
    el("td", {}, c.allowed ? el("span", { className: "ok" }, "allowed")
      : el("span", { className: "bad" }, "refused: " + (c.reason || ""))),
    el("td", { className: "mono" }, c.sandboxId,
      c.recoveryKey ? el("span", { className: "muted" }, " (" + c.recoveryKey + ")") : ""))),
    r.available ? "No outbound connections yet." : "This driver has no egress log.", 6);
}

async function loadSandboxes() {
  const r = await api("/api/sandboxes?" + envQuery());
  fill("sandbox-table", r.sandboxes.map((s) => el("tr", {},
    el("td", { className: "mono" }, s.id, " ", el("span", { className: "muted" }, s.status)),
    el("td", { className: "mono" }, s.recoveryKey || "–"),
    el("td", {}, s.networkIsolation),
    el("td", {}, when(s.createdAt)),
    el("td", {}, s.reapAt == null ? (s.running ? "not while a command runs" : "never") : when(s.reapAt)),
    el("td", {}, button("Destroy", () => {
      if (confirm("Destroy " + s.id + "? Its checkpoint is captured first."))
        act("Destroying " + s.id, () => api("/api/sandbox?" + q({ id: s.id }), { method: "DELETE" }));
    }, true, "Destroy " + s.id)))), "No live sandboxes.", 6);
}

async function loadCheckpoints() {
  const r = await api("/api/checkpoints?" + envQuery());
  r.checkpoints.sort((a, b) => a.key.localeCompare(b.key) || a.named - b.named);
  fill("checkpoint-table", r.checkpoints.map((c) => el("tr", {},
    el("td", { className: "mono" }, c.key, c.named ? el("span", { className: "muted" }, " named: " + c.name) : ""),
    el("td", { className: "num" }, size(c.size)),
    el("td", {}, when(c.capturedAt)),
    el("td", {}, when(c.lastUsedAt)),
    el("td", { className: "num" }, String(c.restores || 0),
      c.lastRestoredAt == null ? "" : el("span", { className: "muted" }, " last " + when(c.lastRestoredAt))),
    el("td", { "data-rule": c.asked ? "asked" : "unused" },
      c.removeAt == null ? (c.retentionDays ? "kept while a live sandbox has its key" : "kept forever")
        : when(c.removeAt),
      el("span", { className: "muted" }, (c.asked ? " asked for: " : " never asked for: ")
        + days(c.retentionDays))),
    el("td", {}, button("Delete", () => {
      if (confirm("Delete the checkpoint of " + c.key + "?"))
        act("Deleting checkpoint " + c.name, () => api("/api/checkpoint?" + envQuery({ name: c.name }), { method: "DELETE" }));
    }, true, "Delete checkpoint " + c.key)))), "No checkpoints.", 7);
}

async function loadTemplates() {
  const r = await api("/api/templates?" + envQuery());
  r.templates.sort((a, b) => a.templateId.localeCompare(b.templateId));
  fill("template-table", r.templates.map((t) => el("tr", { "data-status": t.status },
    el("td", { className: "mono" }, t.templateId, " ", el("span", { className: "muted" }, t.status),
      t.error ? el("div", { className: "bad" }, t.error) : ""),
    el("td", {}, t.family || "–"),
    el("td", { className: "num" }, t.sizeBytes == null ? "–" : size(t.sizeBytes)),
    el("td", {}, t.builtAt == null ? "–" : when(t.builtAt)),
    el("td", { className: "mono" }, t.usedBy.length ? t.usedBy.join(" ") : "–"),
    el("td", {}, when(t.lastUsedAt)),
    el("td", {}, t.removeAt == null
      ? (t.usedBy.length ? "kept while a sandbox uses it" : t.status === "building"
        ? "not while it builds" : "kept forever")
      : when(t.removeAt), el("span", { className: "muted" }, " unused: " + days(t.retentionDays))),
    el("td", {}, t.usedBy.length ? "–" : button("Remove", () => {
      if (confirm("Remove template " + t.templateId + " and its layer?"))
        act("Removing template " + t.templateId, () => api("/api/template?" + envQuery({ id: t.templateId }), { method: "DELETE" }));
    }, true, "Remove template " + t.templateId)))), "No templates.", 8);
}

async function loadFailures() {
  const r = await api("/api/failures?" + envQuery());
  fill("failure-table", r.failures.map((f) => el("tr", {},
    el("td", {}, when(f.at)),
    el("td", {}, f.kind, f.subject ? el("span", { className: "mono" }, " " + f.subject) : "",
      f.retries ? el("span", { className: "muted" }, " (" + f.retries + " retries)") : ""),
    el("td", { className: "bad" }, f.message),
    el("td", {}, f.retryable ? button("Retry", () =>
      act("Retrying", () => api("/api/failures/retry?" + q({ id: f.id }), { method: "POST" })),
      false, "Retry " + f.kind + " " + f.subject) : "–"))), "No provisioning failures.", 4);
}
// }------

let slowTick = 0;
async function refresh(all) {
  if (!state.project) return;
  try {
    await Promise.all([loadHealth(), loadSessions(), loadEgress(), loadSandboxes()]);
    if (all || slowTick++ % 3 === 0) {
      await loadBuckets();
      await Promise.all([loadObjects(), loadCheckpoints(), loadTemplates(), loadFailures()]);
    }
  } catch (e) {
    if (e.message !== "not logged in") setStatus("Cannot refresh: " + e.message, true);
  }
}

async function start() {
  let s;
  try { s = await api("/api/session"); } catch (e) { return; }
  state.csrf = s.csrf;
  state.maxObject = s.maxObject;
  const sel = $("env");
  sel.replaceChildren(...s.environments.map((e, i) => el("option", { value: String(i) },
    e.projectId + " / " + (e.environmentId || "(no environment)"))));
  const pick = (i) => {
    state.project = s.environments[i].projectId;
    state.environment = s.environments[i].environmentId;
    state.bucket = null;
    state.prefix = "";
    refresh(true);
  };
  sel.addEventListener("change", () => pick(Number(sel.value)));
  $("bucket-name").addEventListener("change", (e) => {
    state.bucket = e.target.value; state.prefix = ""; loadObjects();
  });
  $("upload").addEventListener("change", async (e) => {
    await upload(Array.from(e.target.files));
    e.target.value = "";
  });
  const drop = $("drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    upload(Array.from(e.dataTransfer.files));
  });
  $("env-form").addEventListener("submit", (e) => e.preventDefault());
  $("bucket-form").addEventListener("submit", (e) => e.preventDefault());
  pick(0);
  setInterval(refresh, 1500);
}

document.addEventListener("DOMContentLoaded", start);
