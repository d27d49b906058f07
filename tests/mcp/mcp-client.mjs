// SPDX-License-Identifier: LGPL-2.1-or-later
// Drives an MCP server with the official TypeScript SDK's client, for the integration tests and the bench.
// Usage: node mcp-client.mjs http URL [KEY [ORIGIN]] | stdio COMMAND [ARG…]; a JSON plan on stdin:
//   [{"op":"tools"}, {"op":"call","name":"exec","args":{…},"progress":true}, …]
// Prints one JSON object: the negotiated revision, the server's info, and one result per step (a tool's
// result, or {"error":{"code","message"}} when the call threw). "tools" also compiles every schema with Ajv.
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [kind, ...rest] = process.argv.slice(2);
const plan = JSON.parse(readFileSync(0, "utf8") || "[]");

function transportFor() {
        if (kind === "http") {
                const [url, key, origin] = rest;
                const headers = {};
                if (key) headers.Authorization = `Bearer ${key}`;
                if (origin) headers.Origin = origin;
                return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
        }
        if (kind === "stdio")
                return new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" });
        throw new Error(`unknown transport ${kind}`);
}

function schemaErrors(tools) {
        const ajv = new Ajv({ strict: false });
        const errors = [];
        for (const t of tools)
                for (const [what, s] of [["inputSchema", t.inputSchema], ["outputSchema", t.outputSchema]]) {
                        if (s === undefined) continue;
                        try {
                                ajv.compile(s);
                        } catch (e) {
                                errors.push(`${t.name}.${what}: ${e.message}`);
                        }
                }
        return errors;
}

const out = { steps: [] };
const transport = transportFor();
const client = new Client({ name: "sandboxd-mcp-test", version: "1.0.0" });
try {
        await client.connect(transport);
        out.protocolVersion = transport.protocolVersion ?? null;
        out.serverInfo = client.getServerVersion();
        out.instructions = client.getInstructions() ?? null;
        for (const step of plan) {
                const t0 = performance.now();
                try {
                        if (step.op === "tools") {
                                const r = await client.listTools();
                                out.steps.push({ tools: r.tools, schemaErrors: schemaErrors(r.tools) });
                        } else if (step.op === "call") {
                                const progress = [];
                                const opts = { timeout: 300000 };
                                if (step.progress) opts.onprogress = (p) => progress.push(p);
                                const r = await client.callTool({ name: step.name, arguments: step.args ?? {} },
                                                                undefined, opts);
                                out.steps.push(step.progress ? { ...r, progress } : r);
                        } else if (step.op === "ping") {
                                out.steps.push(await client.ping());
                        } else throw new Error(`unknown op ${step.op}`);
                } catch (e) {
                        out.steps.push({ error: { code: e.code ?? null, message: String(e.message ?? e) } });
                }
                out.steps[out.steps.length - 1].ms = performance.now() - t0;
        }
} catch (e) {
        out.connectError = { code: e.code ?? null, message: String(e.message ?? e) };
} finally {
        await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out) + "\n");
