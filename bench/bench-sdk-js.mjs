// SPDX-License-Identifier: LGPL-2.1-or-later
// bench-sdk-js: the reference cycle (create, write task.py, exec python3, delete) through the JS SDK
// beside the same four requests made with bare fetch(), alternating in one run; p50/p99 and overhead.
//
// Run as root inside the harness, with the gateway up:
//   tests/harness/sandbox-harness -q run --build BUILD -- /bin/sh -c \
//     'systemctl start sandboxd.service sandbox-auditd.service sandbox-gatewayd.socket && \
//      exec node bench/bench-sdk-js.mjs --cycles 100'
import { execFileSync } from "node:child_process";
import { performance } from "node:perf_hooks";

import { Client } from "../sdk/js/src/index.js";

function arg(name, def) {
        const i = process.argv.indexOf(name);
        return i > 0 ? Number(process.argv[i + 1]) : def;
}
if (process.argv.includes("--help") || process.argv.includes("-h")) {
        console.log("bench-sdk-js.mjs [--cycles N (100)] [--warmup N (3)] [--port P (8790)]");
        process.exit(0);
}
const CYCLES = arg("--cycles", 100);
const WARMUP = arg("--warmup", 3);
const BASE = `http://127.0.0.1:${arg("--port", 8790)}`;
const TASK = "print(sum(range(1000)))\n";
const WANT = "499500\n";

const made = JSON.parse(execFileSync("sandboxctl", ["api-key", "create", "--preset=admin", "--name=bench-sdk-js", "--json"],
        { encoding: "utf8" }));
const secret = made.secret;
const client = new Client({ apiKey: secret, baseUrl: BASE, timeoutMs: 120000 });

async function viaSdk() {
        const sb = await client.createSandbox({ type: "small" });
        try {
                await sb.files.write("/tmp/task.py", TASK);
                const r = await sb.exec(["python3", "/tmp/task.py"], { timeoutSeconds: 20 });
                if (r.exitCode !== 0 || r.stdout !== WANT)
                        throw new Error(`sdk: unexpected result ${JSON.stringify(r)}`);
        } finally {
                await sb.delete();
        }
}

/* What a careful user writes without the SDK: the same requests, status checks, nothing else. */
async function viaFetch() {
        const auth = { Authorization: `Bearer ${secret}` };
        const json = { ...auth, "Content-Type": "application/json" };
        let res = await fetch(`${BASE}/v1/sandboxes`, { method: "POST", headers: json, body: JSON.stringify({ type: "small" }) });
        if (res.status !== 201)
                throw new Error(`fetch: create ${res.status} ${await res.text()}`);
        const id = (await res.json()).id;
        try {
                res = await fetch(`${BASE}/v1/sandboxes/${id}/files?path=/tmp/task.py`, { method: "PUT", headers: auth, body: TASK });
                if (res.status !== 204)
                        throw new Error(`fetch: put ${res.status} ${await res.text()}`);
                res = await fetch(`${BASE}/v1/sandboxes/${id}/exec`, {
                        method: "POST", headers: json, body: JSON.stringify({ argv: ["python3", "/tmp/task.py"], timeout_seconds: 20 }),
                });
                const r = await res.json();
                if (res.status !== 200 || r.exit_code !== 0 || r.stdout !== WANT)
                        throw new Error(`fetch: unexpected result ${JSON.stringify(r)}`);
        } finally {
                res = await fetch(`${BASE}/v1/sandboxes/${id}`, { method: "DELETE", headers: auth });
                if (res.status !== 204)
                        throw new Error(`fetch: delete ${res.status} ${await res.text()}`);
        }
}

function pct(xs, p) {
        const s = [...xs].sort((a, b) => a - b);
        return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

const times = { sdk: [], fetch: [] };
try {
        for (let i = 0; i < WARMUP; i++) {
                await viaSdk();
                await viaFetch();
        }
        /* Alternate, and swap which goes first each cycle, so the shared machine's load falls on both alike. */
        for (let i = 0; i < CYCLES; i++) {
                const order = i % 2 ? [["sdk", viaSdk], ["fetch", viaFetch]] : [["fetch", viaFetch], ["sdk", viaSdk]];
                for (const [name, fn] of order) {
                        const t0 = performance.now();
                        await fn();
                        times[name].push(performance.now() - t0);
                }
        }
} finally {
        execFileSync("sandboxctl", ["api-key", "revoke", made.apiKey.id]);
}

const f = (x) => x.toFixed(2).padStart(8);
console.log(`reference cycle (create, PUT task.py, exec python3, delete), ${CYCLES} cycles each, alternating:`);
for (const name of ["sdk", "fetch"])
        console.log(`  ${(name === "sdk" ? "JS SDK" : "bare fetch()").padEnd(14)} p50 ${f(pct(times[name], 50))} ms   p99 ${f(pct(times[name], 99))} ms`);
const o50 = (pct(times.sdk, 50) / pct(times.fetch, 50) - 1) * 100;
const o99 = (pct(times.sdk, 99) / pct(times.fetch, 99) - 1) * 100;
console.log(`  SDK overhead   p50 ${o50.toFixed(1).padStart(7)} %    p99 ${o99.toFixed(1).padStart(7)} %   ` +
        `(p50 difference ${(pct(times.sdk, 50) - pct(times.fetch, 50)).toFixed(2)} ms)`);
console.log(`target: SDK overhead at p50 <= 10 %: ${o50 <= 10 ? "met" : "NOT MET"}`);
