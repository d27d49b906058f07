// SPDX-License-Identifier: LGPL-2.1-or-later
// The JS SDK against the live fleet (run inside the harness, as root): reference flow, typed errors,
// streamed exec, files, watch live and resumed after a real dropped connection, takeover, API keys, background
// processes (output followed live and resumed after a drop, stdin, kill, wait, list).
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import NodeWebSocket from "ws";

import {
        Client, withSandbox, SandboxdError, BadRequest, Unauthorized, Forbidden, NotFound, Conflict, Unprocessable,
        LimitExceeded, ConnectionError, Sandbox, Timeout, Process,
} from "../src/index.js";

const BASE = process.env.SANDBOXD_URL || "http://127.0.0.1:8790";
let admin, adminSecret;

function sh(...argv) {
        return execFileSync(argv[0], argv.slice(1), { encoding: "utf8" });
}

function cliKey(preset) {
        return JSON.parse(sh("sandboxctl", "api-key", "create", `--preset=${preset}`, "--json"));
}

before(async () => {
        sh("systemctl", "start", "sandbox-auditd.service", "sandbox-gatewayd.socket");
        const k = cliKey("admin");
        adminSecret = k.secret;
        admin = new Client({ apiKey: adminSecret, baseUrl: BASE, timeoutMs: 120000 });
});

function assertTyped(e, Cls, status, code) {
        assert.ok(e instanceof Cls, `expected ${Cls.name}, got ${e && e.name}: ${e && e.message}`);
        assert.ok(e instanceof SandboxdError);
        assert.equal(e.status, status);
        assert.equal(e.code, code);
        assert.match(e.requestId, /^req_[a-z2-7]{20}$/);
        return true;
}

test("reference flow: create, write, exec python3, stdout, deleted afterwards", async () => {
        let id;
        const r = await withSandbox(admin, { type: "small", ttlSeconds: 600, name: `js-ref-${process.pid}` }, async (sb) => {
                id = sb.id;
                assert.match(sb.id, /^sb_[a-z2-7]{10}$/);
                assert.equal(sb.state, "running");
                await sb.files.write("/tmp/task.py", "import sys\nprint(sum(range(10)))\nprint('err', file=sys.stderr)\n");
                return sb.exec("python3 /tmp/task.py", { timeoutSeconds: 30 });
        });
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdout, "45\n");
        assert.equal(r.stderr, "err\n");
        assert.equal(r.timedOut, false);
        assert.equal(r.oomKilled, false);
        assert.equal(r.stdoutTruncated, false);
        assert.equal(typeof r.durationMs, "number");
        await assert.rejects(admin.getSandbox(id), (e) => assertTyped(e, NotFound, 404, "not_found"));
});

test("withSandbox deletes the sandbox when the function throws", async () => {
        let id;
        await assert.rejects(withSandbox(admin, { ttlSeconds: 600 }, async (sb) => {
                id = sb.id;
                await sb.exec(["true"]);
                throw new Error("boom");
        }), /boom/);
        assert.ok(id);
        const ids = (await admin.listSandboxes()).map((s) => s.id);
        assert.ok(!ids.includes(id));
        await assert.rejects(admin.getSandbox(id), NotFound);
});

test("errors are typed: 401, 403, 404, 400 with code and requestId", async () => {
        const bad = new Client({ apiKey: "sbx_live_" + "a".repeat(52), baseUrl: BASE });
        await assert.rejects(bad.listSandboxes(), (e) => assertTyped(e, Unauthorized, 401, "unauthorized"));
        const member = new Client({ apiKey: cliKey("member").secret, baseUrl: BASE });
        await assert.rejects(member.apiKeys.list(), (e) => assertTyped(e, Forbidden, 403, "session_required"));
        await assert.rejects(admin.getSandbox("sb_aaaaaaaaaa"), (e) => assertTyped(e, NotFound, 404, "not_found"));
        await assert.rejects(admin.createSandbox({ type: "no-such-type" }),
                (e) => assertTyped(e, BadRequest, 400, "invalid_request"));
        await assert.rejects(admin.createSandbox({ ttlSeconds: -1 }),
                (e) => assertTyped(e, BadRequest, 400, "invalid_request"));
        /* issue 24: an image the store does not have */
        await assert.rejects(admin.createSandbox({ image: "no-such-image" }),
                (e) => assertTyped(e, NotFound, 404, "not_found"));
        /* A client-side misuse is a TypeError, not a request. */
        assert.throws(() => new Client({ apiKey: "" }), TypeError);
});

test("API keys: create, list, use, revoke; a runner key lacks log.read", async () => {
        const { secret, apiKey } = await admin.apiKeys.create({ name: "js-sdk-runner", preset: "runner", ttlSeconds: 600 });
        assert.match(secret, /^sbx_live_[a-z2-7]{52}$/);
        assert.equal(apiKey.role, "member");
        assert.ok((await admin.apiKeys.list()).some((k) => k.id === apiKey.id));
        const runner = new Client({ apiKey: secret, baseUrl: BASE });
        await withSandbox(runner, { ttlSeconds: 300 }, async (sb) => {
                assert.equal(sb.owner, `key:${apiKey.id}`);
                await assert.rejects(sb.getLog(), (e) => assertTyped(e, Forbidden, 403, "forbidden"));
        });
        await admin.apiKeys.revoke(apiKey.id);
        const listed = (await admin.apiKeys.list()).find((k) => k.id === apiKey.id);
        assert.ok(listed.revokedAt);
        await assert.rejects(runner.listSandboxes(), (e) => assertTyped(e, Unauthorized, 401, "unauthorized"));
        await assert.rejects(admin.apiKeys.revoke("key_aaaaaaaaaaaaaaaaaaaa"), NotFound);
});

test("pause and resume (issue 26)", async () => {
        await withSandbox(admin, { ttlSeconds: 120 }, async (sb) => {
                assert.equal(await sb.pause(), sb);
                assert.equal(sb.state, "paused");
                assert.equal(sb.paused, true);
                assert.ok(sb.pausedAt);
                assert.equal((await admin.getSandbox(sb.id)).state, "paused");
                await assert.rejects(sb.exec("true"), (e) => assertTyped(e, Conflict, 409, "sandbox_paused"));
                await sb.pause(); /* again: nothing changes */
                await sb.resume();
                assert.equal(sb.state, "running");
                assert.equal(sb.paused, false);
                assert.equal(sb.pausedAt, null);
                assert.equal((await sb.exec("echo back")).stdout, "back\n");
        });
});

test("snapshot and fork (issue 26)", async () => {
        await withSandbox(admin, { ttlSeconds: 120 }, async (sb) => {
                await sb.files.write("/home/sandbox/s.txt", "snap\n");
                const snap = await sb.snapshot({ name: `sdk-js-snap-${Date.now().toString(36)}` });
                try {
                        assert.match(snap.id, /^sn_[a-z2-7]{10}$/);
                        assert.equal(snap.source, sb.id);
                        assert.ok((await admin.listSnapshots()).some((s) => s.id === snap.id));
                        assert.deepEqual(await admin.getSnapshot(snap.name), snap);
                        await withSandbox(admin, { snapshot: snap.id, ttlSeconds: 120 }, async (fork) => {
                                assert.equal((await fork.exec("cat ~/s.txt")).stdout, "snap\n");
                        });
                } finally {
                        await admin.deleteSnapshot(snap.id);
                }
                await assert.rejects(admin.getSnapshot(snap.id), (e) => assertTyped(e, NotFound, 404, "not_found"));
        });
});

test("get, list, extend, files in text and bytes, argv, env, cwd, stdin", async () => {
        await withSandbox(admin, { ttlSeconds: 120 }, async (sb) => {
                const got = await admin.getSandbox(sb.id);
                assert.equal(got.id, sb.id);
                assert.ok((await admin.listSandboxes()).some((s) => s.id === sb.id));
                const before = Date.parse(sb.expiresAt);
                await sb.extend(3600);
                assert.ok(Date.parse(sb.expiresAt) > before);

                const bytes = new Uint8Array(256).map((_, i) => i);
                await sb.files.write("/tmp/bin.dat", bytes);
                assert.deepEqual(await sb.files.read("/tmp/bin.dat"), bytes);
                await sb.files.write("/tmp/t.txt", "héllo\n");
                assert.equal(await sb.files.readText("/tmp/t.txt"), "héllo\n");
                assert.equal(await sb.files.read("/tmp/t.txt", { encoding: "utf-8" }), "héllo\n");
                await assert.rejects(sb.files.read("/tmp/missing"), NotFound);

                const r = await sb.exec(["sh", "-c", 'echo "$FOO $(pwd)"; cat'], { env: { FOO: "bar" }, cwd: "/tmp", stdin: "in\n" });
                assert.equal(r.stdout, "bar /tmp\nin\n");
                /* Bytes as stdin travel base64; binary: true answers bytes. */
                const b = await sb.exec(["cat"], { stdin: bytes, binary: true });
                assert.deepEqual(b.stdout, bytes);
                const f = await sb.exec("exit 3");
                assert.equal(f.exitCode, 3);
                await assert.rejects(sb.exec("true", { timeoutSeconds: 100000 }),
                        (e) => assertTyped(e, LimitExceeded, 422, "limit_exceeded"));
        });
});

test("file tools: create, view, str_replace, insert, ls, glob, grep; their refusals typed", async () => {
        await withSandbox(admin, { ttlSeconds: 120 }, async (sb) => {
                assert.deepEqual(await sb.files.create({ path: "src/a.py", content: "x = 1\ny = 2\n", create_dirs: true }),
                        { size: 12, created: true });
                await assert.rejects(sb.files.create({ path: "src/a.py", content: "z" }), (e) => assertTyped(e, Conflict, 409, "conflict"));
                assert.equal((await sb.files.view({ path: "src/a.py", start_line: 2, end_line: 2 })).text, "     2\ty = 2\n");
                await assert.rejects(sb.files.strReplace({ path: "src/a.py", old_str: "nothing", new_str: "z" }),
                        (e) => assertTyped(e, Unprocessable, 422, "no_match") && !(e instanceof LimitExceeded));
                assert.equal((await sb.files.strReplace({ path: "src/a.py", old_str: "y = 2", new_str: "y = 3" })).line, 2);
                assert.equal((await sb.files.insert({ path: "src/a.py", insert_line: 0, new_str: "# top" })).lines, 3);
                assert.equal(await sb.files.readText("src/a.py"), "# top\nx = 1\ny = 3\n");
                assert.deepEqual((await sb.files.ls({ path: "src" })).entries.map((e) => e.name), ["a.py"]);
                assert.deepEqual((await sb.files.glob({ pattern: "**/*.py" })).paths, ["/home/sandbox/src/a.py"]);
                assert.equal((await sb.files.grep({ pattern: "^y", path: "src" })).count, 1);
                await assert.rejects(sb.files.tool("view", { path: "src/a.py", bogus: 1 }), BadRequest);
        });
});

test("streamed exec: callbacks get output as it arrives, then the result", async () => {
        await withSandbox(admin, { ttlSeconds: 120 }, async (sb) => {
                const out = [], err = [];
                const r = await sb.exec("echo one; echo two >&2; echo three; exit 5", {
                        onStdout: (d) => out.push(d), onStderr: (d) => err.push(d),
                });
                assert.equal(out.join(""), "one\nthree\n");
                assert.equal(err.join(""), "two\n");
                assert.equal(r.exitCode, 5);
                assert.equal(r.timedOut, false);
                /* issue 25: the result holds what the callbacks got, as the unstreamed call answers it */
                assert.equal(r.stdout, "one\nthree\n");
                assert.equal(r.stderr, "two\n");
                const plain = await sb.exec("echo one; echo two >&2; echo three; exit 5");
                assert.equal(plain.stdout, r.stdout);
                assert.equal(plain.stderr, r.stderr);
                /* one callback: the other stream is in the result all the same */
                const half = await sb.exec("echo a; echo b >&2", { onStdout: () => {} });
                assert.equal(half.stdout, "a\n");
                assert.equal(half.stderr, "b\n");
                /* bytes, in chunks of their own */
                const chunks = [];
                const bin = await sb.exec("printf '\\001\\002'; sleep 0.2; printf '\\003'",
                                          { binary: true, onStdout: (d) => chunks.push(d) });
                assert.ok(bin.stdout instanceof Uint8Array);
                assert.deepEqual([...bin.stdout], [1, 2, 3]);
                assert.deepEqual(chunks.flatMap((c) => [...c]), [1, 2, 3]);
                await assert.rejects(sb.exec("true", { onStdout: () => {}, timeoutSeconds: 0 }), BadRequest);
        });
});

test("behaviour shared with the Python SDK: connection_error, idempotent delete, $SANDBOXD_API_KEY and $SANDBOXD_URL", async () => {
        /* nothing listens on loopback port 1: no answer at all */
        const nowhere = new Client({ apiKey: adminSecret, baseUrl: "http://127.0.0.1:1" });
        await assert.rejects(nowhere.listSandboxes(), (e) => {
                assert.ok(e instanceof ConnectionError, `${e && e.name}: ${e && e.message}`);
                assert.equal(e.status, 0);
                assert.equal(e.code, "connection_error");
                return true;
        });
        /* deleting twice: the second finds it gone and resolves */
        const sb = await admin.createSandbox({ ttlSeconds: 120 });
        await sb.delete();
        await sb.delete();
        await assert.rejects(admin.getSandbox(sb.id), (e) => assertTyped(e, NotFound, 404, "not_found"));
        /* other refusals of a delete still throw */
        const other = await admin.createSandbox({ ttlSeconds: 120 });
        try {
                const bad = new Client({ apiKey: "sbx_live_" + "a".repeat(52), baseUrl: BASE });
                await assert.rejects(new Sandbox(bad, other.info).delete(),
                                     (e) => assertTyped(e, Unauthorized, 401, "unauthorized"));
                assert.equal((await admin.getSandbox(other.id)).state, "running");
        } finally {
                await other.delete();
        }
        /* the environment, when the options leave the key and the URL out */
        const saved = { key: process.env.SANDBOXD_API_KEY, url: process.env.SANDBOXD_URL };
        try {
                process.env.SANDBOXD_API_KEY = adminSecret;
                process.env.SANDBOXD_URL = `${BASE}/`;
                const fromEnv = new Client();
                assert.equal(fromEnv.baseUrl, BASE);
                assert.ok(Array.isArray(await fromEnv.listSandboxes()));
                process.env.SANDBOXD_URL = "http://127.0.0.1:1";
                await assert.rejects(new Client().listSandboxes(), ConnectionError);
                delete process.env.SANDBOXD_API_KEY;
                assert.throws(() => new Client({ baseUrl: BASE }), TypeError);
                assert.throws(() => new Client({ apiKey: "", baseUrl: BASE }), TypeError);
        } finally {
                for (const [k, v] of [["SANDBOXD_API_KEY", saved.key], ["SANDBOXD_URL", saved.url]])
                        if (v === undefined)
                                delete process.env[k];
                        else
                                process.env[k] = v;
        }
});

function rowText(row) {
        return JSON.stringify(row);
}

test("watch: rows arrive live, and the stream resumes after a dropped connection", async () => {
        await withSandbox(admin, { ttlSeconds: 300 }, async (sb) => {
                const [newest] = await sb.getLog({ limit: 1 });
                const w = sb.watch({ lastEventId: newest.id, retryDelayMs: 200 });
                const it = w[Symbol.asyncIterator]();
                const seen = [];
                const next = async () => {
                        const { value, done } = await it.next();
                        assert.equal(done, false);
                        seen.push(value);
                        return value;
                };
                const until = async (marker) => {
                        for (;;) {
                                const row = await next();
                                if (rowText(row).includes(marker) && row.event !== "started")
                                        return row;
                        }
                };
                const pending = until("marker-one");
                await sb.exec(["echo", "marker-one"]);
                const one = await pending;
                assert.equal(one.session_id, sb.id);
                assert.equal(one.operation, "exec");

                /* A real drop: the gateway process goes away under the open stream. Rows written
                 * while the watcher is away (written over the bus, not through the gateway) must come
                 * after it reconnects, once each, in order. */
                sh("systemctl", "stop", "sandbox-gatewayd.service");
                sh("sandboxctl", "exec", sb.id, "--", "echo", "marker-two");
                sh("sandboxctl", "exec", sb.id, "--", "echo", "marker-three");
                await until("marker-two");
                await until("marker-three");
                assert.ok(w.reconnects >= 1, "the watcher reconnected");
                const ids = seen.map((r) => r.id);
                assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), "no duplicate, no reordering");
                assert.ok(ids[0] > newest.id);
                /* No gap: every row of the sandbox in that id range was seen. */
                const page = await sb.getLog({ afterId: newest.id, limit: 1000 });
                const want = page.map((r) => r.id).filter((id) => id <= ids[ids.length - 1]).sort((a, b) => a - b);
                assert.deepEqual(ids, want);
                /* Back from the newest row seen: the rows below it, newest first. */
                const back = await sb.getLog({ beforeId: ids[ids.length - 1], limit: 2 });
                assert.deepEqual(back.map((r) => r.id), page.map((r) => r.id).filter((id) => id < ids[ids.length - 1])
                                                           .sort((a, b) => b - a).slice(0, 2));
                assert.equal(w.lastEventId, String(ids[ids.length - 1]));
                w.close();
                assert.equal((await it.next()).done, true);
        });
});

async function echoRoundTrip(ws) {
        let out = "";
        const got = new Promise((resolve, reject) => {
                ws.on("message", (data, isBinary) => {
                        if (!isBinary)
                                return;
                        out += Buffer.from(data).toString("utf8");
                        if (/[\r\n]hi\r\n/.test(out))
                                resolve(out);
                });
                ws.on("close", (code) => reject(new Error(`closed (${code}) without "hi": ${JSON.stringify(out)}`)));
        });
        ws.send(Buffer.from("echo hi\n"));
        await got;
        return out;
}

test("export: the events as they stream, since, the directory layout as sandboxctl writes it", async () => {
        const fs = await import("node:fs");
        const os = await import("node:os");
        const path = await import("node:path");
        const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sdk-js-export-"));
        try {
                await withSandbox(admin, { type: "small", ttlSeconds: 600 }, async (sb) => {
                        await sb.exec("echo exported; echo err >&2");
                        await sb.exec("exit 3");
                        await sb.files.write("/tmp/exported.txt", "x");
                        const deadline = Date.now() + 60000;
                        while ((await sb.getLog({ limit: 10 })).length < 4 && Date.now() < deadline)
                                await new Promise((r) => setTimeout(r, 50));

                        const ev = [];
                        for await (const e of admin.export({ sandbox: sb.id }))
                                ev.push(e);
                        assert.deepEqual(ev.map((e) => e.event), [
                                "sandbox.command.started", "sandbox.command.finished", "sandbox.command.started",
                                "sandbox.command.failed", "sandbox.file.write"]);
                        assert.equal(ev[3].exitCode, 3);
                        assert.equal(ev[3].reason, "exit_code");
                        assert.ok(ev.every((e) => e.sandbox === sb.id));
                        const after = [];
                        for await (const e of admin.export({ sandbox: sb.id, since: ev[1].rowId }))
                                after.push(e);
                        assert.deepEqual(after, ev.slice(2));

                        const mine = path.join(tmp, "sdk"), cli = path.join(tmp, "cli");
                        fs.mkdirSync(mine);
                        fs.mkdirSync(cli);
                        const written = [];
                        for await (const e of admin.export({ sandbox: sb.id, dir: mine }))
                                written.push(e);
                        assert.deepEqual(written, ev);
                        execFileSync("sandboxctl", ["log", "--export", cli, sb.id], { stdio: "pipe" });
                        assert.deepEqual(fs.readFileSync(path.join(mine, "audit.jsonl")),
                                         fs.readFileSync(path.join(cli, "audit.jsonl")));
                        const run = ev[0].runId;
                        assert.equal(fs.readFileSync(path.join(mine, run, "stdout.txt"), "utf8"), "exported\n");
                        assert.equal(fs.readFileSync(path.join(mine, run, "stderr.txt"), "utf8"), "err\n");
                        assert.deepEqual(JSON.parse(fs.readFileSync(path.join(mine, run, "metadata.json"), "utf8")),
                                         JSON.parse(fs.readFileSync(path.join(cli, run, "metadata.json"), "utf8")));
                        /* resumed: nothing twice */
                        for await (const e of admin.export({ sandbox: sb.id, dir: mine }))
                                assert.fail(`exported twice: ${JSON.stringify(e)}`);

                        await assert.rejects(async () => { for await (const e of admin.export({ since: "abc" })) void e; },
                                             (e) => assertTyped(e, BadRequest, 400, "invalid_request"));
                        const member = new Client({ apiKey: cliKey("member").secret, baseUrl: BASE });
                        await assert.rejects(async () => { for await (const e of member.export()) void e; },
                                             (e) => assertTyped(e, Forbidden, 403, "forbidden"));
                        await assert.rejects(async () => {
                                for await (const e of admin.export({ dir: path.join(tmp, "missing") })) void e;
                        }, (e) => e.code === "ENOENT");
                });
        } finally {
                fs.rmSync(tmp, { recursive: true, force: true });
        }
});

test("export: a background process is one run, completed when a resumed export reaches its end", async () => {
        const fs = await import("node:fs");
        const os = await import("node:os");
        const path = await import("node:path");
        const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sdk-js-export-proc-"));
        const until = async (pred, what) => {
                const deadline = Date.now() + 60000;
                while (!(await pred())) {
                        if (Date.now() > deadline)
                                assert.fail(`timed out waiting for ${what}`);
                        await new Promise((r) => setTimeout(r, 50));
                }
        };
        const spooled = () => {
                try {
                        return ["0", ""].includes(sh("sqlite3", "/var/lib/sandboxd/audit-spool.db",
                                                     "SELECT count(*) FROM spool").trim());
                } catch {
                        return true;
                }
        };
        const hasRow = async (sb, op) => (await sb.getLog({ limit: 10 })).some((r) => r.operation === op) && spooled();
        try {
                await withSandbox(admin, { type: "small", ttlSeconds: 600 }, async (sb) => {
                        const pid = sh("sandboxctl", "start", sb.id, "--", "sh", "-c", "echo out; exec sleep 1000").trim();
                        await until(async () => (await sb.exec("pgrep -x sleep")).exitCode === 0, "the process's sleep");
                        await until(() => hasRow(sb, "process.start"), "the start row");
                        const mine = path.join(tmp, "sdk"), cli = path.join(tmp, "cli");
                        fs.mkdirSync(mine);
                        fs.mkdirSync(cli);
                        const run = `run-${sb.id}-${pid}`;
                        const first = [];
                        for await (const e of admin.export({ sandbox: sb.id, dir: mine }))
                                if (e.kind === "process")
                                        first.push([e.event, e.runId]);
                        assert.deepEqual(first, [["sandbox.command.started", run]]);
                        let md = JSON.parse(fs.readFileSync(path.join(mine, run, "metadata.json"), "utf8"));
                        assert.equal(md.state, "running");
                        assert.ok(!fs.existsSync(path.join(mine, run, "stdout.txt")));

                        sh("sandboxctl", "kill", sb.id, pid);
                        await until(() => hasRow(sb, "process.exit"), "the exit row");
                        const next = [];
                        for await (const e of admin.export({ sandbox: sb.id, dir: mine }))
                                next.push(e.event);
                        assert.deepEqual(next, ["sandbox.command.signal", "sandbox.command.failed"]);
                        execFileSync("sandboxctl", ["log", "--export", cli, sb.id], { stdio: "pipe" });
                        assert.deepEqual(fs.readFileSync(path.join(mine, "audit.jsonl")),
                                         fs.readFileSync(path.join(cli, "audit.jsonl")));
                        assert.equal(fs.readFileSync(path.join(mine, run, "stdout.txt"), "utf8"), "out\n");
                        md = JSON.parse(fs.readFileSync(path.join(mine, run, "metadata.json"), "utf8"));
                        assert.deepEqual(md, JSON.parse(fs.readFileSync(path.join(cli, run, "metadata.json"), "utf8")));
                        assert.equal(md.state, "killed");
                        assert.deepEqual(md.signals.map((s) => s.signal), [15]);
                });
        } finally {
                fs.rmSync(tmp, { recursive: true, force: true });
        }
});

test("takeover: echo round trip with the header, and with a single-use token", async () => {
        await withSandbox(admin, { ttlSeconds: 300 }, async (sb) => {
                const ws = await sb.takeover({ cols: 80, rows: 24 });
                const out = await echoRoundTrip(ws);
                assert.ok(!out.includes(adminSecret));
                ws.close();

                const ws2 = await sb.takeover({ useToken: true });
                assert.ok(!ws2.url.includes(adminSecret), "the long-lived key never reaches a URL");
                assert.match(ws2.url, /[?&]token=sbx_tt_/);
                await echoRoundTrip(ws2);
                ws2.close();

                const member = new Client({ apiKey: cliKey("member").secret, baseUrl: BASE });
                const msb = await member.getSandbox(sb.id);
                await assert.rejects(msb.takeover(), (e) => assertTyped(e, Forbidden, 403, "forbidden"));
        });
});

/* What a browser has: a WebSocket(url) with addEventListener only, that cannot send headers. */
class BrowserLikeWebSocket {
        constructor(url, protocols) {
                if (protocols !== undefined && !Array.isArray(protocols) && typeof protocols !== "string")
                        throw new TypeError("a browser WebSocket takes no headers");
                this._ws = new NodeWebSocket(url);
                this.url = url;
        }
        set binaryType(t) { this._ws.binaryType = t; }
        get binaryType() { return this._ws.binaryType; }
        addEventListener(ev, fn) { this._ws.addEventListener(ev, fn); }
        removeEventListener(ev, fn) { this._ws.removeEventListener(ev, fn); }
        send(d) { this._ws.send(d); }
        close() { this._ws.close(); }
}

test("takeover the browser's way: token in the URL, DOM events, ArrayBuffer frames", async () => {
        await withSandbox(admin, { ttlSeconds: 300 }, async (sb) => {
                const ws = await sb.takeover({ WebSocket: BrowserLikeWebSocket, useToken: true, cols: 100, rows: 30 });
                assert.ok(ws instanceof BrowserLikeWebSocket);
                assert.equal(ws.binaryType, "arraybuffer");
                assert.match(ws.url, /\/takeover\?token=sbx_tt_[^&]+&cols=100&rows=30$/);
                assert.ok(!ws.url.includes(adminSecret));
                let out = "";
                await new Promise((resolve, reject) => {
                        ws.addEventListener("message", (ev) => {
                                assert.ok(ev.data instanceof ArrayBuffer);
                                out += new TextDecoder().decode(ev.data);
                                if (/[\r\n]hi\r\n/.test(out))
                                        resolve();
                        });
                        ws.addEventListener("close", (ev) => reject(new Error(`closed (${ev.code}): ${JSON.stringify(out)}`)));
                        ws.send(new TextEncoder().encode("echo hi\n"));
                });
                ws.close();
                /* A token works once: the same URL again is refused before the upgrade. */
                await assert.rejects(new Promise((resolve, reject) => {
                        const again = new NodeWebSocket(ws.url);
                        again.on("open", () => { again.close(); resolve(); });
                        again.on("unexpected-response", (req, res) => { req.destroy(); reject(new Error(`HTTP ${res.statusCode}`)); });
                        again.on("error", reject);
                }), /HTTP 401/);
        });
});

// Egress sandboxes need an uplink: tests/integration/test_sdk_js.py runs this suite with test_egress.py's
// fake internet up (203.0.113.10 and 198.51.100.10 serving HTTP on port 8080) and says so in this variable.
const FAKE_INTERNET = process.env.SANDBOXD_TEST_FAKE_INTERNET === "1";

async function reaches(sb, addr) {
        const r = await sb.exec(["curl", "-s", "-S", "-m", "3", `http://${addr}:8080/`]);
        return r.exitCode === 0 && r.stdout.includes("upstream says hello");
}

test("network egress: the policy at creation, counters, setNetworkPolicy, its refusals typed",
     { skip: !FAKE_INTERNET && "needs test_egress.py's fake internet (run through test_sdk_js.py)" }, async () => {
        await withSandbox(admin, { type: "small", ttlSeconds: 600, network: "egress",
                                   egressPolicy: { allow: ["203.0.113.0/24"] } }, async (sb) => {
                assert.equal(sb.network, "egress");
                assert.deepEqual(sb.egressPolicy, { default: "deny", allow: ["203.0.113.0/24"], deny: [] });
                assert.match(sb.egressAddress, /^10\.237\./);
                const before = { ...sb.egressCounters };
                assert.ok(await reaches(sb, "203.0.113.10"));
                assert.ok(!(await reaches(sb, "198.51.100.10")));
                await sb.refresh();
                assert.ok(sb.egressCounters.allowed_packets > before.allowed_packets);
                assert.ok(sb.egressCounters.denied_packets > before.denied_packets);

                assert.equal(await sb.setNetworkPolicy({ default: "deny", allow: ["198.51.100.0/24"] }), sb);
                assert.deepEqual(sb.egressPolicy, { default: "deny", allow: ["198.51.100.0/24"], deny: [] });
                assert.ok(await reaches(sb, "198.51.100.10"));
                assert.ok(!(await reaches(sb, "203.0.113.10")));
                assert.deepEqual((await admin.getSandbox(sb.id)).egressPolicy, sb.egressPolicy);

                await assert.rejects(sb.setNetworkPolicy({ allow: ["10.0.0.1/8"] }),
                                     (e) => assertTyped(e, BadRequest, 400, "invalid_request") && /host bits/.test(e.message));
                await assert.rejects(sb.setNetworkPolicy({ allow: "pypi.org" }),
                                     (e) => assertTyped(e, BadRequest, 400, "invalid_request"));
                assert.deepEqual((await sb.refresh()).egressPolicy, { default: "deny", allow: ["198.51.100.0/24"], deny: [] });
        });
        await withSandbox(admin, { type: "small", ttlSeconds: 600 }, async (sb) => {
                assert.equal(sb.egressPolicy, null);
                assert.equal(sb.egressAddress, null);
                assert.equal(sb.egressCounters, null);
                await assert.rejects(sb.setNetworkPolicy({ default: "allow" }),
                                     (e) => assertTyped(e, Conflict, 409, "not_egress"));
        });
        await assert.rejects(admin.createSandbox({ type: "small", network: "egress", egressPolicy: { bad: 1 } }),
                             (e) => assertTyped(e, BadRequest, 400, "invalid_request"));
});

test("the key never appears in sandbox output or its log", async () => {
        await withSandbox(admin, { ttlSeconds: 120 }, async (sb) => {
                const r = await sb.exec("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ps -ef 2>/dev/null; true");
                assert.equal(r.exitCode, 0);
                assert.ok(r.stdout.length > 0);
                assert.ok(!r.stdout.includes(adminSecret) && !r.stderr.includes(adminSecret));
                const rows = await sb.getLog({ limit: 100 });
                assert.ok(rows.length > 0);
                assert.ok(!JSON.stringify(rows).includes(adminSecret));
                assert.ok(!JSON.stringify(admin).includes(adminSecret), "the client does not serialise its key");
                assert.ok(!JSON.stringify(sb).includes(adminSecret));
        });
});

/* --- background processes ------------------------------------------------------------------------- */

/* Reads chunks from an iterator until the joined text of each stream is what want says. */
async function readUntil(it, chunks, want) {
        const joined = (s) => chunks.filter((c) => c.stream === s).map((c) => c.data).join("");
        while (Object.entries(want).some(([s, text]) => joined(s) !== text)) {
                const { value, done } = await it.next();
                assert.equal(done, false, `the stream ended at ${JSON.stringify(chunks)}`);
                chunks.push(value);
        }
}

function checkOffsets(chunks) {
        const pos = { stdout: 0, stderr: 0 };
        for (const c of chunks) {
                assert.equal(c.offset, pos[c.stream], JSON.stringify(chunks));
                pos[c.stream] += Buffer.byteLength(c.data);
        }
        return pos;
}

test("processes: a server's output live, stdin, list and get, kill, wait", async () => {
        await withSandbox(admin, { type: "small", ttlSeconds: 600 }, async (sb) => {
                const server = await sb.processes.start(["python3", "-u", "-c", [
                        "import http.server",
                        "class H(http.server.BaseHTTPRequestHandler):",
                        "    def do_GET(self):",
                        "        self.send_response(200); self.end_headers(); self.wfile.write(b'pong')",
                        "    def log_message(self, *a):",
                        "        print('served', self.path, flush=True)",
                        "s = http.server.HTTPServer(('127.0.0.1', 8124), H)",
                        "print('listening', flush=True)",
                        "s.serve_forever()",
                ].join("\n")], { cwd: "/tmp", env: { SDK: "js" }, timeout: 600 });
                assert.ok(server instanceof Process);
                assert.match(server.id, /^p\d+$/);
                assert.equal(server.state, "running");
                assert.equal(server.running, true);
                assert.equal(server.exitCode, null);
                assert.equal(server.sandboxId, sb.id);
                assert.ok(server.pid > 0);
                const f = server.follow({ stream: "stdout" });
                const it = f[Symbol.asyncIterator]();
                const chunks = [];
                await readUntil(it, chunks, { stdout: "listening\n" });
                /* live: a request made after the follow began shows up in it */
                const r = await sb.exec(`python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8124/x').read().decode())"`);
                assert.equal(r.stdout, "pong\n");
                await readUntil(it, chunks, { stdout: "listening\nserved /x\n" });
                checkOffsets(chunks);
                assert.equal(f.position, `${"listening\nserved /x\n".length}:0`);
                f.close();
                assert.equal((await it.next()).done, true);
                assert.equal(await server.output(), "listening\nserved /x\n");
                assert.equal(await server.output("stderr"), "");

                /* stdin through cat; list and get */
                const cat = await sb.processes.start("exec cat");
                await cat.write("hello\n");
                await cat.write(new Uint8Array([0xc3, 0xa9, 0x0a]));
                const ids = (await sb.processes.list()).map((p) => p.id);
                assert.ok(ids.indexOf(server.id) >= 0 && ids.indexOf(server.id) < ids.indexOf(cat.id));
                assert.deepEqual((await sb.processes.get(cat.id)).argv, ["/bin/sh", "-c", "exec cat"]);
                await cat.closeStdin();
                assert.deepEqual(await cat.wait(), { exitCode: 0, state: "exited" });
                assert.equal(cat.state, "exited");
                assert.equal(cat.exitCode, 0);
                assert.equal(await cat.output(), "hello\né\n");
                assert.deepEqual(await cat.output("stdout", { binary: true }),
                                 new Uint8Array([...Buffer.from("hello\n"), 0xc3, 0xa9, 0x0a]));
                await assert.rejects(cat.write("late\n"), (e) => assertTyped(e, Conflict, 409, "conflict"));

                /* kill: SIGTERM ends the server; wait says so; refresh agrees */
                assert.equal((await server.kill()).id, server.id);
                assert.deepEqual(await server.wait({ timeout: 60 }), { exitCode: 143, state: "killed" });
                assert.equal((await server.refresh()).exitCode, 143);
                await assert.rejects(server.kill("KILL"), (e) => assertTyped(e, Conflict, 409, "conflict"));
        });
});

test("processes: both streams to the end, resumed after a real dropped connection", async () => {
        await withSandbox(admin, { type: "small", ttlSeconds: 600 }, async (sb) => {
                const p = await sb.processes.start("for i in 1 2 3; do echo out$i; echo err$i >&2; read x; done; exit 7");
                const f = p.follow({ retryDelayMs: 200 });
                const it = f[Symbol.asyncIterator]();
                const chunks = [];
                await readUntil(it, chunks, { stdout: "out1\n", stderr: "err1\n" });
                /* A real drop: the gateway goes away under the open stream. What the process writes
                 * meanwhile (its stdin written over the bus, not through the gateway) must come after
                 * the follow reconnects, once, in order. */
                sh("systemctl", "stop", "sandbox-gatewayd.service");
                sh("busctl", "call", "org.sandboxd.sandbox1", "/org/sandboxd/sandbox1", "org.sandboxd.sandbox1.Manager",
                   "WriteProcessStdin", "ssayb", sb.id, p.id, "4", "97", "10", "98", "10", "false");
                await readUntil(it, chunks, { stdout: "out1\nout2\nout3\n", stderr: "err1\nerr2\nerr3\n" });
                assert.ok(f.reconnects >= 1, "the follow reconnected");
                assert.deepEqual(checkOffsets(chunks), { stdout: 15, stderr: 15 });
                await p.write("c\n");
                assert.equal((await it.next()).done, true);
                assert.deepEqual(f.exit, { exitCode: 7, state: "exited" });
                assert.deepEqual(await p.wait(), { exitCode: 7, state: "exited" });

                /* from a position; the whole with for await … of p; bytes */
                let text = "";
                for await (const c of p.follow({ stream: "stdout", offset: "5:0" }))
                        text += c.data;
                assert.equal(text, "out2\nout3\n");
                const all = [];
                for await (const c of p)
                        all.push(c);
                checkOffsets(all);
                const err = [];
                for await (const c of p.follow({ binary: true }))
                        if (c.stream === "stderr")
                                err.push(...c.data);
                assert.equal(Buffer.from(err).toString(), "err1\nerr2\nerr3\n");
        });
});

test("processes: wait's timeout, stop, errors", async () => {
        await withSandbox(admin, { type: "small", ttlSeconds: 600 }, async (sb) => {
                const p = await sb.processes.start(["sh", "-c", "trap '' TERM; echo up; while :; do sleep 1; done"]);
                await assert.rejects(p.wait({ timeout: 0.5 }), (e) => e instanceof Timeout && e.code === "client_timeout" && e.status === 0);
                assert.equal((await p.refresh()).running, true);
                const stopped = await p.stop();
                assert.equal(stopped.state, "killed");
                assert.equal(stopped.exitCode, 137);
                assert.deepEqual(await p.wait(), { exitCode: 137, state: "killed" });
                await assert.rejects(sb.processes.get("p999999"), (e) => assertTyped(e, NotFound, 404, "not_found"));
                await assert.rejects(sb.processes.start(["/no/such/program"]), (e) => assertTyped(e, NotFound, 404, "not_found"));
                await assert.rejects(sb.processes.start([]), (e) => assertTyped(e, BadRequest, 400, "invalid_request"));
                await assert.rejects(p.kill("NOSUCHSIGNAL"), (e) => assertTyped(e, BadRequest, 400, "invalid_request"));
                assert.throws(() => p.follow({ stream: "stdin" }), TypeError);
        });
});

/* --- issue 24: the images namespace ------------------------------------------------------------------ */

async function tinyRootfs() {
        const fs = await import("node:fs");
        const os = await import("node:os");
        const path = await import("node:path");
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sdkimg-"));
        for (const d of ["bin", "etc", "tmp", "home", "proc", "dev"])
                fs.mkdirSync(path.join(dir, d));
        fs.copyFileSync("/bin/busybox", path.join(dir, "bin", "busybox"));
        const tar = execFileSync("tar", ["-C", dir, "--owner=0", "--group=0", "-cf", "-", "."], { maxBuffer: 64 << 20 });
        const file = path.join(os.tmpdir(), `sdkimg-${process.pid}.tar`);
        fs.writeFileSync(file, tar);
        fs.rmSync(dir, { recursive: true });
        return { bytes: new Uint8Array(tar), file };
}

async function dropImage(name) {
        await admin.images.remove(name).catch((e) => {
                if (!(e instanceof NotFound))
                        throw e;
        });
}

test("images: importArchive from bytes (with progress), a path and an async iterable; list, get, remove", async () => {
        const { createHash } = await import("node:crypto");
        const fs = await import("node:fs");
        const { bytes, file } = await tinyRootfs();
        const digest = "sha256:" + createHash("sha256").update(bytes).digest("hex");
        const names = ["jsimg-bytes", "jsimg-path", "jsimg-iter"];
        for (const n of names)
                await dropImage(n);
        try {
                const progress = [];
                const img = await admin.images.importArchive("jsimg-bytes", bytes, { onProgress: (p) => progress.push(p) });
                assert.equal(img.name, "jsimg-bytes");
                assert.equal(img.source, "tar");
                assert.equal(img.digest, digest);
                assert.ok(progress.length > 0 && "phase" in progress[0] && "done" in progress[0]);
                assert.equal((await admin.images.importArchive("jsimg-path", file)).digest, digest);
                async function* chunks() {
                        for (let i = 0; i < bytes.length; i += 10000)
                                yield bytes.slice(i, i + 10000);
                }
                assert.equal((await admin.images.importArchive("jsimg-iter", chunks())).digest, digest);
                const listed = new Set((await admin.images.list()).map((i) => i.name));
                for (const n of names)
                        assert.ok(listed.has(n), n);
                const got = await admin.images.get("jsimg-path");
                assert.equal(got.digest, digest);
                assert.deepEqual(got.usedBy, []);
                await assert.rejects(admin.images.importArchive("jsimg-path", bytes), (e) => assertTyped(e, Conflict, 409, "conflict"));
        } finally {
                for (const n of names)
                        await dropImage(n);
                fs.rmSync(file, { force: true });
        }
        await assert.rejects(admin.images.get("jsimg-path"), (e) => assertTyped(e, NotFound, 404, "not_found"));
});

test("images: a refused archive, bad build input and a member key are typed errors with nothing made", async () => {
        const before = (await admin.images.list()).map((i) => i.name).sort();
        const junk = new TextEncoder().encode("no archive at all\n".repeat(100));
        await assert.rejects(admin.images.importArchive("jsimg-bad", junk), (e) => assertTyped(e, BadRequest, 400, "invalid_image"));
        await assert.rejects(admin.images.importArchive("jsimg-bad", junk, { onProgress: () => {} }),
                             (e) => assertTyped(e, BadRequest, 400, "invalid_image"));
        await assert.rejects(admin.images.build("jsimg-bad", { variant: "enormous", onProgress: () => {} }),
                             (e) => assertTyped(e, BadRequest, 400, "invalid_request") && /variant/.test(e.message));
        const member = new Client({ apiKey: cliKey("member").secret, baseUrl: BASE });
        const { bytes } = await tinyRootfs();
        await assert.rejects(member.images.importArchive("jsimg-bad", bytes), (e) => assertTyped(e, Forbidden, 403, "forbidden"));
        await assert.rejects(member.images.build("jsimg-bad"), (e) => assertTyped(e, Forbidden, 403, "forbidden"));
        assert.deepEqual((await admin.images.list()).map((i) => i.name).sort(), before);
});
