// The execbox playground: one page on the service's own API (/v1/info,
// sessions, executions streamed as server-sent events, files). No build
// step, no dependency: every string from a run is put in the page as text
// (textContent), HTML only inside a sandboxed iframe, images as blobs.
"use strict";

const $ = (id) => document.getElementById(id);
const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;
const HIDDEN = /^\.execbox(\/|$)/; // the blocks' own code files
const state = { info: null, session: null, execution: null, runs: 0, languages: [] };

// ---- the API: the token of this tab (from the link execbox serve printed, or typed), the keys of its sessions ----

const keys = new Map(); // session id -> its key (answered once, when made; kept in this page only)
const SESSION_PATH = /^\/v1\/sessions\/([^/]+)/;

function headers(path, extra) {
  const token = sessionStorage.getItem("execbox-token");
  const sent = token ? { Authorization: "Bearer " + token } : {};
  const session = SESSION_PATH.exec(path);
  if (session && keys.has(session[1])) sent["X-Execbox-Session-Key"] = keys.get(session[1]);
  return Object.assign(sent, extra || {});
}

// The link's ?token= is kept for this tab and taken out of the address bar (history, bookmarks, screen shares).
function tokenFromLink() {
  const params = new URLSearchParams(location.search);
  if (!params.has("token")) return;
  sessionStorage.setItem("execbox-token", params.get("token"));
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
}

class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || "HTTP " + status);
    this.status = status;
    this.code = error.code;
    this.reason = error.reason;
  }
}

async function api(method, path, body, extra) {
  const init = { method, headers: headers(path, extra) };
  if (body !== undefined) {
    init.body = typeof body === "string" || body instanceof Blob ? body : JSON.stringify(body);
    if (!(body instanceof Blob)) init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    let parsed = null;
    try { parsed = await response.json(); } catch (_) { /* not JSON */ }
    if (response.status === 401) showAuth();
    throw new ApiError(response.status, parsed);
  }
  return response;
}

const json = async (method, path, body) => (await api(method, path, body)).json();
const filePath = (name) => name.split("/").map(encodeURIComponent).join("/");
const sessionUrl = (rest) => "/v1/sessions/" + state.session.id + (rest || "");

function status(text, kind) {
  const el = $("status");
  el.textContent = text;
  el.className = kind || "";
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// ---- the server and the session ----

function showAuth() {
  $("auth").hidden = false;
  $("token").focus();
}

async function connect() {
  try {
    state.info = await json("GET", "/v1/info");
  } catch (exc) {
    $("server").textContent = exc.status === 401 ? "this server needs a token" : "cannot reach the server: " + exc.message;
    return;
  }
  $("auth").hidden = true;
  const info = state.info;
  $("server").textContent = "execbox " + info.version + " · default backend " + info.default_backend;
  const picker = $("backend");
  picker.replaceChildren();
  for (const [name, about] of Object.entries(info.backends)) {
    const label = name + (about.stateful ? " (stateful)" : "") + (about.available === false ? " (unavailable)" : "");
    const option = el("option", { value: name, text: label });
    if (about.available === false) option.disabled = true;
    picker.append(option);
  }
  picker.value = info.default_backend;
  const limits = info.limits;
  $("timeout").value = limits.default.timeout_s;
  $("timeout").max = limits.maximum.timeout_s;
  if (limits.maximum.memory_mb) $("memory").max = limits.maximum.memory_mb;
  $("network").disabled = !limits.maximum.network;
  $("network").closest("label").title = limits.maximum.network ? "" : "the server does not allow network (serve --allow-network)";
  state.languages = info.languages;
  const language = $("language");
  for (const name of info.languages) language.append(el("option", { value: name, text: name }));
  language.value = info.languages.includes("python") ? "python" : info.languages[0];
  await newSession();
}

function limitsAsked() {
  const limits = { timeout_s: Number($("timeout").value) || state.info.limits.default.timeout_s };
  if ($("memory").value) limits.memory_mb = Number($("memory").value);
  if ($("network").checked) limits.network = true;
  return limits;
}

async function newSession() {
  const old = state.session;
  state.session = null;
  showSession();
  if (old) api("DELETE", "/v1/sessions/" + old.id).catch(() => {}); // it may have ended already
  try {
    const made = await json("POST", "/v1/sessions", { backend: $("backend").value, limits: limitsAsked() });
    keys.set(made.id, made.key);
    delete made.key;
    state.session = made;
    state.runs = 0;
    status("new session on " + state.session.backend, "");
  } catch (exc) {
    status("cannot open a session: " + exc.message, "error");
  }
  showSession();
  refreshFiles();
}

function clock(iso) {
  return iso ? new Date(iso).toLocaleTimeString() : "never";
}

function showSession() {
  const s = state.session;
  const text = $("session");
  if (!s) {
    text.textContent = "no session";
    return;
  }
  const kind = s.stateful ? "stateful: variables are kept from run to run" : "stateless: each run starts afresh, files stay";
  text.textContent = "Session " + s.id + " on " + s.backend + " (" + kind + ") · " + state.runs + " run(s) · expires " +
    clock(s.expires_at) + ", or when idle at " + clock(s.idle_expires_at);
  text.dataset.stateful = String(s.stateful);
}

async function refreshSession() {
  if (!state.session) return;
  try {
    state.session = await json("GET", sessionUrl());
  } catch (exc) {
    sessionGone(exc);
  }
  showSession();
}

function sessionGone(exc) {
  if (exc.status === 410 || exc.status === 404) {
    $("session").textContent = "The session has ended (" + (exc.reason || exc.code) + "): a new one opens at the next run.";
    state.session = null;
    return true;
  }
  return false;
}

async function resetSession() {
  if (!state.session) return;
  status("resetting…", "");
  try {
    state.session = await json("POST", sessionUrl("/reset"));
    state.runs = 0;
    status("session reset: " + (state.session.stateful ? "a new kernel, " : "") + "files kept", "");
  } catch (exc) {
    if (!sessionGone(exc)) status("reset failed: " + exc.message, "error");
  }
  showSession();
}

// ---- the code: one block, or a model reply's fenced blocks ----

async function blocksToRun() {
  const text = $("code").value;
  if ($("language").value !== "reply") return [{ language: $("language").value, code: text }];
  const found = (await json("POST", "/v1/extract", { text })).blocks;
  showBlocks(found);
  return found.map((b) => ({ language: b.language, code: b.code, ...(b.filename ? { filename: b.filename } : {}) }));
}

function showBlocks(blocks) {
  const list = $("blocks");
  list.replaceChildren();
  list.hidden = $("language").value !== "reply";
  if (list.hidden) return;
  if (!blocks.length) list.append(el("li", { class: "muted", text: "no closed fenced block in this reply" }));
  for (const block of blocks) {
    list.append(el("li", {}, el("span", { class: "lang", text: block.language + (block.filename ? " → " + block.filename : "") }),
      el("pre", { text: block.code })));
  }
}

let extractTimer = null;
function replyChanged() {
  if ($("language").value !== "reply") {
    $("blocks").hidden = true;
    return;
  }
  clearTimeout(extractTimer);
  extractTimer = setTimeout(() => blocksToRun().catch(() => {}), 300);
}

// ---- a run: its events as server-sent events, shown as they come ----

async function* serverSentEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) continue; // keepalive
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const rest = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = rest;
        else if (field === "data") data.push(rest);
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
  }
}

class RunView {
  constructor(number) {
    this.blocks = new Map();
    this.shown = new Set(); // workspace paths already shown inline
    this.root = el("article", { class: "run", "aria-label": "Run " + number });
    this.head = el("h3", { text: "Run " + number + " · running…" });
    this.root.append(this.head);
    $("runs").prepend(this.root);
  }

  block(index) {
    if (!this.blocks.has(index)) {
      const head = el("h4", { text: "Block " + (index + 1) });
      const out = el("pre", { class: "out", "aria-label": "Output of block " + (index + 1) });
      const extra = el("div", { class: "extra" });
      const box = el("section", { class: "block", "data-index": String(index) }, head, out, extra);
      this.root.append(box);
      this.blocks.set(index, { box, head, out, extra });
    }
    return this.blocks.get(index);
  }

  text(stream, data) {
    const out = this.block(data.block || 0).out;
    const last = out.lastElementChild;
    if (last && last.dataset.stream === stream) last.textContent += data.text;
    else out.append(el("span", { class: stream, "data-stream": stream, title: stream, text: data.text }));
  }

  async display(data) {
    const where = this.block(data.block || 0).extra;
    const mime = data.mime_type;
    if (mime === "text/plain") return; // already in stdout, or beside a richer form shown here
    if (data.path) this.shown.add(data.path);
    try {
      if (mime === "text/html") {
        const html = data.data != null ? data.data : await (await api("GET", sessionUrl("/files/" + filePath(data.path)))).text();
        // no script, no form, no same-origin: the run's HTML cannot reach this page or the API
        where.append(el("iframe", { sandbox: "", srcdoc: html, class: "html", title: "HTML output" }));
      } else if (mime.startsWith("image/")) {
        where.append(await image(mime, data, data.path || mime));
      } else {
        where.append(el("pre", { class: "display", title: mime, text: data.data != null ? data.data : "[" + mime + " in " + data.path + "]" }));
      }
    } catch (exc) {
      where.append(el("p", { class: "error", text: "cannot show " + mime + ": " + exc.message }));
    }
  }

  blockEnd(data) {
    const block = this.block(data.index);
    const seconds = (data.duration_s || 0).toFixed(2);
    block.head.textContent = "Block " + (data.index + 1) + " · " + data.language + " · exit " + data.exit_code + " · " +
      seconds + " s" + (data.timed_out ? " · timed out" : "") + (data.status !== "ok" ? " · " + data.status : "");
    block.box.dataset.exitCode = String(data.exit_code);
    block.box.dataset.status = data.status;
    if (data.truncated) block.extra.append(el("p", { class: "note truncated", text: "The output was truncated (Limits.max_output_bytes): the rest was not kept." }));
    if (data.error) {
      block.extra.append(el("div", { class: "traceback", role: "group", "aria-label": "Error" },
        el("strong", { text: data.error.name + ": " + data.error.value }),
        el("pre", { text: data.error.traceback || "" })));
    }
  }

  async end(data) {
    const result = data.result;
    const what = data.status === "completed" ? "done" : data.status;
    const took = result ? " in " + result.duration_s.toFixed(2) + " s, exit " + result.exit_code : "";
    this.head.textContent = this.head.textContent.replace(/ · running…$/, "") + " · " + what + took;
    this.root.dataset.status = data.status;
    if (data.error) this.root.append(el("p", { class: "error", text: data.error.message || String(data.error) }));
    if (!result) return;
    const written = (result.files || []).filter((f) => IMAGE.test(f) && !HIDDEN.test(f) && !this.shown.has(f));
    for (const path of written) { // a plt.savefig: shown on every backend, stateless ones too
      const mime = path.toLowerCase().endsWith(".svg") ? "image/svg+xml" : "image/" + path.split(".").pop().toLowerCase().replace("jpg", "jpeg");
      try {
        this.block(Math.max(0, (result.blocks || []).length - 1)).extra.append(
          el("figure", {}, await image(mime, { path }, path), el("figcaption", { text: path })));
      } catch (exc) { /* removed since */ }
    }
  }
}

async function image(mime, data, alt) {
  let source;
  if (data.path) source = URL.createObjectURL(await (await api("GET", sessionUrl("/files/" + filePath(data.path)))).blob());
  else if (mime === "image/svg+xml") source = URL.createObjectURL(new Blob([data.data], { type: mime }));
  else source = "data:" + mime + ";base64," + data.data;
  return el("img", { src: source, alt: alt, class: "plot" });
}

async function run() {
  if (state.execution || $("run").disabled) return;
  $("run").disabled = true;
  try {
    if (!state.session) await newSession();
    if (!state.session) return;
    const blocks = await blocksToRun();
    if (!blocks.length) {
      status("nothing to run: the reply has no closed fenced block", "error");
      return;
    }
    const view = new RunView(++state.runs);
    showSession();
    status("running…", "busy");
    $("stop").disabled = false;
    let response;
    try {
      response = await api("POST", sessionUrl("/executions"), { blocks }, { Accept: "text/event-stream" });
    } catch (exc) {
      view.end({ status: "failed", error: { message: exc.message } });
      if (sessionGone(exc)) status("the session had ended: run again to open a new one", "error");
      else status(exc.message, "error");
      return;
    }
    state.execution = response.headers.get("X-Execution-Id");
    let ended = null;
    for await (const { event, data } of serverSentEvents(response)) {
      if (event === "stdout" || event === "stderr") view.text(event, data);
      else if (event === "display") await view.display(data);
      else if (event === "block_start") view.block(data.index);
      else if (event === "block_end") view.blockEnd(data);
      else if (event === "truncated") view.root.append(el("p", { class: "note truncated", text: "The stream stopped after " + data.after_bytes + " bytes; " + (data.note || "") }));
      else if (event === "end") { ended = data; await view.end(data); }
    }
    const result = ended && ended.result;
    status(!ended ? "the stream ended early" : ended.status === "completed" ? "done (exit " + (result ? result.exit_code : "?") + ")" : ended.status, ended && ended.status === "completed" ? "" : "error");
  } catch (exc) {
    status("run failed: " + exc.message, "error");
  } finally {
    state.execution = null;
    $("stop").disabled = true;
    $("run").disabled = false;
    refreshSession();
    refreshFiles();
  }
}

async function stop() {
  if (!state.execution || !state.session) return;
  status("stopping…", "busy");
  try {
    await api("POST", sessionUrl("/executions/" + state.execution + "/cancel"));
  } catch (exc) {
    status("stop failed: " + exc.message, "error");
  }
}

// ---- the workspace's files ----

async function refreshFiles() {
  const list = $("files");
  if (!state.session) {
    list.replaceChildren();
    return;
  }
  let files;
  try {
    files = (await json("GET", sessionUrl("/files"))).files;
  } catch (exc) {
    if (!sessionGone(exc)) list.replaceChildren(el("li", { class: "error", text: exc.message }));
    return;
  }
  list.replaceChildren();
  for (const file of files.filter((f) => f.type === "file" && !HIDDEN.test(f.name))) {
    const download = el("button", { type: "button", "aria-label": "Download " + file.name, text: "Download" });
    download.addEventListener("click", () => save(file.name));
    list.append(el("li", {}, el("span", { class: "name", text: file.name }), el("span", { class: "muted", text: size(file.size) }), download));
  }
  if (!list.children.length) list.append(el("li", { class: "muted", text: "no files yet" }));
}

function size(bytes) {
  return bytes < 1024 ? bytes + " B" : bytes < 1 << 20 ? (bytes / 1024).toFixed(1) + " KiB" : (bytes / (1 << 20)).toFixed(1) + " MiB";
}

async function save(name) {
  const blob = await (await api("GET", sessionUrl("/files/" + filePath(name)))).blob();
  const link = el("a", { href: URL.createObjectURL(blob), download: name.split("/").pop() });
  document.body.append(link);
  link.click();
  link.remove();
}

async function upload(event) {
  if (!state.session) await newSession();
  for (const file of event.target.files) {
    try {
      await api("PUT", sessionUrl("/files/" + filePath(file.name)), file, { "Content-Type": "application/octet-stream" });
      status("uploaded " + file.name, "");
    } catch (exc) {
      status("upload of " + file.name + " failed: " + exc.message, "error");
    }
  }
  event.target.value = "";
  refreshFiles();
}

// ---- wiring ----

document.addEventListener("DOMContentLoaded", () => {
  tokenFromLink();
  $("auth-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("execbox-token", $("token").value);
    connect();
  });
  $("run").addEventListener("click", run);
  $("stop").addEventListener("click", stop);
  $("clear").addEventListener("click", () => $("runs").replaceChildren());
  $("new-session").addEventListener("click", newSession);
  $("reset-session").addEventListener("click", resetSession);
  for (const id of ["backend", "timeout", "memory", "network"]) $(id).addEventListener("change", newSession);
  $("language").addEventListener("change", replyChanged);
  $("code").addEventListener("input", replyChanged);
  $("upload").addEventListener("change", upload);
  $("refresh-files").addEventListener("click", refreshFiles);
  document.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      event.preventDefault();
      run();
    }
  });
  connect();
});
