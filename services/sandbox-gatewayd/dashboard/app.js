// SPDX-License-Identifier: LGPL-2.1-or-later
// sandbox-gatewayd's dashboard: the sandbox list, each sandbox's live audit log and output, and the
// takeover terminal (xterm.js). Plain ES module; everything it shows comes from the REST API.
// xterm.js and its fit addon are imported when a terminal opens: without them (an install that skipped
// `npm ci`) everything else still works, and the terminal says what is missing.

const KEY_STORAGE = "sandboxd.apiKey";
const PAGE = 50;

const $ = (id) => document.getElementById(id);

// --- the API ---------------------------------------------------------------------------------------

class ApiError extends Error {
        constructor(status, code, message) {
                super(message);
                this.status = status;
                this.code = code;
        }
        // What a person reads: the gateway's own words, with its status and code.
        describe() {
                return `${this.message} (HTTP ${this.status}${this.code ? ", " + this.code : ""})`;
        }
}

function apiKey() {
        return sessionStorage.getItem(KEY_STORAGE);
}

async function errorFrom(resp) {
        let body = null;
        try {
                body = await resp.json();
        } catch {
                // not the gateway's JSON error body (a proxy's page, say)
        }
        if (body && typeof body.error === "string")
                return new ApiError(resp.status, body.code, body.error);
        return new ApiError(resp.status, null, resp.statusText || "The request failed.");
}

// The key travels in the Authorization header only: never in a URL, a cookie or the page.
async function api(method, path, body) {
        const headers = { Authorization: `Bearer ${apiKey()}` };
        const init = { method, headers, cache: "no-store" };
        if (body !== undefined) {
                headers["Content-Type"] = "application/json";
                init.body = JSON.stringify(body);
        }
        let resp;
        try {
                resp = await fetch(path, init);
        } catch (e) {
                throw new ApiError(0, "network", `The gateway cannot be reached: ${e.message}`);
        }
        if (resp.status === 401 && path !== "/v1/sandboxes")
                signOut("The gateway no longer accepts this key.");
        if (!resp.ok)
                throw await errorFrom(resp);
        return resp.status === 204 ? null : resp.json();
}

const enc = encodeURIComponent;

// --- formatting ------------------------------------------------------------------------------------

// One form for every date and time on the page, 24-hour, in the browser's time zone, whatever its
// locale: "2026-12-04 14:21:29"; log rows show the time of day with milliseconds, "14:21:29.123".
function pad(n, width = 2) {
        return String(n).padStart(width, "0");
}

function fmtDate(d) {
        return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

function fmtClock(d) {
        return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function fmtDateTime(iso) {
        if (!iso)
                return "";
        const d = new Date(iso);
        return isNaN(d) ? iso : `${fmtDate(d)} ${fmtClock(d)}`;
}

function fmtTime(iso) {
        if (!iso)
                return "";
        const d = new Date(iso);
        return isNaN(d) ? iso : `${fmtClock(d)}.${pad(d.getMilliseconds(), 3)}`;
}

// An argv as one shell-quoted line, so that argument boundaries show: the rule of the run-session
// export's "command" (audit-api.md): words of A-Za-z0-9_@%+=:,./- as they are, others in single quotes,
// a ' as '\''.
function shellQuote(argv) {
        return argv.map((a) => {
                const w = String(a);
                return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`;
        }).join(" ");
}

// A detail value as text: nested objects in parentheses, lists comma-separated, null as "none".
function fmtValue(v) {
        if (v === null || v === undefined)
                return "none";
        if (typeof v === "boolean")
                return v ? "yes" : "no";
        if (Array.isArray(v))
                return v.length ? v.map(fmtValue).join(", ") : "none";
        if (typeof v === "object")
                return `(${Object.entries(v).map(([k, x]) => `${k}: ${fmtValue(x)}`).join(", ")})`;
        return String(v);
}

function fmtDetail(row) {
        const d = row.detail;
        if (d == null)
                return "";
        if (typeof d !== "object")
                return String(d);
        if (Array.isArray(d.argv))
                return shellQuote(d.argv);
        if (typeof d.command === "string")
                return d.command;
        if (typeof d.path === "string" && Object.keys(d).length <= 2)
                return d.path;
        // everything else (a create, a takeover, a refusal, …) as "key: value" pairs, in the row's order;
        // times (…_at: µs since the epoch, as sandboxd writes them, or RFC 3339) in the page's one form
        return Object.entries(d).map(([k, v]) => `${k}: ${k.endsWith("_at") ? fmtDetailTime(v) : fmtValue(v)}`)
                .join(" · ");
}

function fmtDetailTime(v) {
        if (typeof v === "number" && v > 0)
                return fmtDateTime(new Date(v / 1000).toISOString());
        if (typeof v === "string" && !isNaN(new Date(v)))
                return fmtDateTime(v);
        return fmtValue(v);
}

// A takeover the person ended by closing the terminal (or that ShellIdleSec= hung up) is no failure:
// sandboxd hangs the shell up, which dies of SIGHUP (signal 1, exit 129). Its exit cell says "closed"
// (or "idle") in the neutral colour; any other non-zero exit is red; a denied or blocked row's is empty.
// → [text, class, title]
function fmtExit(row) {
        // a refused request ran nothing: its row's 0 is no exit status
        if (row.exit_code == null || row.event === "denied" || row.event === "blocked")
                return ["", "num", ""];
        const d = row.detail && typeof row.detail === "object" ? row.detail : {};
        if (row.operation === "takeover" && row.event === "finished" && (d.ended_by === "client" || d.ended_by === "idle") &&
            (d.signal === 1 || row.exit_code === 129))
                return [d.ended_by === "idle" ? "idle" : "closed", "num closed",
                        `exit ${row.exit_code}: the shell was hung up when the terminal ${d.ended_by === "idle" ? "sat idle" : "was closed"}`];
        const exit = String(row.exit_code);
        return [exit, exit === "0" ? "num" : "num bad", ""];
}

function fmtDuration(ms) {
        if (ms == null)
                return "";
        return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function el(tag, props = {}, ...children) {
        const e = document.createElement(tag);
        for (const [k, v] of Object.entries(props)) {
                if (k === "class")
                        e.className = v;
                else if (k.startsWith("on"))
                        e.addEventListener(k.slice(2), v);
                else if (k === "text")
                        e.textContent = v;
                else
                        e.setAttribute(k, v);
        }
        for (const c of children)
                e.append(c);
        return e;
}

function showError(id, err) {
        $(id).textContent = err ? (err instanceof ApiError ? err.describe() : String(err.message || err)) : "";
}

// --- signing in ------------------------------------------------------------------------------------

async function signIn(key) {
        sessionStorage.setItem(KEY_STORAGE, key);
        try {
                await loadSandboxes();
        } catch (e) {
                sessionStorage.removeItem(KEY_STORAGE);
                throw e;
        }
        $("login").hidden = true;
        $("app").hidden = false;
        $("logout").hidden = false;
        $("who").hidden = false;
        $("who").textContent = `Key …${key.slice(-4)}`;
        await loadKeyRights();
        loadImages();
        selectFromHash();
}

function signOut(message) {
        sessionStorage.removeItem(KEY_STORAGE);
        closeSandbox();
        $("app").hidden = true;
        $("logout").hidden = true;
        $("who").hidden = true;
        $("login").hidden = false;
        $("login-error").textContent = message || "";
        $("key").value = "";
        $("key").focus();
}

$("login-form").addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const key = $("key").value.trim();
        $("login-error").textContent = "";
        try {
                await signIn(key);
                $("key").value = "";
        } catch (e) {
                $("login-error").textContent = e instanceof ApiError && e.status === 401 ?
                        `The gateway refused this key: ${e.message}` : showMessage(e);
        }
});

function showMessage(e) {
        return e instanceof ApiError ? e.describe() : String(e.message || e);
}

$("logout").addEventListener("click", () => signOut(""));

// --- the sandbox list ------------------------------------------------------------------------------

let sandboxes = [];
let current = null; // the sandbox shown: { id, name, ... }

// Issue 26: the snapshots the key may read, each with Fork (a new sandbox from it) and Remove. A key
// without snapshot.read just has no list.
let snapshotList = [];

async function loadSnapshots() {
        try {
                snapshotList = (await api("GET", "/v1/snapshots")).snapshots;
        } catch (e) {
                snapshotList = [];
        }
        const list = $("snapshot-list");
        list.replaceChildren(...snapshotList.map((s) => {
                const fork = el("button", { type: "button", class: "snapshot-fork", "data-id": s.id, text: "Fork",
                                            "aria-label": `Create a sandbox from snapshot ${s.name}` });
                const remove = el("button", { type: "button", class: "snapshot-remove danger", "data-id": s.id,
                                              text: "Remove", "aria-label": `Remove snapshot ${s.name}` });
                fork.addEventListener("click", () => forkSnapshot(s, fork));
                remove.addEventListener("click", () => removeSnapshot(s, remove));
                return el("li", { "data-id": s.id }, el("span", { class: "sb-name", text: s.name }), fork, remove,
                          el("span", { class: "sb-meta",
                                       text: `${s.id} · of ${s.source} · ${fmtBytes(s.size)} · ${fmtDateTime(s.created_at)}` }));
        }));
        $("snapshot-empty").hidden = snapshotList.length > 0;
}

async function forkSnapshot(s, button) {
        button.disabled = true;
        try {
                const sb = await api("POST", "/v1/sandboxes", { snapshot: s.id });
                await loadSandboxes();
                location.hash = sb.id;
        } catch (e) {
                showError("sandboxes-error", e);
        } finally {
                button.disabled = false;
        }
}

async function removeSnapshot(s, button) {
        if (!confirm(`Remove snapshot ${s.name}? Sandboxes made from it keep their disks.`))
                return;
        button.disabled = true;
        try {
                await api("DELETE", `/v1/snapshots/${enc(s.id)}`);
        } catch (e) {
                showError("sandboxes-error", e);
        }
        await loadSnapshots();
}

$("snapshot-sandbox").addEventListener("click", async () => {
        if (!current)
                return;
        const button = $("snapshot-sandbox");
        button.disabled = true;
        button.textContent = "Snapshotting…";
        try {
                await api("POST", `/v1/sandboxes/${enc(current.id)}/snapshots`, {});
                showError("detail-error", null);
                await loadSnapshots();
        } catch (e) {
                showError("detail-error", e);
        } finally {
                button.disabled = false;
                button.textContent = "Snapshot";
        }
});

async function loadSandboxes() {
        loadSnapshots();
        const data = await api("GET", "/v1/sandboxes");
        sandboxes = data.sandboxes.sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
        renderSandboxes();
        // the open sandbox's counters move: the list has them too
        const open = current && sandboxes.find((s) => s.id === current.id);
        if (open && open.state !== current.state) {
                /* paused or resumed elsewhere (the API, IdlePauseSec=): the detail follows */
                current = open;
                renderDetail(open);
        } else if (open)
                renderNetwork(open, false);
        showError("sandboxes-error", null);
}

function renderSandboxes() {
        const list = $("sandbox-list");
        list.replaceChildren(...sandboxes.map((s) => {
                const label = s.name ? `${s.name}` : s.id;
                const a = el("a", { href: `#${s.id}`, class: "sandbox-link", "data-id": s.id },
                             el("span", { class: "sb-name", text: label }),
                             el("span", { class: `state state-${s.state}`, text: s.state }),
                             el("span", { class: "sb-meta", text: `${s.id} · ${s.type} · ${s.network}${imageSuffix(s)}` }));
                if (current && current.id === s.id)
                        a.setAttribute("aria-current", "page");
                return el("li", {}, a);
        }));
        $("sandbox-empty").hidden = sandboxes.length > 0;
}

$("refresh").addEventListener("click", () => loadSandboxes().catch((e) => showError("sandboxes-error", e)));

// Sandboxes come and go through the API too (agents, expiry): the list follows every few seconds while
// the tab is visible.
setInterval(() => {
        if (apiKey() && !$("app").hidden && document.visibilityState === "visible")
                loadSandboxes().catch((e) => showError("sandboxes-error", e));
}, 5000);

$("create-form").addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const body = { type: $("create-type").value, network: $("create-network").value };
        const name = $("create-name").value.trim();
        if (name)
                body.name = name;
        const ttl = parseInt($("create-ttl").value, 10);
        if (ttl > 0)
                body.ttl_seconds = ttl;
        $("create-submit").disabled = true;
        $("create-submit").textContent = "Creating…";
        try {
                const sb = await api("POST", "/v1/sandboxes", body);
                $("create-name").value = "";
                await loadSandboxes();
                location.hash = sb.id;
        } catch (e) {
                showError("sandboxes-error", e);
        } finally {
                $("create-submit").disabled = false;
                $("create-submit").textContent = "Create";
        }
});

$("delete-sandbox").addEventListener("click", async () => {
        if (!current || !confirm(`Delete sandbox ${current.name || current.id}? Everything in it ends.`))
                return;
        const id = current.id;
        $("delete-sandbox").disabled = true;
        try {
                await api("DELETE", `/v1/sandboxes/${enc(id)}`);
                history.replaceState(null, "", location.pathname);
                closeSandbox();
                await loadSandboxes();
        } catch (e) {
                showError("detail-error", e);
        } finally {
                $("delete-sandbox").disabled = false;
        }
});

// Issue 26: POST …/pause or …/resume; the answer is the sandbox, shown at once, and the list follows.
$("pause-sandbox").addEventListener("click", async () => {
        if (!current)
                return;
        const button = $("pause-sandbox"), resume = button.textContent === "Resume";
        button.disabled = true;
        try {
                const sb = await api("POST", `/v1/sandboxes/${enc(current.id)}/${resume ? "resume" : "pause"}`);
                current = sb;
                renderDetail(sb);
                showError("detail-error", null);
                await loadSandboxes();
        } catch (e) {
                showError("detail-error", e);
        } finally {
                button.disabled = false;
        }
});

// --- one sandbox -----------------------------------------------------------------------------------

window.addEventListener("hashchange", () => {
        if (apiKey())
                selectFromHash();
});

function selectFromHash() {
        const id = decodeURIComponent(location.hash.slice(1));
        if (!id) {
                closeSandbox();
                return;
        }
        if (!current || current.id !== id)
                openSandbox(id);
}

async function openSandbox(id) {
        closeSandbox();
        const gen = ++openGen;
        $("detail-none").hidden = true;
        $("detail-body").hidden = false;
        $("app").classList.add("has-detail");
        $("detail-title").textContent = id;
        try {
                const sb = await api("GET", `/v1/sandboxes/${enc(id)}`);
                if (gen !== openGen)
                        return;
                current = sb;
                renderSandboxes();
                renderDetail(sb);
                await loadLog(true);
                // after the log page, before the watch: a process started in between is in the list or
                // comes as a live row, which reloads the list
                if (gen === openGen)
                        await loadProcesses();
                if (gen === openGen)
                        startWatch(gen);
        } catch (e) {
                if (gen === openGen)
                        showError("detail-error", e);
        }
}

let openGen = 0;

function closeSandbox() {
        openGen++;
        stopWatch();
        closeTerminal();
        closeProcesses();
        current = null;
        rows.clear();
        $("log-rows").replaceChildren();
        $("output").hidden = true;
        $("older").hidden = true;
        $("log-empty").hidden = true;
        showError("detail-error", null);
        showError("log-error", null);
        showError("terminal-error", null);
        $("detail-none").hidden = false;
        $("detail-body").hidden = true;
        $("app").classList.remove("has-detail");
        renderSandboxes();
}

function renderDetail(sb) {
        $("detail-title").textContent = sb.name ? `${sb.name} (${sb.id})` : sb.id;
        const props = [["State", sb.state], ["Type", sb.type], ["Network", sb.network], ["Image", sb.image ?? "host"],
                       ["Owner", sb.owner],
                       ["Created", fmtDateTime(sb.created_at)],
                       ["Expires", sb.expires_at ? fmtDateTime(sb.expires_at) + (sb.paused ? " (held while paused)" : "")
                                                 : "never"]];
        if (sb.paused && sb.paused_at)
                props.splice(1, 0, ["Paused", fmtDateTime(sb.paused_at)]);
        // Issue 26: one button, Pause for a running sandbox and Resume for a paused one.
        const pause = $("pause-sandbox");
        pause.textContent = sb.paused ? "Resume" : "Pause";
        pause.hidden = !(sb.state === "running" || sb.state === "paused");
        $("detail-props").replaceChildren(...props.flatMap(([k, v]) => [el("dt", { text: k }),
                                                                         el("dd", { text: v ?? "" })]));
        renderNetwork(sb, true);
}

// --- network egress: the address, the counters, the policy and its editor ------------------------

function fmtCount(packets, bytes) {
        return `${packets} packets, ${fmtBytes(bytes)}`;
}

function fmtBytes(n) {
        if (n < 1024)
                return `${n} B`;
        const units = ["KiB", "MiB", "GiB", "TiB"];
        let v = n / 1024, i = 0;
        while (v >= 1024 && i < units.length - 1) {
                v /= 1024;
                i++;
        }
        return `${v.toFixed(1)} ${units[i]}`;
}

// withForm: also put the policy into the editor (on opening, after a save); the list's refreshes update
// only the figures, so that an edit in progress is kept.
function renderNetwork(sb, withForm) {
        const egress = sb.network === "egress" && sb.egress_policy && sb.egress;
        $("network-panel").hidden = !egress;
        if (!egress)
                return;
        const p = sb.egress_policy, c = sb.egress.counters;
        const props = [["Address", sb.egress.address],
                       ["Policy", `default ${p.default}; allow ${p.allow.join(", ") || "nothing"}; ` +
                                  `deny ${p.deny.join(", ") || "nothing"}`],
                       ["Allowed", fmtCount(c.allowed_packets, c.allowed_bytes)],
                       ["Denied", fmtCount(c.denied_packets, c.denied_bytes)]];
        $("network-props").replaceChildren(...props.flatMap(([k, v]) => [el("dt", { text: k }),
                                                                          el("dd", { text: v })]));
        if (withForm) {
                $("policy-default").value = p.default;
                $("policy-allow").value = p.allow.join("\n");
                $("policy-deny").value = p.deny.join("\n");
                $("policy-status").textContent = "";
                showError("policy-error", null);
        }
}

function entries(text) {
        return text.split("\n").map((s) => s.trim()).filter((s) => s);
}

// The whole policy goes: the gateway replaces it (PUT …/network) and answers the sandbox as it now is.
// What is wrong with an entry is the gateway's (sandboxd's) own sentence.
$("policy-form").addEventListener("submit", async (ev) => {
        ev.preventDefault();
        if (!current)
                return;
        const id = current.id;
        const policy = { default: $("policy-default").value, allow: entries($("policy-allow").value),
                         deny: entries($("policy-deny").value) };
        $("policy-save").disabled = true;
        $("policy-status").textContent = "Saving…";
        try {
                const sb = await api("PUT", `/v1/sandboxes/${enc(id)}/network`, { egress_policy: policy });
                if (!current || current.id !== id)
                        return;
                current = sb;
                renderNetwork(sb, true);
                $("policy-status").textContent = "Saved.";
        } catch (e) {
                $("policy-status").textContent = "";
                showError("policy-error", e);
        } finally {
                $("policy-save").disabled = false;
        }
});

// --- the audit log: a page, older pages on demand, new rows live ---------------------------------

const rows = new Map(); // id → row, everything shown
let olderDone = false;

function rowElement(row) {
        const open = () => showOutput(row);
        const [exit, exitClass, exitTitle] = fmtExit(row);
        const tr = el("tr", { "data-id": String(row.id), class: `ev-${row.event}`, onclick: open },
                      el("td", {}, el("button", { type: "button", class: "link", text: `${row.id}`,
                                                  "aria-label": `Show the output of row ${row.id}`,
                                                  onclick: (e) => { e.stopPropagation(); open(); } })),
                      el("td", { text: fmtTime(row.started_at), title: fmtDateTime(row.started_at) }),
                      el("td", { text: row.source === "human_takeover" ? "human" : row.source,
                                 title: row.source || "" }),
                      el("td", { text: row.event && row.event !== "finished" ? `${row.operation} (${row.event})`
                                                                             : row.operation }),
                      el("td", { class: "detail-cell", text: fmtDetail(row), title: fmtDetail(row) }),
                      el("td", { class: exitClass, text: exit, title: exitTitle }),
                      el("td", { class: "num", text: fmtDuration(row.duration_ms) }));
        return tr;
}

// Keeps the table newest first whatever order rows arrive in (a live row, an older page).
function addRows(list) {
        const body = $("log-rows");
        for (const row of list) {
                if (rows.has(row.id))
                        continue;
                rows.set(row.id, row);
                const tr = rowElement(row);
                let before = null;
                for (const other of body.children) {
                        if (Number(other.dataset.id) < row.id) {
                                before = other;
                                break;
                        }
                }
                body.insertBefore(tr, before);
        }
        $("log-empty").hidden = rows.size > 0;
}

async function loadLog(first) {
        if (!current)
                return;
        // Older rows are those below the oldest one shown: an id holds still while live rows come.
        const oldest = rows.size ? Math.min(...rows.keys()) : 0;
        const id = current.id;
        try {
                const page = await api("GET", `/v1/sandboxes/${enc(id)}/log?limit=${PAGE}` +
                                       (first || !oldest ? "" : `&before_id=${oldest}`));
                if (!current || current.id !== id)
                        return;
                addRows(page.entries);
                olderDone = page.entries.length < PAGE;
                $("older").hidden = olderDone;
                showError("log-error", null);
        } catch (e) {
                showError("log-error", e);
        }
}

$("older").addEventListener("click", () => loadLog(false));

// The watch stream, read with fetch(): EventSource cannot send the Authorization header.
let watch = null;

function setLive(text, ok) {
        $("live").textContent = text;
        $("live").classList.toggle("ok", !!ok);
}

function stopWatch() {
        if (watch) {
                watch.abort.abort();
                clearTimeout(watch.retry);
                watch = null;
        }
        setLive("", false);
}

function newestId() {
        let max = 0;
        for (const id of rows.keys())
                max = Math.max(max, id);
        return max;
}

async function startWatch(gen) {
        const id = current.id;
        const w = { abort: new AbortController(), retry: null };
        watch = w;
        setLive("Connecting…", false);
        let failure = null;
        try {
                // Resume after the newest row shown: no gap between the page and the stream, no duplicate.
                const resp = await fetch(`/v1/sandboxes/${enc(id)}/watch`, {
                        headers: { Authorization: `Bearer ${apiKey()}`, "Last-Event-ID": String(newestId()) },
                        signal: w.abort.signal, cache: "no-store",
                });
                if (!resp.ok)
                        throw await errorFrom(resp);
                setLive("Live", true);
                await readEventStream(resp, handleEvent);
        } catch (e) {
                if (w.abort.signal.aborted)
                        return;
                failure = e;
        }
        if (watch !== w || gen !== openGen)
                return;
        if (failure instanceof ApiError && (failure.status === 401 || failure.status === 403 || failure.status === 404)) {
                setLive("Not live", false);
                showError("log-error", failure);
                return;
        }
        // The stream ended (the gateway restarted, a proxy cut it): come back after the last row seen.
        setLive("Reconnecting…", false);
        w.retry = setTimeout(() => {
                if (watch === w && gen === openGen)
                        startWatch(gen);
        }, 2000);
}

// Reads a text/event-stream answer to its end, calling onEvent({ event, data, id }) per event (comments
// skipped): the watch and a process's output follow share it.
async function readEventStream(resp, onEvent) {
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
                const { value, done } = await reader.read();
                if (done)
                        return;
                buf += value.replace(/\r\n?/g, "\n");
                let cut;
                while ((cut = buf.indexOf("\n\n")) >= 0) {
                        const block = buf.slice(0, cut);
                        buf = buf.slice(cut + 2);
                        const ev = parseEventBlock(block);
                        if (ev.data)
                                onEvent(ev);
                }
        }
}

function parseEventBlock(block) {
        let event = "message", data = "", id = null;
        for (const line of block.split("\n")) {
                if (line.startsWith(":"))
                        continue;
                const i = line.indexOf(":");
                const field = i < 0 ? line : line.slice(0, i);
                const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
                if (field === "event")
                        event = value;
                else if (field === "data")
                        data += (data ? "\n" : "") + value;
                else if (field === "id")
                        id = value;
        }
        return { event, data, id };
}

function handleEvent({ event, data }) {
        const obj = JSON.parse(data);
        if (event === "entry") {
                addRows([obj]);
                onLiveRow(obj);
        } else if (event === "error") {
                showError("log-error", new ApiError(obj.status, obj.code, obj.error));
                // too far behind: the missed rows are in the log; show the newest page again
                if (obj.code === "too_far_behind") {
                        rows.clear();
                        $("log-rows").replaceChildren();
                        loadLog(true);
                }
        }
}

// --- a row's output --------------------------------------------------------------------------------

async function showOutput(row) {
        const out = $("output");
        $("output-title").textContent = `Output of row ${row.id} (${row.operation}, ${row.event})`;
        $("output-detail").textContent = fmtDetail(row);
        $("output-stdout").textContent = "Loading…";
        $("output-stderr").textContent = "";
        out.hidden = false;
        for (const tr of $("log-rows").children)
                tr.classList.toggle("selected", Number(tr.dataset.id) === row.id);
        try {
                const o = await api("GET", `/v1/log/${row.id}/output`);
                $("output-stdout").textContent = o.stdout || "(none)";
                $("output-stderr").textContent = o.stderr || "(none)";
        } catch (e) {
                $("output-stdout").textContent = "";
                $("output-stderr").textContent = "";
                $("output-detail").textContent = `Cannot read the output: ${showMessage(e)}`;
        }
        out.focus();
        out.scrollIntoView({ block: "nearest" });
}

$("close-output").addEventListener("click", () => {
        $("output").hidden = true;
        for (const tr of $("log-rows").children)
                tr.classList.remove("selected");
});

// --- background processes: the list, live with the watch's process.* rows; attach to one's output --

let keyActions = null; // the key's actions (GET /v1/api-keys/self); null: the gateway did not say

// What the key may do decides which controls the page offers; the gateway still decides each request.
async function loadKeyRights() {
        try {
                const k = await api("GET", "/v1/api-keys/self");
                keyActions = new Set(k.scope && Array.isArray(k.scope.actions) ? k.scope.actions : []);
        } catch {
                keyActions = null; // a gateway without the route: offer everything, its 403 says the rest
        }
        renderProcessControls();
}

function keyMay(action) {
        return !keyActions || keyActions.has(action);
}

const procs = { list: [], loading: null, again: false }; // loading: the sandbox whose list is on its way
let follow = null; // the attached process's output: { sandbox, id, abort, lastId, pos, retry, ended, … }
const FOLLOW_CHARS_MAX = 4 << 20; // what the page keeps shown of one process's output

// A process's exit cell, by the Exec rows' rule: none while it runs, 0 plain, anything else red.
// → [text, class, title]
function fmtProcessExit(p) {
        if (p.exit_code == null)
                return ["", "num", ""];
        const exit = String(p.exit_code);
        const title = p.state === "killed" && p.exit_code > 128 ? `killed by signal ${p.exit_code - 128}` :
                p.state === "timed-out" ? "stopped at its runtime limit" : "";
        return [exit, exit === "0" ? "num" : "num bad", title];
}

function processRow(p) {
        const attach = () => attachProcess(p);
        const [exit, exitClass, exitTitle] = fmtProcessExit(p);
        const tr = el("tr", { "data-id": p.id, onclick: attach },
                      el("td", {}, el("button", { type: "button", class: "link", text: p.id,
                                                  "aria-label": `Attach to the output of process ${p.id}`,
                                                  onclick: (e) => { e.stopPropagation(); attach(); } })),
                      el("td", { class: "detail-cell", text: shellQuote(p.argv || []),
                                 title: shellQuote(p.argv || []) }),
                      el("td", {}, el("span", { class: `state state-${p.state}`, text: p.state })),
                      el("td", { class: exitClass, text: exit, title: exitTitle }),
                      el("td", { class: "when", text: fmtDateTime(p.started_at) }),
                      el("td", { class: "unit-cell", text: p.unit || "", title: p.unit || "" }));
        if (follow && follow.id === p.id)
                tr.classList.add("selected");
        return tr;
}

function renderProcesses() {
        $("proc-rows").replaceChildren(...procs.list.map(processRow));
        $("proc-empty").hidden = procs.list.length > 0;
        renderProcessControls();
}

// Loads the list; calls that come while the same sandbox's is on its way make one more load after it
// (a load for a sandbox no longer open drops its answer).
async function loadProcesses() {
        if (!current)
                return;
        const id = current.id;
        if (procs.loading === id) {
                procs.again = true;
                return;
        }
        procs.loading = id;
        try {
                do {
                        procs.again = false;
                        const data = await api("GET", `/v1/sandboxes/${enc(id)}/processes`);
                        if (!current || current.id !== id)
                                return;
                        procs.list = data.processes;
                        renderProcesses();
                        showError("proc-error", null);
                } while (procs.again);
        } catch (e) {
                if (current && current.id === id)
                        showError("proc-error", e);
        } finally {
                if (procs.loading === id)
                        procs.loading = null;
        }
}

// A live audit row of a process (start, signal, exit) means the list changed.
function onLiveRow(row) {
        if (typeof row.operation === "string" && row.operation.startsWith("process."))
                loadProcesses();
}

// A key without `log.read` has no watch stream to say when the list changes: for it, and only for it, the
// list is loaded again every few seconds while the tab is visible.
setInterval(() => {
        if (apiKey() && current && keyActions && !keyActions.has("log.read") && document.visibilityState === "visible")
                loadProcesses();
}, 5000);

function updateProcess(p) {
        const i = procs.list.findIndex((x) => x.id === p.id);
        if (i >= 0 && current && p.sandbox === current.id) {
                procs.list[i] = p;
                renderProcesses();
        }
}

function closeProcesses() {
        detachProcess();
        procs.list = [];
        procs.again = false;
        $("proc-rows").replaceChildren();
        $("proc-empty").hidden = true;
        showError("proc-error", null);
}

$("proc-refresh").addEventListener("click", () => loadProcesses());

// The start form and the signal and stop buttons: for keys with `exec` only.
function renderProcessControls() {
        const may = keyMay("exec");
        $("proc-start-form").hidden = !may;
        $("proc-term").hidden = !may;
        $("proc-stop").hidden = !may;
        const p = follow && procs.list.find((x) => x.id === follow.id);
        const running = !!p && p.state === "running" && !follow.ended;
        $("proc-term").disabled = !running;
        $("proc-stop").disabled = !running;
}

$("proc-start-form").addEventListener("submit", async (ev) => {
        ev.preventDefault();
        if (!current)
                return;
        const id = current.id;
        const command = $("proc-command").value;
        $("proc-start").disabled = true;
        showError("proc-error", null);
        try {
                const p = await api("POST", `/v1/sandboxes/${enc(id)}/processes`, { argv: ["sh", "-c", command] });
                if (!current || current.id !== id)
                        return;
                $("proc-command").value = "";
                procs.list.push(p);
                renderProcesses();
                attachProcess(p);
                loadProcesses();
        } catch (e) {
                showError("proc-error", e);
        } finally {
                $("proc-start").disabled = false;
        }
});

async function processAction(button, busy, method, suffix, body) {
        if (!follow)
                return;
        const f = follow;
        const label = button.textContent;
        button.disabled = true;
        button.textContent = busy;
        showError("proc-error", null);
        try {
                const p = await api(method, `/v1/sandboxes/${enc(f.sandbox)}/processes/${enc(f.id)}${suffix}`, body);
                updateProcess(p);
        } catch (e) {
                showError("proc-error", e);
        } finally {
                button.textContent = label;
                renderProcessControls();
        }
}

$("proc-term").addEventListener("click", () =>
        processAction($("proc-term"), "Sending…", "POST", "/signal", { signal: "TERM" }));
// DELETE: SIGTERM, then SIGKILL 5 s later if it still runs; answered once it has ended
$("proc-stop").addEventListener("click", () => processAction($("proc-stop"), "Stopping…", "DELETE", ""));

function setFollowStatus(text, cls) {
        $("proc-status").textContent = text;
        $("proc-status").className = `live ${cls || ""}`;
}

function followNote(text) {
        $("proc-stream").append(el("span", { class: "note", text: `[${text}]\n` }));
}

// Appends what a stream wrote, scrolled along if the reader was at the end; beyond FOLLOW_CHARS_MAX
// the oldest shown goes (the process's ring keeps what the gateway can still give).
function followAppend(f, stream, text) {
        const pre = $("proc-stream");
        const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.append(el("span", { class: stream, title: stream, text }));
        f.chars += text.length;
        while (f.chars > FOLLOW_CHARS_MAX && pre.firstChild) {
                f.chars -= pre.firstChild.textContent.length;
                pre.firstChild.remove();
        }
        if (atEnd)
                pre.scrollTop = pre.scrollHeight;
}

function attachProcess(p) {
        if (!current)
                return;
        detachProcess();
        const f = { sandbox: current.id, id: p.id, abort: null, lastId: null, pos: { stdout: 0, stderr: 0 },
                    retry: null, ended: false, chars: 0, error: null };
        follow = f;
        $("proc-output-title").textContent = `Output of ${p.id}: ${shellQuote(p.argv || [])}`;
        $("proc-stream").replaceChildren();
        $("proc-output").hidden = false;
        renderProcesses();
        // the page's hook for tests and the console: drop() cuts the connection as a network would
        window.dashboardFollow = { drop: () => f.abort && f.abort.abort(), lastId: () => f.lastId };
        runFollow(f);
        $("proc-output").scrollIntoView({ block: "nearest" });
}

function detachProcess() {
        if (!follow)
                return;
        const f = follow;
        follow = null;
        clearTimeout(f.retry);
        if (f.abort)
                f.abort.abort();
        $("proc-output").hidden = true;
        $("proc-stream").replaceChildren();
        setFollowStatus("");
        window.dashboardFollow = null;
        renderProcesses();
}

$("proc-detach").addEventListener("click", detachProcess);

// One connection of the follow: what is kept from where the last one stopped (its last event's id, sent
// as Last-Event-ID), then live, both streams, until the exit event. A dropped connection is resumed.
async function runFollow(f) {
        f.abort = new AbortController();
        const headers = { Authorization: `Bearer ${apiKey()}`, Accept: "text/event-stream" };
        if (f.lastId)
                headers["Last-Event-ID"] = f.lastId;
        setFollowStatus(f.lastId ? "Reconnecting…" : "Connecting…");
        let failure = null;
        try {
                const resp = await fetch(`/v1/sandboxes/${enc(f.sandbox)}/processes/${enc(f.id)}/output` +
                                         "?follow=true&stream=both", { headers, signal: f.abort.signal, cache: "no-store" });
                if (!resp.ok)
                        throw await errorFrom(resp);
                if (follow === f && !f.ended)
                        setFollowStatus("Live", "ok");
                await readEventStream(resp, (ev) => {
                        if (follow === f)
                                onFollowEvent(f, ev);
                });
        } catch (e) {
                failure = e;
        }
        if (follow !== f || f.ended)
                return;
        if (!failure && f.error)
                failure = f.error;
        f.error = null;
        if (failure instanceof ApiError && [400, 401, 403, 404, 422, 429].includes(failure.status)) {
                setFollowStatus("Not attached");
                showError("proc-error", failure);
                return;
        }
        // The connection ended before the exit event (a proxy, the gateway restarting): resume after the
        // last event seen, nothing twice and nothing left out.
        setFollowStatus("Reconnecting…");
        f.retry = setTimeout(() => {
                if (follow === f)
                        runFollow(f);
        }, 1000);
}

function onFollowEvent(f, { event, data, id }) {
        const obj = JSON.parse(data);
        if (event === "stdout" || event === "stderr") {
                // an offset past where this stream stood: the ring dropped bytes before they were sent
                if (obj.offset > f.pos[event])
                        followNote(`${obj.offset - f.pos[event]} bytes of ${event} no longer kept`);
                followAppend(f, event, obj.data);
        } else if (event === "exit") {
                f.ended = true;
                const [exit, cls] = fmtProcessExit(obj);
                setFollowStatus(`Ended: ${obj.state}${exit ? `, exit code ${exit}` : ""}`,
                                cls.includes("bad") ? "bad" : "done");
                updateProcess(obj);
                renderProcessControls();
        } else if (event === "error") {
                f.error = new ApiError(obj.status, obj.code, obj.error);
        }
        if (id) {
                f.lastId = id;
                const [out, err] = id.split(":").map(Number);
                if (Number.isFinite(out) && Number.isFinite(err))
                        f.pos = { stdout: out, stderr: err };
        }
}

// --- the takeover terminal -------------------------------------------------------------------------

let term = null;

function closeTerminal() {
        if (!term)
                return;
        term.observer.disconnect();
        window.removeEventListener("resize", term.onWindowResize);
        if (term.ws.readyState <= WebSocket.OPEN)
                term.ws.close(1000, "closed");
        term.xterm.dispose();
        term = null;
        $("terminal-panel").hidden = true;
        // the page's hook for tests and the console
        window.dashboardTerminal = null;
}

$("close-terminal").addEventListener("click", closeTerminal);

$("open-terminal").addEventListener("click", async () => {
        if (!current)
                return;
        closeTerminal();
        showError("terminal-error", null);
        const id = current.id;
        let token;
        try {
                // The gateway decides who may take over: a member key gets its 403 here, shown as it is.
                token = (await api("POST", `/v1/sandboxes/${enc(id)}/takeover-token`, {})).token;
        } catch (e) {
                $("terminal-error").textContent = e instanceof ApiError && e.status === 403 ?
                        `The gateway refused the takeover: ${e.describe()}` : `Cannot open a terminal: ${showMessage(e)}`;
                return;
        }
        let xtermLib;
        try {
                const [{ Terminal }, { FitAddon }] = await Promise.all([import("/ui/vendor/xterm/xterm.mjs"),
                                                                          import("/ui/vendor/xterm/addon-fit.mjs")]);
                xtermLib = { Terminal, FitAddon };
        } catch (e) {
                $("terminal-error").textContent = "The terminal emulator (xterm.js) is not installed with this " +
                        `dashboard: ${e.message}`;
                return;
        }
        if (!current || current.id !== id)
                return;
        openTerminal(id, token, xtermLib);
});

function openTerminal(id, token, { Terminal, FitAddon }) {
        $("terminal-panel").hidden = false;
        const xterm = new Terminal({
                cursorBlink: true,
                fontFamily: '"DejaVu Sans Mono", "Liberation Mono", monospace',
                fontSize: 14,
                lineHeight: 1.2, // room for underscores and descenders below the baseline
                scrollback: 2000,
                theme: { background: "#111418", foreground: "#e6e6e6" },
        });
        const fit = new FitAddon();
        xterm.loadAddon(fit);
        xterm.open($("terminal"));
        fit.fit();

        // The short-lived token goes in the URL (a WebSocket cannot carry a header from a browser); the
        // key never does. The token works once, for this sandbox, within seconds.
        const scheme = location.protocol === "https:" ? "wss:" : "ws:";
        const url = `${scheme}//${location.host}/v1/sandboxes/${enc(id)}/takeover?token=${enc(token)}` +
                `&cols=${xterm.cols}&rows=${xterm.rows}`;
        const ws = new WebSocket(url);
        ws.binaryType = "arraybuffer";
        const encoder = new TextEncoder();
        $("terminal-status").textContent = "Connecting…";

        const opened = { cols: xterm.cols, rows: xterm.rows };
        ws.onopen = () => {
                // the panel may have been refitted while connecting: the shell gets the size it has now
                if (xterm.cols !== opened.cols || xterm.rows !== opened.rows)
                        ws.send(JSON.stringify({ type: "resize", cols: xterm.cols, rows: xterm.rows }));
                $("terminal-status").textContent = `Connected · ${xterm.cols}×${xterm.rows}`;
                xterm.focus();
        };
        ws.onmessage = (ev) => {
                if (ev.data instanceof ArrayBuffer)
                        xterm.write(new Uint8Array(ev.data));
        };
        ws.onclose = (ev) => {
                const why = ev.reason ? ` (${ev.reason})` : ev.code === 1006 ? " (the connection failed)" : "";
                $("terminal-status").textContent = `Session ended${why}`;
        };
        xterm.onData((d) => {
                if (ws.readyState === WebSocket.OPEN)
                        ws.send(encoder.encode(d));
        });
        xterm.onBinary((d) => {
                if (ws.readyState === WebSocket.OPEN)
                        ws.send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff));
        });
        xterm.onResize(({ cols, rows }) => {
                if (ws.readyState === WebSocket.OPEN) {
                        ws.send(JSON.stringify({ type: "resize", cols, rows }));
                        $("terminal-status").textContent = `Connected · ${cols}×${rows}`;
                }
        });

        // Follows the window (and the panel): the grid is recomputed, and the shell told by onResize.
        const refit = () => {
                try {
                        fit.fit();
                } catch {
                        // hidden or detached: nothing to fit
                }
        };
        const observer = new ResizeObserver(refit);
        observer.observe($("terminal"));
        term = { xterm, ws, fit, observer, onWindowResize: refit };
        window.addEventListener("resize", refit);
        window.dashboardTerminal = xterm;
}

// --- images (issue 24): each sandbox's image, and the store's list ------------------------------------

// " · image NAME" in a sandbox's line of the list, for a sandbox on an image (not the host's tree)
function imageSuffix(s) {
        return s.image && s.image !== "host" ? ` · image ${s.image}` : "";
}

// "sha256:0123456789ab" of a digest: enough to tell images apart at a glance (the tooltip has it whole)
function digestPrefix(d) {
        const m = /^([a-z0-9]+):([0-9a-f]{12})/.exec(d || "");
        return m ? `${m[1]}:${m[2]}` : d || "";
}

async function loadImages() {
        try {
                const data = await api("GET", "/v1/images");
                const list = data.images.slice().sort((a, b) => (a.name < b.name ? -1 : 1));
                // like a sandbox's entry: the name and the size, then source · created · digest prefix
                $("image-list").replaceChildren(...list.map((i) => el("li", { class: "image", "data-name": i.name },
                        el("span", { class: "img-name", text: i.name }),
                        el("span", { class: "img-size", text: fmtBytes(i.size), title: `${i.size} bytes` }),
                        el("span", { class: "img-meta" },
                           el("span", { class: "img-source", text: i.source }), " · ",
                           el("span", { class: "img-created", text: fmtDateTime(i.created_at) }), " · ",
                           el("span", { class: "img-digest", text: digestPrefix(i.digest), title: i.digest })))));
                $("images-empty").hidden = list.length > 0;
                showError("images-error", null);
        } catch (e) {
                $("image-list").replaceChildren();
                showError("images-error", e);
        }
}

$("images-refresh").addEventListener("click", () => loadImages());

// --- start -----------------------------------------------------------------------------------------

if (apiKey()) {
        signIn(apiKey()).catch((e) => signOut(showMessage(e)));
} else {
        $("key").focus();
}
