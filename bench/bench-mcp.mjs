// SPDX-License-Identifier: LGPL-2.1-or-later
// bench-mcp: the seed flow (create, write task.py, exec python3, view, str_replace, exec again, delete)
// through the gateway's /mcp with the official MCP TypeScript SDK's client, beside the same flow over REST
// with our JavaScript SDK, alternating in one run; p50/p99 of each and MCP's overhead. Then one cheap call
// (view of a small file in a sandbox kept for it) each way, where MCP's own cost shows most, and the same
// tools/call as a bare fetch() of /mcp, which tells the gateway's part from the MCP client's.
//
// Needs `npm ci` in tests/mcp (the MCP SDK) and in sdk/js. Run as root inside the harness, with the
// gateway up (bench/run-mcp does all of it):
//   tests/harness/sandbox-harness -q run --build BUILD -- /bin/sh -c \
//     'systemctl start sandboxd.service sandbox-auditd.service sandbox-gatewayd.socket && \
//      exec node bench/bench-mcp.mjs --cycles 100'
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

import { Client as RestClient } from "../sdk/js/src/index.js";

/* The MCP SDK lives in tests/mcp/node_modules, pinned by that folder's lockfile. */
const require = createRequire(new URL("../tests/mcp/package.json", import.meta.url));
const load = (p) => import(pathToFileURL(require.resolve(p)).href);
const { Client: McpClient } = await load("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = await load("@modelcontextprotocol/sdk/client/streamableHttp.js");

function arg(name, def) {
        const i = process.argv.indexOf(name);
        return i > 0 ? Number(process.argv[i + 1]) : def;
}
if (process.argv.includes("--help") || process.argv.includes("-h")) {
        console.log("bench-mcp.mjs [--cycles N (100)] [--warmup N (3)] [--port P (8790)]");
        process.exit(0);
}
const CYCLES = arg("--cycles", 100);
const WARMUP = arg("--warmup", 3);
const BASE = `http://127.0.0.1:${arg("--port", 8790)}`;
const TASK = "print(sum(range(1000)))\n";

const made = JSON.parse(execFileSync("sandboxctl", ["api-key", "create", "--preset=admin", "--name=bench-mcp", "--json"],
        { encoding: "utf8" }));
const secret = made.secret;
const rest = new RestClient({ apiKey: secret, baseUrl: BASE, timeoutMs: 120000 });
/* One MCP session for the whole run, as an agent keeps its client: initialize is not part of a cycle. */
const mcp = new McpClient({ name: "bench-mcp", version: "1.0.0" });
await mcp.connect(new StreamableHTTPClientTransport(new URL(`${BASE}/mcp`),
        { requestInit: { headers: { Authorization: `Bearer ${secret}` } } }));
await mcp.listTools(); /* the client validates results against the output schemas it lists */

function check(what, ok, got) {
        if (!ok)
                throw new Error(`${what}: unexpected result ${JSON.stringify(got)}`);
}

async function tool(name, args) {
        const r = await mcp.callTool({ name, arguments: args });
        check(name, !r.isError, r);
        return r.structuredContent;
}

async function viaMcp() {
        const id = (await tool("sandbox_create", { type: "small" })).id;
        try {
                await tool("write_file", { sandbox: id, path: "/tmp/task.py", content: TASK });
                let r = await tool("exec", { sandbox: id, argv: ["python3", "/tmp/task.py"], timeout_seconds: 20 });
                check("exec", r.exit_code === 0 && r.stdout === "499500\n", r);
                r = await tool("view", { sandbox: id, path: "/tmp/task.py" });
                check("view", r.text.includes("range(1000)"), r);
                await tool("str_replace", { sandbox: id, path: "/tmp/task.py", old_str: "1000", new_str: "100" });
                r = await tool("exec", { sandbox: id, argv: ["python3", "/tmp/task.py"], timeout_seconds: 20 });
                check("exec again", r.exit_code === 0 && r.stdout === "4950\n", r);
        } finally {
                await tool("sandbox_delete", { sandbox: id });
        }
}

async function viaRest() {
        const sb = await rest.createSandbox({ type: "small" });
        try {
                await sb.files.write("/tmp/task.py", TASK);
                let r = await sb.exec(["python3", "/tmp/task.py"], { timeoutSeconds: 20 });
                check("exec", r.exitCode === 0 && r.stdout === "499500\n", r);
                const v = await sb.files.view({ path: "/tmp/task.py" });
                check("view", v.text.includes("range(1000)"), v);
                await sb.files.strReplace({ path: "/tmp/task.py", old_str: "1000", new_str: "100" });
                r = await sb.exec(["python3", "/tmp/task.py"], { timeoutSeconds: 20 });
                check("exec again", r.exitCode === 0 && r.stdout === "4950\n", r);
        } finally {
                await sb.delete();
        }
}

function pct(xs, p) {
        const s = [...xs].sort((a, b) => a - b);
        return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

const times = { mcp: [], rest: [], mcpView: [], restView: [], rawView: [] };
let rpcId = 0;

/* A tools/call as one bare POST: what the gateway does for it, without the MCP client's own work. */
async function rawView(id) {
        const res = await fetch(`${BASE}/mcp`, {
                method: "POST",
                headers: { Authorization: `Bearer ${secret}`, "Content-Type": "application/json",
                           Accept: "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25" },
                body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method: "tools/call",
                                       params: { name: "view", arguments: { sandbox: id, path: "/tmp/task.py" } } }),
        });
        const r = await res.json();
        check("raw view", res.status === 200 && !r.result.isError, r);
        return r.result.structuredContent;
}
try {
        for (let i = 0; i < WARMUP; i++) {
                await viaMcp();
                await viaRest();
        }
        /* Alternate, and swap which goes first each cycle, so the shared machine's load falls on both alike. */
        for (let i = 0; i < CYCLES; i++) {
                const order = i % 2 ? [["mcp", viaMcp], ["rest", viaRest]] : [["rest", viaRest], ["mcp", viaMcp]];
                for (const [name, fn] of order) {
                        const t0 = performance.now();
                        await fn();
                        times[name].push(performance.now() - t0);
                }
        }
        /* the cheap call: the same view of the same file, alternating */
        const sb = await rest.createSandbox({ type: "small" });
        try {
                await sb.files.write("/tmp/task.py", TASK);
                for (let i = 0; i < CYCLES * 5 + WARMUP; i++) {
                        const order = [["mcpView", "restView", "rawView"], ["restView", "rawView", "mcpView"],
                                       ["rawView", "mcpView", "restView"]][i % 3];
                        for (const name of order) {
                                const t0 = performance.now();
                                const v = name === "mcpView" ? await tool("view", { sandbox: sb.id, path: "/tmp/task.py" })
                                        : name === "rawView" ? await rawView(sb.id)
                                                             : await sb.files.view({ path: "/tmp/task.py" });
                                check("view", v.text.includes("range(1000)"), v);
                                if (i >= WARMUP)
                                        times[name].push(performance.now() - t0);
                        }
                }
        } finally {
                await sb.delete();
        }
} finally {
        await mcp.close().catch(() => {});
        execFileSync("sandboxctl", ["api-key", "revoke", made.apiKey.id]);
}

const f = (x) => x.toFixed(2).padStart(8);
console.log(`seed flow (create, write task.py, exec, view, str_replace, exec, delete), ${CYCLES} cycles each, alternating:`);
for (const name of ["mcp", "rest"])
        console.log(`  ${(name === "mcp" ? "MCP (/mcp)" : "REST (JS SDK)").padEnd(14)} p50 ${f(pct(times[name], 50))} ms   p99 ${f(pct(times[name], 99))} ms`);
const r50 = pct(times.mcp, 50) / pct(times.rest, 50), r99 = pct(times.mcp, 99) / pct(times.rest, 99);
console.log(`  MCP / REST     p50 ${r50.toFixed(3).padStart(7)}      p99 ${r99.toFixed(3).padStart(7)}     ` +
        `(MCP overhead p50 ${((r50 - 1) * 100).toFixed(1)} %, ${(pct(times.mcp, 50) - pct(times.rest, 50)).toFixed(2)} ms)`);
console.log(`one view call (a 1-line file), ${CYCLES * 5} each, alternating:`);
console.log(`  MCP (/mcp)     p50 ${f(pct(times.mcpView, 50))} ms   p99 ${f(pct(times.mcpView, 99))} ms`);
console.log(`  REST (JS SDK)  p50 ${f(pct(times.restView, 50))} ms   p99 ${f(pct(times.restView, 99))} ms`);
console.log(`  /mcp, fetch()  p50 ${f(pct(times.rawView, 50))} ms   p99 ${f(pct(times.rawView, 99))} ms   (no MCP client)`);
const v50 = pct(times.mcpView, 50) / pct(times.restView, 50);
console.log(`  MCP / REST     p50 ${v50.toFixed(3).padStart(7)}      (${(pct(times.mcpView, 50) - pct(times.restView, 50)).toFixed(2)} ms a call; ` +
        `the gateway's part, /mcp by fetch() / REST: ${(pct(times.rawView, 50) / pct(times.restView, 50)).toFixed(3)})`);
console.log(`target: MCP within +10 % of REST at p50 (seed flow): ${r50 <= 1.10 ? "met" : "NOT MET"}`);
