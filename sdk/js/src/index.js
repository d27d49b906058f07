// SPDX-License-Identifier: LGPL-2.1-or-later
// The sandbox-gatewayd client: sandboxes, exec (plain and streamed), background processes, files and file tools,
// the audit log, watch (SSE with resume), takeover (WebSocket) and API keys, over fetch() in Node 18+ and browsers.

import * as errors from "./errors.js";
import { ConnectionError, SandboxdError, Timeout, errorFromBody } from "./errors.js";
import { parseSse } from "./sse.js";
import { b64decode, b64encode, bytesToText, toBytes } from "./base64.js";

export * from "./errors.js";
export { parseSse };

const DEFAULT_BASE_URL = "http://127.0.0.1:8790";
const isNode = typeof process !== "undefined" && !!(process.versions && process.versions.node);

function sleep(ms, signal) {
        return new Promise((resolve, reject) => {
                if (signal && signal.aborted)
                        return reject(signal.reason);
                const t = setTimeout(resolve, ms);
                if (signal)
                        signal.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
        });
}

/* Merges the caller's abort signal with this request's deadline (null: no deadline). */
function requestSignal(timeoutMs, signal) {
        const signals = [];
        if (timeoutMs != null && timeoutMs > 0)
                signals.push(AbortSignal.timeout(timeoutMs));
        if (signal)
                signals.push(signal);
        if (signals.length === 0)
                return undefined;
        if (signals.length === 1)
                return signals[0];
        if (AbortSignal.any)
                return AbortSignal.any(signals);
        const c = new AbortController();
        for (const s of signals)
                s.addEventListener("abort", () => c.abort(s.reason), { once: true });
        return c.signal;
}

function wrapFetchError(e, what) {
        if (e instanceof SandboxdError)
                return e;
        if (e && (e.name === "TimeoutError"))
                return new Timeout(`${what}: no answer in time`, { code: "client_timeout", cause: e });
        if (e && e.name === "AbortError")
                return e;
        return new ConnectionError(`${what}: ${e && e.message ? e.message : e}`, { code: "connection_error", cause: e });
}

async function throwForResponse(res) {
        let body = null;
        const text = await res.text().catch(() => "");
        try {
                body = JSON.parse(text);
        } catch {
                body = { error: text || `HTTP ${res.status}` };
        }
        throw errorFromBody(res.status, body, res.headers);
}

function enc(s) {
        return encodeURIComponent(s);
}

function query(params) {
        const q = new URLSearchParams();
        for (const [k, v] of Object.entries(params || {}))
                if (v !== undefined && v !== null)
                        q.set(k, String(v));
        const s = q.toString();
        return s ? `?${s}` : "";
}

export class Client {
        /**
         * @param {{apiKey?: string, baseUrl?: string, timeoutMs?: number, fetch?: typeof fetch}} opts
         * apiKey defaults to $SANDBOXD_API_KEY in Node, baseUrl to $SANDBOXD_URL or http://127.0.0.1:8790.
         */
        constructor({ apiKey, baseUrl, timeoutMs = 60000, fetch: fetchImpl } = {}) {
                const env = isNode ? process.env : {};
                apiKey = apiKey ?? env.SANDBOXD_API_KEY;
                if (!apiKey)
                        throw new TypeError("Client: apiKey is required");
                /* Kept off the enumerable properties so that logging or JSON.stringify(client) does
                 * not print the secret. */
                Object.defineProperty(this, "_apiKey", { value: apiKey, enumerable: false });
                this.baseUrl = (baseUrl ?? env.SANDBOXD_URL ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
                this.timeoutMs = timeoutMs;
                this._fetch = fetchImpl || globalThis.fetch.bind(globalThis);
                this.apiKeys = new ApiKeys(this);
                this.images = new Images(this); /* issue 24 */
        }

        toJSON() {
                return { baseUrl: this.baseUrl, timeoutMs: this.timeoutMs };
        }

        _headers(extra) {
                return { Authorization: `Bearer ${this._apiKey}`, ...extra };
        }

        /* One request; answers the Response when it is 2xx, throws the typed error otherwise.
         * opts: json, body, headers, timeoutMs (null: none), signal. */
        async _raw(method, path, opts = {}) {
                const headers = this._headers(opts.headers);
                let body = opts.body;
                if (opts.json !== undefined) {
                        body = JSON.stringify(opts.json);
                        headers["Content-Type"] = "application/json";
                }
                const timeoutMs = opts.timeoutMs === undefined ? this.timeoutMs : opts.timeoutMs;
                let res;
                /* A kept-alive connection the gateway closed (a restart) fails the next request before
                 * any answer: idempotent requests are sent once more on a fresh connection; POSTs are
                 * not, since the gateway may have acted on them. */
                const idempotent = method === "GET" || method === "PUT" || method === "DELETE";
                for (let attempt = 0; ; attempt++) {
                        try {
                                res = await this._fetch(this.baseUrl + path, {
                                        method, headers, body, signal: requestSignal(timeoutMs, opts.signal),
                                        /* a streamed body (an image's archive) needs it in Node's fetch */
                                        ...(opts.duplex ? { duplex: opts.duplex } : {}),
                                });
                                break;
                        } catch (e) {
                                const err = wrapFetchError(e, `${method} ${path}`);
                                if (!(idempotent && attempt === 0 && err instanceof ConnectionError))
                                        throw err;
                        }
                }
                if (!res.ok)
                        await throwForResponse(res);
                return res;
        }

        async _json(method, path, opts) {
                const res = await this._raw(method, path, opts);
                if (res.status === 204) {
                        /* An unread body keeps its connection out of the keep-alive pool. */
                        await res.arrayBuffer().catch(() => {});
                        return null;
                }
                try {
                        return await res.json();
                } catch (e) {
                        throw wrapFetchError(e, `${method} ${path}`);
                }
        }

        /** Creates a sandbox and answers it once it runs. egressPolicy ({default, allow, deny}) goes with
         * network "egress"; image is "host" or an image of sandboxd's store (NotFound if there is none);
         * snapshot (issue 26) an id or name: the new sandbox's disk is a copy of it (a fork). */
        async createSandbox({ type, ttlSeconds, name, network, egressPolicy, image, snapshot, signal } = {}) {
                const body = {};
                if (type !== undefined) body.type = type;
                if (ttlSeconds !== undefined) body.ttl_seconds = ttlSeconds;
                if (name !== undefined) body.name = name;
                if (network !== undefined) body.network = network;
                if (egressPolicy !== undefined) body.egress_policy = egressPolicy;
                if (image !== undefined) body.image = image;
                if (snapshot !== undefined) body.snapshot = snapshot; /* issue 26: a fork of that snapshot */
                const info = await this._json("POST", "/v1/sandboxes", { json: body, signal });
                return new Sandbox(this, info);
        }

        /** A sandbox by id or name. */
        async getSandbox(idOrName, { signal } = {}) {
                return new Sandbox(this, await this._json("GET", `/v1/sandboxes/${enc(idOrName)}`, { signal }));
        }

        async listSandboxes({ signal } = {}) {
                const r = await this._json("GET", "/v1/sandboxes", { signal });
                return r.sandboxes.map((s) => new Sandbox(this, s));
        }

        /** Issue 26: the snapshots the key may read ({id, name, source, type, owner, created_at, size}). */
        async listSnapshots({ signal } = {}) {
                return (await this._json("GET", "/v1/snapshots", { signal })).snapshots;
        }

        async getSnapshot(idOrName, { signal } = {}) {
                return this._json("GET", `/v1/snapshots/${enc(idOrName)}`, { signal });
        }

        /** Removes a snapshot; sandboxes made from it keep their disks. */
        async deleteSnapshot(idOrName, { signal } = {}) {
                await this._json("DELETE", `/v1/snapshots/${enc(idOrName)}`, { signal });
        }

        /** The whole audit log (GET /v1/log) with its filters: limit, offset, operation, event, source,
         * accountId, sessionId, since, until, afterId. */
        async getLog(opts = {}) {
                return (await this._json("GET", `/v1/log${logQuery(opts, true)}`, { signal: opts.signal })).entries;
        }

        /** The whole captured output of one log row: {id, stdout, stderr}. */
        async getLogOutput(rowId, { encoding, signal } = {}) {
                return this._json("GET", `/v1/log/${enc(rowId)}/output${query({ encoding })}`, { signal });
        }

        /**
         * The run-session export (GET /v1/log/export, admin keys): an async iterator of the events of the
         * rows after row id `since` (of one sandbox, by id, or of all), oldest first, read as they arrive;
         * it ends at the row that was newest when it began. Resume with since = the last event's rowId.
         * With `dir` (Node only), the events are also written in the layout of `sandboxctl log --export
         * DIR` (audit.jsonl, run-N/stdout.txt, stderr.txt, metadata.json and its state file), resuming
         * where an earlier export into dir (by either) ended; `since` must then not be given.
         */
        export({ since, sandbox, dir, signal } = {}) {
                if (dir !== undefined) {
                        if (since !== undefined)
                                throw new TypeError("export: with dir, the export resumes from dir's own state; give no since");
                        return exportToDir(this, dir, sandbox, signal);
                }
                const lines = this._exportLines(since, sandbox, signal);
                return (async function* () {
                        for await (const [ev] of lines)
                                yield ev;
                })();
        }

        /* [event, the line's bytes as the gateway sent them] */
        async *_exportLines(since, sandbox, signal) {
                const res = await this._raw("GET", `/v1/log/export${query({ since, sandbox })}`, {
                        headers: { Accept: "application/x-ndjson" }, timeoutMs: null, signal,
                });
                let pending = new Uint8Array(0);
                const reader = res.body.getReader();
                try {
                        for (;;) {
                                const { done, value } = await reader.read();
                                if (done)
                                        break;
                                const joined = new Uint8Array(pending.length + value.length);
                                joined.set(pending);
                                joined.set(value, pending.length);
                                let start = 0;
                                for (let i = 0; i < joined.length; i++) {
                                        if (joined[i] !== 10)
                                                continue;
                                        const line = joined.slice(start, i + 1);
                                        start = i + 1;
                                        const ev = JSON.parse(new TextDecoder().decode(line));
                                        /* the stream failed after it began: its last line is the error body */
                                        if (ev.event === "error")
                                                throw errorFromBody(ev.status || 500, ev, res.headers);
                                        yield [ev, line];
                                }
                                pending = joined.slice(start);
                        }
                } catch (e) {
                        throw wrapFetchError(e, "GET /v1/log/export");
                } finally {
                        reader.releaseLock();
                }
                if (pending.length > 0)
                        throw new ConnectionError("GET /v1/log/export: the stream ended in the middle of a line",
                                                  { code: "connection_error" });
        }
}

const EXPORT_STATE = ".audit-export.json";

/* metadata.json from a run's events: its last event without time and event, with both ends. */
function exportMetadata(events) {
        const last = events[events.length - 1];
        const md = {};
        for (const [k, v] of Object.entries(last))
                if (k !== "time" && k !== "event")
                        md[k] = v;
        const start = events[0].time;
        /* µs precision: Date has ms only, so the fraction is carried over by hand */
        const m = /^(.*)\.(\d{6})Z$/.exec(start);
        const us = BigInt(Date.parse(`${m[1]}Z`)) * 1000n + BigInt(m[2]) + BigInt(last.durationMs || 0) * 1000n;
        const end = new Date(Number(us / 1000n)).toISOString().replace(/\.\d{3}Z$/, "");
        md.startedAt = start;
        md.finishedAt = `${end}.${String(us % 1000000n).padStart(6, "0")}Z`;
        return md;
}

const RUN_ID = /^run-([0-9]+|sb_[a-z2-7]{10}-p[0-9]{1,10})$/;

/* A background process's metadata.json after one row's events, as sandboxctl's (audit-export.c):
 * [0] nothing to write, [1, md] metadata.json only (it runs on), [2, md] also its output (it ended). A
 * row applied twice changes nothing. */
function processMetadata(old, evs) {
        let md = old == null ? null : JSON.parse(JSON.stringify(old));
        let what = 0;
        const carry = (next, ev, start) => {
                next.startRowId = start ? ev.rowId : (md?.startRowId ?? null);
                next.signals = Array.isArray(md?.signals) ? md.signals : [];
                return next;
        };
        for (const ev of evs) {
                if (ev.event === "sandbox.command.signal") {
                        if (ev.status !== "finished")
                                continue; /* not sent: nothing about the process changed */
                        if (md == null) { /* its start is not in this export (retention removed it) */
                                md = { runId: ev.runId, kind: "process" };
                                for (const k of ["process", "unit", "sandbox"])
                                        if (k in ev)
                                                md[k] = ev[k];
                                Object.assign(md, { state: null, startedAt: null, finishedAt: null,
                                                    startRowId: null, signals: [] });
                        }
                        if (!Array.isArray(md.signals))
                                md.signals = [];
                        if (md.signals.every((s) => s.rowId !== ev.rowId)) {
                                const entry = {};
                                for (const k of ["signal", "time"])
                                        if (k in ev)
                                                entry[k] = ev[k];
                                entry.rowId = ev.rowId;
                                for (const k of ["account", "source", "requestId"])
                                        if (k in ev)
                                                entry[k] = ev[k];
                                md.signals.push(entry);
                                md.signals.sort((a, b) => (a.rowId ?? 0) - (b.rowId ?? 0));
                        }
                        what = Math.max(what, 1);
                        continue;
                }
                const base = {};
                for (const [k, v] of Object.entries(ev))
                        if (k !== "time" && k !== "event")
                                base[k] = v;
                if (ev.event === "sandbox.command.started") {
                        if (md != null && typeof md.finishedAt === "string")
                                continue; /* a page applied again after the run's end was written */
                        Object.assign(base, { state: "running", startedAt: ev.time, finishedAt: null });
                        md = carry(base, ev, true);
                        what = Math.max(what, 1);
                } else {
                        if (!("state" in base))
                                base.state = null;
                        if (!("startedAt" in base))
                                base.startedAt = ev.time;
                        base.finishedAt = ev.time;
                        md = carry(base, ev, ev.operation === "process.start");
                        what = 2;
                }
        }
        return what ? [what, md] : [0, null];
}

async function* exportToDir(client, dir, sandbox, signal) {
        const fs = await import("node:fs");
        const path = await import("node:path");
        const { O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW, O_RDONLY, O_DIRECTORY } = fs.constants;
        const writeAtomic = (d, name, data, sync) => {
                const tmp = path.join(d, `.${name}.tmp`);
                const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o644);
                try {
                        fs.writeSync(fd, data);
                        if (sync)
                                fs.fsyncSync(fd);
                } finally {
                        fs.closeSync(fd);
                }
                fs.renameSync(tmp, path.join(d, name));
        };

        fs.closeSync(fs.openSync(dir, O_RDONLY | O_DIRECTORY)); /* ENOENT, ENOTDIR: clear errors */
        const jsonl = path.join(dir, "audit.jsonl");
        const fd = fs.openSync(jsonl, O_WRONLY | O_CREAT | O_NOFOLLOW, 0o644);
        try {
                const size = fs.fstatSync(fd).size;
                let last = 0, committed = 0, st = null;
                try {
                        st = JSON.parse(fs.readFileSync(path.join(dir, EXPORT_STATE), "utf8"));
                } catch (e) {
                        if (e.code !== "ENOENT")
                                throw e;
                }
                if (st) {
                        if (st.version !== 1)
                                throw new Error(`${dir}/${EXPORT_STATE} is not an export state this SDK knows`);
                        if ((st.sandbox ?? undefined) !== sandbox)
                                throw new Error(`${dir} holds an export of ${st.sandbox || "the whole log"}`);
                        last = st.lastRowId;
                        committed = st.jsonlSize;
                } else if (size > 0)
                        throw new Error(`${jsonl} is not empty but ${EXPORT_STATE} is missing: export into an empty directory`);
                if (size < committed)
                        throw new Error(`${jsonl} is shorter than the export wrote: it was changed by something else`);
                /* lines past the state were never committed: cut, and written again from the log */
                fs.ftruncateSync(fd, committed);

                const commit = async (rows) => {
                        const parts = [];
                        for (const lines of rows) {
                                const evs = lines.map(([ev]) => ev);
                                if (evs[0].event.startsWith("sandbox.command.")) {
                                        const run = evs[0].runId;
                                        if (!RUN_ID.test(run))
                                                throw new Error(`unexpected runId ${JSON.stringify(run)}`);
                                        const rd = path.join(dir, run);
                                        let what = 2, md;
                                        if (evs[0].kind === "process") { /* one run over several rows */
                                                let old = null;
                                                try {
                                                        const mfd = fs.openSync(path.join(rd, "metadata.json"), O_RDONLY | O_NOFOLLOW);
                                                        try {
                                                                old = JSON.parse(fs.readFileSync(mfd, "utf8"));
                                                        } finally {
                                                                fs.closeSync(mfd);
                                                        }
                                                } catch (e) {
                                                        if (e.code !== "ENOENT")
                                                                throw e;
                                                }
                                                [what, md] = processMetadata(old, evs);
                                        } else
                                                md = exportMetadata(evs);
                                        if (what === 0) {
                                                for (const [, line] of lines)
                                                        parts.push(line);
                                                continue;
                                        }
                                        try {
                                                fs.mkdirSync(rd, 0o755);
                                        } catch (e) {
                                                if (e.code !== "EEXIST")
                                                        throw e;
                                        }
                                        if (!fs.lstatSync(rd).isDirectory())
                                                throw new Error(`${rd} must be a directory, not a symlink`);
                                        if (what === 1) {
                                                writeAtomic(rd, "metadata.json", `${JSON.stringify(md, null, 2)}\n`);
                                                for (const [, line] of lines)
                                                        parts.push(line);
                                                continue;
                                        }
                                        let out = new Uint8Array(0), err = new Uint8Array(0);
                                        try {
                                                const o = await client.getLogOutput(evs[0].rowId, { encoding: "base64", signal });
                                                out = b64decode(o.stdout);
                                                err = b64decode(o.stderr);
                                                md.outputAvailable = true;
                                        } catch (e) {
                                                if (!(e instanceof errors.NotFound))
                                                        throw e;
                                                md.outputAvailable = false;
                                        }
                                        writeAtomic(rd, "stdout.txt", out);
                                        writeAtomic(rd, "stderr.txt", err);
                                        writeAtomic(rd, "metadata.json", `${JSON.stringify(md, null, 2)}\n`);
                                }
                                for (const [, line] of lines)
                                        parts.push(line);
                        }
                        const buf = Buffer.concat(parts);
                        fs.writeSync(fd, buf, 0, buf.length, committed);
                        fs.fdatasyncSync(fd);
                        committed += buf.length;
                        last = rows[rows.length - 1][0][0].rowId;
                        const state = { version: 1, lastRowId: last, jsonlSize: committed, sandbox: sandbox ?? null };
                        writeAtomic(dir, EXPORT_STATE, `${JSON.stringify(state, null, 2)}\n`, true);
                };

                /* a row's events are committed together, once the next row's begin (or the stream ends) */
                let pending = [];
                for await (const [ev, line] of client._exportLines(last, sandbox, signal)) {
                        if (pending.length && pending[pending.length - 1][0][0].rowId === ev.rowId)
                                pending[pending.length - 1].push([ev, line]);
                        else {
                                if (pending.length >= 200) {
                                        await commit(pending);
                                        pending = [];
                                }
                                pending.push([[ev, line]]);
                        }
                        yield ev;
                }
                if (pending.length)
                        await commit(pending);
        } finally {
                fs.closeSync(fd);
        }
}

function logQuery(o, global) {
        const q = {
                limit: o.limit, offset: o.offset, operation: o.operation, event: o.event, source: o.source,
                account_id: o.accountId, since: o.since, until: o.until, after_id: o.afterId,
                before_id: o.beforeId,
        };
        if (global)
                q.session_id = o.sessionId;
        return query(q);
}

class ApiKeys {
        constructor(client) {
                this._c = client;
        }

        /** Mints a key: {secret, apiKey}. spec: name, preset, role, actions, sandboxes, ttlSeconds. */
        async create({ name, preset, role, actions, sandboxes, ttlSeconds, signal } = {}) {
                const body = {};
                if (name !== undefined) body.name = name;
                if (preset !== undefined) body.preset = preset;
                if (role !== undefined) body.role = role;
                if (actions !== undefined) body.actions = actions;
                if (sandboxes !== undefined) body.sandboxes = sandboxes;
                if (ttlSeconds !== undefined) body.ttl_seconds = ttlSeconds;
                return this._c._json("POST", "/v1/api-keys", { json: body, signal });
        }

        async list({ signal } = {}) {
                return (await this._c._json("GET", "/v1/api-keys", { signal })).api_keys;
        }

        async revoke(id, { signal } = {}) {
                await this._c._json("DELETE", `/v1/api-keys/${enc(id)}`, { signal });
        }
}

/* A streamed exec's chunks of one stream as one string (or bytes with binary); with no chunks, what
 * the exit event had. */
function joinChunks(chunks, fallback, binary) {
        if (chunks.length === 0)
                return fallback;
        if (!binary)
                return chunks.join("");
        const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of chunks) {
                out.set(c, at);
                at += c.length;
        }
        return out;
}

function normalizeResult(r, binary) {
        const out = {
                exitCode: r.exit_code,
                stdout: r.stdout,
                stderr: r.stderr,
                stdoutTruncated: r.stdout_truncated,
                stderrTruncated: r.stderr_truncated,
                durationMs: r.duration_ms,
                timedOut: r.timed_out,
                oomKilled: r.oom_killed,
        };
        if (binary !== undefined) {
                out.stdout = binary ? b64decode(r.stdout) : bytesToText(b64decode(r.stdout));
                out.stderr = binary ? b64decode(r.stderr) : bytesToText(b64decode(r.stderr));
        }
        return out;
}

class Files {
        constructor(sb) {
                this._sb = sb;
        }

        get _c() {
                return this._sb.client;
        }

        get _base() {
                return `/v1/sandboxes/${enc(this._sb.id)}`;
        }

        /** Writes a string (UTF-8) or bytes to path; mode (number or octal string), createDirs, append. */
        async write(path, data, { mode, createDirs, append, signal } = {}) {
                const q = query({
                        path,
                        mode: typeof mode === "number" ? mode.toString(8).padStart(4, "0") : mode,
                        create_dirs: createDirs ? "true" : undefined,
                        append: append ? "true" : undefined,
                });
                const res = await this._c._raw("PUT", `${this._base}/files${q}`, {
                        body: toBytes(data), headers: { "Content-Type": "application/octet-stream" }, signal,
                });
                await res.arrayBuffer().catch(() => {});
        }

        /** The file's bytes (a part with offset/length); {encoding: "utf-8"} answers a string. */
        async read(path, { offset, length, encoding, signal } = {}) {
                const res = await this._c._raw("GET", `${this._base}/files${query({ path, offset, length })}`, { signal });
                const bytes = new Uint8Array(await res.arrayBuffer());
                return encoding === "utf-8" || encoding === "utf8" ? bytesToText(bytes) : bytes;
        }

        async readText(path, opts = {}) {
                return this.read(path, { ...opts, encoding: "utf-8" });
        }

        /** One of sandboxd's file tools by name (view, ls, glob, grep, file_create, str_replace, insert). */
        async tool(name, args = {}, { signal } = {}) {
                return this._c._json("POST", `${this._base}/tools/${enc(name)}`, { json: args, signal });
        }

        view(args, o) { return this.tool("view", args, o); }
        ls(args, o) { return this.tool("ls", args, o); }
        glob(args, o) { return this.tool("glob", args, o); }
        grep(args, o) { return this.tool("grep", args, o); }
        create(args, o) { return this.tool("file_create", args, o); }
        strReplace(args, o) { return this.tool("str_replace", args, o); }
        insert(args, o) { return this.tool("insert", args, o); }
}

export class Sandbox {
        constructor(client, info) {
                Object.defineProperty(this, "client", { value: client, enumerable: false });
                this._update(info);
                Object.defineProperty(this, "files", { value: new Files(this), enumerable: false });
                Object.defineProperty(this, "processes", { value: new Processes(this), enumerable: false });
        }

        _update(info) {
                this.info = info;
                this.id = info.id;
                this.name = info.name;
                this.type = info.type;
                this.state = info.state;
                this.network = info.network;
                this.image = info.image;
                this.owner = info.owner;
                this.createdAt = info.created_at;
                this.expiresAt = info.expires_at;
                this.limits = info.limits;
                this.paused = info.paused ?? false; /* issue 26; pausedAt: null while it runs */
                this.pausedAt = info.paused_at ?? null;
                /* network "egress" only (null for the others): {default, allow, deny}, the address, and the
                 * firewall's counters as of this answer ({allowed_packets, allowed_bytes, denied_packets,
                 * denied_bytes}, as the gateway sends them, like limits) */
                this.egressPolicy = info.egress_policy ?? null;
                this.egressAddress = info.egress?.address ?? null;
                this.egressCounters = info.egress?.counters ?? null;
        }

        get _base() {
                return `/v1/sandboxes/${enc(this.id)}`;
        }

        /** Reloads the sandbox object. */
        async refresh({ signal } = {}) {
                this._update(await this.client._json("GET", this._base, { signal }));
                return this;
        }

        /** The sandbox now expires ttlSeconds from now. */
        async extend(ttlSeconds, { signal } = {}) {
                this._update(await this.client._json("PATCH", this._base, { json: { ttl_seconds: ttlSeconds }, signal }));
                return this;
        }

        /** Freezes every process of the sandbox; its TTL stops until resume(). While paused, exec, files,
         * tools, processes and takeovers reject with Conflict, code "sandbox_paused", unless its type
         * resumes on use (AutoResume=yes). Pausing a paused sandbox changes nothing. */
        async pause({ signal } = {}) {
                this._update(await this.client._json("POST", `${this._base}/pause`, { signal }));
                return this;
        }

        /** Takes a snapshot of the sandbox's disk (home, /tmp, /var/tmp; frozen meanwhile) and resolves to it
         * ({id, name, source, type, owner, created_at, size}); client.createSandbox({ snapshot: id }) starts
         * sandboxes from it. Processes are not part of it. */
        async snapshot({ name, signal } = {}) {
                return this.client._json("POST", `${this._base}/snapshots`,
                                         { json: name !== undefined ? { name } : {}, signal });
        }

        /** Lets a paused sandbox run again; its expiry moves out by the time it was paused. */
        async resume({ signal } = {}) {
                this._update(await this.client._json("POST", `${this._base}/resume`, { signal }));
                return this;
        }

        /** Replaces the egress sandbox's whole policy ({default, allow, deny}; what it leaves out is "deny" and
         * no entries). A bad policy: BadRequest; a sandbox whose network is not egress: Conflict, code
         * "not_egress". */
        async setNetworkPolicy(policy, { signal } = {}) {
                this._update(await this.client._json("PUT", `${this._base}/network`,
                                                     { json: { egress_policy: policy }, signal }));
                return this;
        }

        /** Deletes the sandbox; resolves once every process of it is gone. Deleting a sandbox that is
         * gone already (deleted before, expired) resolves too, as in the Python SDK. */
        async delete({ signal } = {}) {
                try {
                        await this.client._json("DELETE", this._base, { signal });
                } catch (e) {
                        if (!(e instanceof errors.NotFound && e.code === "not_found"))
                                throw e;
                }
        }

        /**
         * Runs a command (a string for /bin/sh -c, or an argv array). With onStdout/onStderr the
         * answer is streamed (SSE) and the callbacks get each chunk as it arrives; the result is the same.
         * stdin may be a string or bytes (bytes go base64); binary: true answers stdout/stderr as bytes.
         */
        async exec(command, opts = {}) {
                const { cwd, env, stdin, timeoutSeconds, onStdout, onStderr, signal } = opts;
                const body = {};
                if (typeof command === "string")
                        body.command = command;
                else if (Array.isArray(command))
                        body.argv = command;
                else
                        throw new TypeError("exec: command must be a string or an array of strings");
                if (cwd !== undefined) body.cwd = cwd;
                if (env !== undefined) body.env = env;
                if (timeoutSeconds !== undefined) body.timeout_seconds = timeoutSeconds;
                const base64 = opts.binary || (stdin !== undefined && typeof stdin !== "string");
                if (base64)
                        body.encoding = "base64";
                if (stdin !== undefined)
                        body.stdin = base64 ? b64encode(toBytes(stdin)) : stdin;
                /* The HTTP deadline must outlast the command's own timeout. */
                const timeoutMs = timeoutSeconds !== undefined
                        ? Math.max(this.client.timeoutMs, timeoutSeconds * 1000 + 30000) : this.client.timeoutMs;
                const binary = base64 ? !!opts.binary : undefined;
                if (!onStdout && !onStderr) {
                        const r = await this.client._json("POST", `${this._base}/exec`, { json: body, timeoutMs, signal });
                        return normalizeResult(r, binary);
                }
                const res = await this.client._raw("POST", `${this._base}/exec`, {
                        json: body, timeoutMs, signal, headers: { Accept: "text/event-stream" },
                });
                const decodeChunk = (d) => (base64 ? (binary ? b64decode(d) : bytesToText(b64decode(d))) : d);
                /* The exit event carries no output (it went out as it came): the result's stdout and stderr
                 * are the chunks joined, so that they are what the unstreamed call answers. */
                const chunks = { stdout: [], stderr: [] };
                try {
                        for await (const ev of parseSse(res.body)) {
                                if (ev.event === "stdout" || ev.event === "stderr") {
                                        const chunk = decodeChunk(JSON.parse(ev.data).data);
                                        chunks[ev.event].push(chunk);
                                        const cb = ev.event === "stdout" ? onStdout : onStderr;
                                        if (cb)
                                                await cb(chunk);
                                } else if (ev.event === "exit") {
                                        const r = normalizeResult(JSON.parse(ev.data), binary);
                                        r.stdout = joinChunks(chunks.stdout, r.stdout, binary);
                                        r.stderr = joinChunks(chunks.stderr, r.stderr, binary);
                                        return r;
                                } else if (ev.event === "error") {
                                        const b = JSON.parse(ev.data);
                                        throw errorFromBody(b.status || 500, b, res.headers);
                                }
                        }
                } catch (e) {
                        throw wrapFetchError(e, "exec stream");
                }
                throw new ConnectionError("exec stream ended without a result", {
                        code: "connection_error", requestId: res.headers.get("x-request-id"),
                });
        }

        /** The sandbox's audit rows, newest first: limit, offset and the filters of GET …/log. */
        async getLog(opts = {}) {
                return (await this.client._json("GET", `${this._base}/log${logQuery(opts, false)}`, { signal: opts.signal })).entries;
        }

        /**
         * New audit rows as they are written, as an async iterator of row objects. A dropped connection
         * is reopened with Last-Event-ID (no gap, no duplicate); errors the gateway sends end it.
         * opts: lastEventId (resume after that row), signal, retryDelayMs, maxRetries (per drop).
         */
        watch(opts = {}) {
                return new Watch(this, opts);
        }

        /**
         * A shell over WebSocket (admin keys only). Node: the `ws` package, sending the Authorization
         * header. Browsers (or useToken: true): mints a single-use token and passes it as ?token=,
         * so the long-lived key never appears in a URL. Resolves once the connection is open.
         * opts: cols, rows, useToken, WebSocket (an implementation to use), binaryType.
         */
        async takeover(opts = {}) {
                return takeover(this, opts);
        }
}

/*
 * An SSE GET that is reopened after a dropped connection (or a gateway that is away: 5xx from 502 on)
 * from resumeId(), sent as Last-Event-ID: yields each event but the error event, which ends it with the
 * typed error, as a refusal (4xx) does. ctrl aborts it; after maxRetries consecutive failed reconnects
 * it throws ConnectionError; onReconnect() runs before each reconnect.
 */
async function* resumingSse(client, path, { resumeId, ctrl, retryDelayMs = 500, maxRetries = 10, what, onReconnect }) {
        let failures = 0;
        for (;;) {
                const headers = { Accept: "text/event-stream" };
                const id = resumeId();
                if (id !== null)
                        headers["Last-Event-ID"] = id;
                try {
                        let res;
                        try {
                                res = await client._raw("GET", path, { headers, timeoutMs: null, signal: ctrl.signal });
                        } catch (e) {
                                /* Refusals (4xx) are final; an unreachable gateway is retried. */
                                if (e instanceof ConnectionError || (e instanceof SandboxdError && e.status >= 502))
                                        throw Object.assign(e, { _retry: true });
                                throw e;
                        }
                        for await (const ev of parseSse(res.body)) {
                                if (ev.event === "error") {
                                        const b = JSON.parse(ev.data);
                                        throw errorFromBody(b.status || 500, b, res.headers);
                                }
                                failures = 0;
                                yield ev;
                        }
                        /* The server ended the stream: reconnect, as EventSource does. */
                } catch (e) {
                        if (ctrl.signal.aborted)
                                return;
                        if (e instanceof SandboxdError && !e._retry)
                                throw e;
                        if (e instanceof SyntaxError)
                                throw e;
                }
                if (ctrl.signal.aborted)
                        return;
                if (++failures > maxRetries)
                        throw new ConnectionError(`${what}: gave up after ${maxRetries} reconnects`, { code: "connection_error" });
                onReconnect();
                try {
                        await sleep(retryDelayMs * Math.min(failures, 8), ctrl.signal);
                } catch {
                        return;
                }
        }
}

class Watch {
        constructor(sb, opts) {
                this._sb = sb;
                this.lastEventId = opts.lastEventId != null ? String(opts.lastEventId) : null;
                this.reconnects = 0;
                this._opts = opts;
                this._ctrl = new AbortController();
                if (opts.signal)
                        opts.signal.addEventListener("abort", () => this._ctrl.abort(opts.signal.reason), { once: true });
        }

        /** Ends the stream (the iterator then finishes). */
        close() {
                this._ctrl.abort();
        }

        async *[Symbol.asyncIterator]() {
                const { retryDelayMs, maxRetries } = this._opts;
                for await (const ev of resumingSse(this._sb.client, `${this._sb._base}/watch`, {
                        resumeId: () => this.lastEventId, ctrl: this._ctrl, retryDelayMs, maxRetries, what: "watch",
                        onReconnect: () => this.reconnects++,
                })) {
                        if (ev.event !== "entry")
                                continue;
                        if (ev.id !== null)
                                this.lastEventId = ev.id;
                        yield JSON.parse(ev.data);
                }
        }
}

/* --- background processes ------------------------------------------------------------------------- */

class Processes {
        constructor(sb) {
                Object.defineProperty(this, "_sb", { value: sb, enumerable: false });
        }

        /**
         * Starts a command in the background (a string for /bin/sh -c, or an argv array) and resolves to
         * its handle once it runs. timeout: its runtime limit in seconds (default the type's longest).
         */
        async start(command, { cwd, env, timeout, signal } = {}) {
                let argv;
                if (typeof command === "string")
                        argv = ["/bin/sh", "-c", command];
                else if (Array.isArray(command))
                        argv = command.map(String);
                else
                        throw new TypeError("processes.start: command must be a string or an array of strings");
                const body = { argv };
                if (cwd !== undefined) body.cwd = cwd;
                if (env !== undefined) body.env = env;
                if (timeout !== undefined) body.timeout_seconds = timeout;
                return new Process(this._sb, await this._sb.client._json("POST", `${this._sb._base}/processes`,
                                                                         { json: body, signal }));
        }

        /** All of them, oldest first, the ended ones too. */
        async list({ signal } = {}) {
                const r = await this._sb.client._json("GET", `${this._sb._base}/processes`, { signal });
                return r.processes.map((p) => new Process(this._sb, p));
        }

        async get(id, { signal } = {}) {
                return new Process(this._sb, await this._sb.client._json("GET", `${this._sb._base}/processes/${enc(id)}`,
                                                                         { signal }));
        }
}

/** A background process's handle; fields mirror the gateway's process object as of the last answer. */
export class Process {
        constructor(sb, info) {
                Object.defineProperty(this, "_sb", { value: sb, enumerable: false });
                this._update(info);
        }

        _update(info) {
                this.info = info;
                this.id = info.id;
                this.sandboxId = info.sandbox ?? this._sb.id;
                this.state = info.state;
                this.exitCode = info.exit_code ?? null;
                this.pid = info.pid;
                this.startedAt = info.started_at;
                this.argv = info.argv;
                this.unit = info.unit;
        }

        get running() {
                return this.state === "running";
        }

        get _base() {
                return `${this._sb._base}/processes/${enc(this.id)}`;
        }

        async refresh({ signal } = {}) {
                this._update(await this._sb.client._json("GET", this._base, { signal }));
                return this;
        }

        /**
         * The output as the process writes it: an async iterator of {stream, data, offset} (data a string,
         * or bytes with binary), what is kept from offset (a number, or "<stdout offset>:<stderr offset>")
         * on, then live, until the process ends. A dropped connection is reopened from the last chunk's
         * position. opts: stream ("both", "stdout", "stderr"), binary, offset, signal, retryDelayMs,
         * maxRetries.
         */
        follow(opts = {}) {
                return new OutputFollow(this, opts);
        }

        [Symbol.asyncIterator]() {
                return this.follow()[Symbol.asyncIterator]();
        }

        /** All of the stream that is kept so far (a string, or bytes with binary). */
        async output(stream = "stdout", { binary = false, signal } = {}) {
                if (stream !== "stdout" && stream !== "stderr")
                        throw new TypeError('output: stream must be "stdout" or "stderr"');
                const r = await this._sb.client._json("GET", `${this._base}/output${query({
                        stream, encoding: binary ? "base64" : undefined,
                })}`, { signal });
                return binary ? b64decode(r.data) : r.data;
        }

        /**
         * Resolves once the process has ended (the follow stream's exit event; the output on the way is
         * dropped) to {exitCode, state}; the handle's fields are then its end's. With timeout (seconds)
         * and the process still running then: Timeout, code "client_timeout" (it goes on).
         */
        async wait({ timeout, signal } = {}) {
                const ctrl = new AbortController();
                let timedOut = false;
                const timer = timeout != null ? setTimeout(() => { timedOut = true; ctrl.abort(); }, timeout * 1000) : null;
                const onAbort = () => ctrl.abort(signal.reason);
                if (signal)
                        signal.addEventListener("abort", onAbort, { once: true });
                const f = this.follow({ signal: ctrl.signal });
                try {
                        for await (const chunk of f) // eslint-disable-line no-unused-vars
                                ;
                } finally {
                        if (timer)
                                clearTimeout(timer);
                        if (signal)
                                signal.removeEventListener("abort", onAbort);
                }
                if (f.exit)
                        return f.exit;
                if (timedOut)
                        throw new Timeout(`process ${this.id} still runs after ${timeout} s`, { code: "client_timeout" });
                throw new ConnectionError(`waiting for process ${this.id} was ended`, { code: "connection_error" });
        }

        /** Sends a signal by name ("TERM", "SIGKILL") or number; an ended process: Conflict. */
        async kill(sig = "TERM", { signal } = {}) {
                this._update(await this._sb.client._json("POST", `${this._base}/signal`, { json: { signal: sig }, signal }));
                return this;
        }

        /** SIGTERM, then SIGKILL if it still runs 5 s later; resolves once it has ended. */
        async stop({ signal } = {}) {
                this._update(await this._sb.client._json("DELETE", this._base, {
                        signal, timeoutMs: Math.max(this._sb.client.timeoutMs, 30000),
                }));
                return this;
        }

        /** Queues data (a string as UTF-8, or bytes) for its stdin; a closed stdin: Conflict. */
        async write(data, { signal } = {}) {
                const json = typeof data === "string" ? { data } : { data: b64encode(toBytes(data)), encoding: "base64" };
                await this._sb.client._json("POST", `${this._base}/stdin`, { json, signal });
        }

        /** Closes its stdin once what was written is read (EOF for the process). */
        async closeStdin({ signal } = {}) {
                await this._sb.client._json("POST", `${this._base}/stdin`, { json: { close: true }, signal });
        }
}

class OutputFollow {
        constructor(proc, opts) {
                const { stream = "both", binary = false, offset } = opts;
                if (!["stdout", "stderr", "both"].includes(stream))
                        throw new TypeError('follow: stream must be "stdout", "stderr" or "both"');
                this._proc = proc;
                this.stream = stream;
                this.binary = binary;
                /* "<stdout offset>:<stderr offset>", as the gateway's event ids */
                this.position = offset != null ? String(offset) : null;
                this.exit = null;
                this.reconnects = 0;
                this._opts = opts;
                this._ctrl = new AbortController();
                if (opts.signal) {
                        if (opts.signal.aborted)
                                this._ctrl.abort(opts.signal.reason);
                        opts.signal.addEventListener("abort", () => this._ctrl.abort(opts.signal.reason), { once: true });
                }
        }

        /** Ends the iteration. */
        close() {
                this._ctrl.abort();
        }

        async *[Symbol.asyncIterator]() {
                const { retryDelayMs, maxRetries } = this._opts;
                const q = query({ follow: "true", stream: this.stream, encoding: this.binary ? "base64" : undefined });
                for await (const ev of resumingSse(this._proc._sb.client, `${this._proc._base}/output${q}`, {
                        resumeId: () => this.position, ctrl: this._ctrl, retryDelayMs, maxRetries, what: "follow",
                        onReconnect: () => this.reconnects++,
                })) {
                        if (ev.event === "stdout" || ev.event === "stderr") {
                                const d = JSON.parse(ev.data);
                                if (ev.id !== null)
                                        this.position = ev.id;
                                yield { stream: ev.event, data: this.binary ? b64decode(d.data) : d.data, offset: d.offset };
                        } else if (ev.event === "exit") {
                                if (ev.id !== null)
                                        this.position = ev.id;
                                this._proc._update(JSON.parse(ev.data));
                                this.exit = { exitCode: this._proc.exitCode, state: this._proc.state };
                                return;
                        }
                }
        }
}

function wsUrl(baseUrl, path, params) {
        return baseUrl.replace(/^http/, "ws") + path + query(params);
}

async function loadNodeWs() {
        try {
                const m = await import("ws");
                return m.default || m.WebSocket;
        } catch (e) {
                throw new SandboxdError("takeover in Node needs the `ws` package (npm install ws)", { code: "missing_dependency", cause: e });
        }
}

async function takeover(sb, opts) {
        const { cols, rows } = opts;
        const path = `${sb._base}/takeover`;
        const client = sb.client;
        const useToken = opts.useToken ?? !isNode;
        let Impl = opts.WebSocket;
        if (!Impl)
                Impl = isNode ? await loadNodeWs() : globalThis.WebSocket;
        let ws;
        if (useToken) {
                const t = await client._json("POST", `${sb._base}/takeover-token`, { signal: opts.signal });
                ws = new Impl(wsUrl(client.baseUrl, path, { token: t.token, cols, rows }));
        } else {
                ws = new Impl(wsUrl(client.baseUrl, path, { cols, rows }), { headers: client._headers() });
        }
        /* The `ws` package is an EventEmitter (and tells a refused upgrade's status and body);
         * a browser WebSocket has only addEventListener. */
        const emitter = typeof ws.on === "function";
        ws.binaryType = opts.binaryType || (emitter ? "nodebuffer" : "arraybuffer");
        const on = (ev, fn) => (emitter ? ws.on(ev, fn) : ws.addEventListener(ev, fn));
        const off = (ev, fn) => (emitter ? ws.off(ev, fn) : ws.removeEventListener(ev, fn));
        return new Promise((resolve, reject) => {
                const cleanup = () => {
                        off("open", onOpen);
                        off("error", onError);
                        off("close", onClose);
                        if (emitter)
                                off("unexpected-response", onUnexpected);
                };
                const onOpen = () => { cleanup(); resolve(ws); };
                const onError = (e) => {
                        cleanup();
                        const err = e && e.error ? e.error : e;
                        reject(err instanceof SandboxdError ? err
                                : new ConnectionError(`takeover: ${(err && err.message) || "the WebSocket failed"}`,
                                        { code: "connection_error", cause: err }));
                };
                const onClose = (ev) => {
                        cleanup();
                        reject(new ConnectionError(`takeover: closed before it opened (${ev && ev.code !== undefined ? ev.code : ev})`,
                                { code: "connection_error" }));
                };
                const onUnexpected = (req, res) => {
                        let text = "";
                        res.setEncoding("utf8");
                        res.on("data", (d) => { text += d; });
                        res.on("end", () => {
                                let body;
                                try { body = JSON.parse(text); } catch { body = { error: text || `HTTP ${res.statusCode}` }; }
                                cleanup();
                                /* Destroying the request makes ws emit an error nobody needs. */
                                ws.on("error", () => {});
                                const h = { get: (k) => res.headers[k.toLowerCase()] };
                                reject(errorFromBody(res.statusCode, body, h));
                                /* terminate() aborts the handshake and frees its socket; req.destroy() alone
                                 * left the process alive for a minute. */
                                res.destroy();
                                ws.terminate();
                        });
                };
                on("open", onOpen);
                on("error", onError);
                on("close", onClose);
                if (emitter)
                        on("unexpected-response", onUnexpected);
        });
}

/**
 * Creates a sandbox, runs fn(sandbox), and deletes the sandbox when fn settles (resolves or throws),
 * unless onExit is "keep". Answers fn's result; fn's error wins over a failed delete.
 */
/* --- images (issue 24) ------------------------------------------------------------------------------ */

/* The gateway's image object with camelCase names (info: as sent). */
function normalizeImage(i) {
        return {
                name: i.name,
                source: i.source,
                createdAt: i.created_at,
                size: i.size,
                digest: i.digest,
                devicesDropped: i.devices_dropped,
                setidStripped: i.setid_stripped,
                ownersReset: i.owners_reset,
                usedBy: i.used_by,
                info: i,
        };
}

/* An archive for the request body: bytes as they are, a path (Node) or a stream read as it is sent. */
async function archiveBody(source) {
        if (source instanceof Uint8Array || source instanceof ArrayBuffer || typeof Blob !== "undefined" && source instanceof Blob)
                return { body: source, duplex: undefined };
        if (typeof source === "string") {
                if (!isNode)
                        throw new TypeError("images.importArchive: a path needs Node; pass bytes or a stream");
                const fs = await import("node:fs");
                const { Readable } = await import("node:stream");
                return { body: Readable.toWeb(fs.createReadStream(source)), duplex: "half" };
        }
        if (typeof ReadableStream !== "undefined" && source instanceof ReadableStream)
                return { body: source, duplex: "half" };
        if (source && typeof source[Symbol.asyncIterator] === "function" || source && typeof source[Symbol.iterator] === "function") {
                const it = source[Symbol.asyncIterator] ? source[Symbol.asyncIterator]() : source[Symbol.iterator]();
                const body = new ReadableStream({
                        async pull(ctl) {
                                const { value, done } = await it.next();
                                if (done)
                                        ctl.close();
                                else
                                        ctl.enqueue(toBytes(value));
                        },
                        async cancel() {
                                await it.return?.();
                        },
                });
                return { body, duplex: "half" };
        }
        throw new TypeError("images.importArchive: source must be bytes, a path, a ReadableStream or an (async) iterable of chunks");
}

class Images {
        constructor(client) {
                this._c = client;
        }

        /** The images sandboxes may be made of (sandbox.read). */
        async list({ signal } = {}) {
                return (await this._c._json("GET", "/v1/images", { signal })).images.map(normalizeImage);
        }

        async get(name, { signal } = {}) {
                return normalizeImage(await this._c._json("GET", `/v1/images/${enc(name)}`, { signal }));
        }

        /** Removes an image (admin keys); Conflict while a sandbox runs on it. */
        async remove(name, { signal } = {}) {
                await this._c._json("DELETE", `/v1/images/${enc(name)}`, { signal });
        }

        /**
         * Imports an archive as image `name` (admin keys) and answers the image once sandboxd's job is done.
         * source: bytes, a path (Node), a ReadableStream or an (async) iterable of chunks: streamed, never
         * read whole. format "tar" (default), "oci-archive" (with tag) or "docker-archive". onProgress gets
         * each progress event ({job, phase, done, total}). An aborted signal cancels the job.
         */
        async importArchive(name, source, { format, tag, onProgress, signal, timeoutMs = 600000 } = {}) {
                const { body, duplex } = await archiveBody(source);
                return this._make(`/v1/images${query({ name, format, tag })}`,
                                  { body, duplex, headers: { "Content-Type": "application/octet-stream" } },
                                  onProgress, signal, timeoutMs);
        }

        /** Builds image `name` with mmdebstrap (suite, variant, packages), as importArchive answers. */
        async build(name, { suite, variant, packages, onProgress, signal, timeoutMs = 3600000 } = {}) {
                const build = {};
                if (suite !== undefined) build.suite = suite;
                if (variant !== undefined) build.variant = variant;
                if (packages !== undefined) build.packages = packages;
                return this._make("/v1/images", { json: { name, build } }, onProgress, signal, timeoutMs);
        }

        async _make(path, opts, onProgress, signal, timeoutMs) {
                const headers = { ...(opts.headers || {}), Accept: onProgress ? "text/event-stream" : "application/json" };
                const res = await this._c._raw("POST", path, { ...opts, headers, signal, timeoutMs });
                if (!onProgress)
                        return normalizeImage(await res.json());
                try {
                        for await (const ev of parseSse(res.body)) {
                                const d = ev.data ? JSON.parse(ev.data) : {};
                                if (ev.event === "progress")
                                        onProgress(d);
                                else if (ev.event === "image")
                                        return normalizeImage(d);
                                else if (ev.event === "error")
                                        throw errorFromBody(d.status || 502, d, res.headers);
                        }
                } catch (e) {
                        throw e instanceof SandboxdError ? e : wrapFetchError(e, `POST ${path}`);
                }
                throw new ConnectionError("POST /v1/images: the stream ended without the image or an error", { code: "connection_error" });
        }
}

export async function withSandbox(client, opts, fn) {
        if (typeof opts === "function") {
                fn = opts;
                opts = {};
        }
        const { onExit = "delete", ...createOpts } = opts || {};
        const sb = await client.createSandbox(createOpts);
        let ok = false;
        try {
                const r = await fn(sb);
                ok = true;
                return r;
        } finally {
                if (onExit === "delete") {
                        try {
                                await sb.delete();
                        } catch (e) {
                                if (ok && !(e instanceof errors.NotFound))
                                        throw e;
                        }
                }
        }
}

export default Client;
