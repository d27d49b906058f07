// SPDX-License-Identifier: LGPL-2.1-or-later
// End-to-end test of the gateway's dashboard in Debian's headless Chromium (playwright-core, no browser
// download), against the live fleet: sign in, sandboxes, the live audit log, output, paging, the takeover
// terminal, an egress sandbox's network panel and a policy edit, background processes (listed live,
// attached, resumed, signalled, stopped; no controls without `exec`), a sandbox's image and the Images list,
// and a member key's refusal. Run by
// tests/integration/test_dashboard.py inside the harness, which passes GATEWAY_URL, ADMIN_KEY, MEMBER_KEY
// and ARTIFACTS (the screenshots' directory), with test_egress.py's fake internet up for the uplink.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { chromium } from "playwright-core";

const BASE = process.env.GATEWAY_URL || "http://127.0.0.1:8790";
const ADMIN = process.env.ADMIN_KEY;
const MEMBER = process.env.MEMBER_KEY;
const ARTIFACTS = process.env.ARTIFACTS || join(tmpdir(), "dashboard-artifacts");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
// Bounds a hang; no verdict depends on how fast anything is.
const WAIT = 30000;

let context, page, profile;
const urls = []; // every URL the page asked for, WebSockets too
const made = []; // sandboxes to delete at the end
let step = 0;

async function api(method, path, body, key = ADMIN) {
        const headers = { Authorization: `Bearer ${key}` };
        if (body !== undefined)
                headers["Content-Type"] = "application/json";
        const r = await fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
        const text = await r.text();
        if (!r.ok)
                throw new Error(`${method} ${path}: ${r.status} ${text}`);
        return text ? JSON.parse(text) : null;
}

async function newSandbox(name) {
        const sb = await api("POST", "/v1/sandboxes", { name, type: "small", ttl_seconds: 900 });
        made.push(sb.id);
        return sb;
}

async function shot(name) {
        step++;
        await page.screenshot({ path: join(ARTIFACTS, `${String(step).padStart(2, "0")}-${name}.png`), fullPage: true });
}

async function signIn(key) {
        await page.goto(BASE + "/");
        await page.getByRole("textbox", { name: "API key" }).fill(key);
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.locator("#app").waitFor({ state: "visible", timeout: WAIT });
}

async function signOut() {
        await page.getByRole("button", { name: "Sign out" }).click();
        await page.locator("#login").waitFor({ state: "visible", timeout: WAIT });
}

async function openSandbox(sb) {
        await page.getByRole("button", { name: "Refresh the sandbox list" }).click();
        await page.locator(`a.sandbox-link[data-id="${sb.id}"]`).click();
        await page.locator("#detail-title").filter({ hasText: sb.id }).waitFor({ timeout: WAIT });
        await page.locator("#live").filter({ hasText: /^Live$/ }).waitFor({ timeout: WAIT });
}

// The terminal's screen as lines of text, from the DOM rows xterm.js renders.
async function screenLines() {
        return page.locator("#terminal .xterm-rows > div").allTextContents()
                .then((rows) => rows.map((r) => r.replace(/\u00a0/g, " ").trimEnd()));
}

async function waitForLine(pred, what) {
        let lines = [];
        const end = Date.now() + WAIT;
        while (Date.now() < end) {
                lines = await screenLines();
                const hit = lines.find(pred);
                if (hit !== undefined)
                        return hit;
                await page.waitForTimeout(100);
        }
        assert.fail(`the terminal never showed ${what}; screen:\n${lines.join("\n")}`);
}

async function typeInTerminal(text) {
        await page.locator("#terminal .xterm-helper-textarea").focus();
        await page.keyboard.type(text);
        await page.keyboard.press("Enter");
}

before(async () => {
        assert.ok(ADMIN && MEMBER, "ADMIN_KEY and MEMBER_KEY must be set (test_dashboard.py does)");
        mkdirSync(ARTIFACTS, { recursive: true });
        profile = mkdtempSync(join(tmpdir(), "dashboard-chromium-"));
        // A new, empty profile each run (playwright wants it as the persistent context's directory).
        context = await chromium.launchPersistentContext(profile, {
                executablePath: CHROMIUM,
                headless: true,
                args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                       "--disable-background-networking", "--disable-component-update", "--disable-sync"],
                viewport: { width: 1280, height: 800 },
        });
        page = context.pages()[0] || await context.newPage();
        page.on("dialog", (d) => d.accept()); // the delete confirmation
        page.on("request", (r) => urls.push(r.url()));
        page.on("websocket", (ws) => urls.push(ws.url()));
        page.on("pageerror", (e) => console.log(`# page error: ${e.message}`));
        page.on("console", (m) => {
                if (m.type() === "error")
                        console.log(`# console: ${m.text()}`);
        });
});

after(async () => {
        await context?.close();
        for (const id of made)
                await api("DELETE", `/v1/sandboxes/${id}`).catch(() => {});
        if (profile)
                rmSync(profile, { recursive: true, force: true });
});

test("the page is served with its security headers, and its key stays out of the URL", async () => {
        const r = await fetch(BASE + "/");
        assert.equal(r.status, 200);
        assert.match(r.headers.get("content-type"), /^text\/html/);
        const csp = r.headers.get("content-security-policy");
        assert.match(csp, /script-src 'self'(;|$)/);
        assert.match(csp, /frame-ancestors 'none'/);
        assert.equal(r.headers.get("x-content-type-options"), "nosniff");
        assert.equal(r.headers.get("referrer-policy"), "no-referrer");

        await page.goto(BASE + "/");
        await shot("login");
        assert.equal(await page.evaluate(() => sessionStorage.length), 0);
});

test("signing in lists a sandbox made through the API; the key is in sessionStorage only", async () => {
        const sb = await newSandbox("e2e-listed");
        await signIn(ADMIN);
        await page.locator(`a.sandbox-link[data-id="${sb.id}"]`).waitFor({ timeout: WAIT });
        assert.match(await page.locator(`a.sandbox-link[data-id="${sb.id}"]`).textContent(), /e2e-listed/);
        assert.equal(await page.evaluate(() => sessionStorage.getItem("sandboxd.apiKey")), ADMIN);
        assert.equal(await page.evaluate(() => localStorage.length), 0);
        assert.ok(!page.url().includes(ADMIN), page.url());
        assert.deepEqual(await context.cookies(), []);
        await shot("signed-in");

        // a wrong key is refused with the gateway's own words, and not kept
        await signOut();
        await page.getByRole("textbox", { name: "API key" }).fill("sbx_live_notakey");
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.locator("#login-error").filter({ hasText: /refused this key/ }).waitFor({ timeout: WAIT });
        assert.equal(await page.evaluate(() => sessionStorage.getItem("sandboxd.apiKey")), null);
        await signIn(ADMIN);
});

test("a sandbox is created and deleted from the page", async () => {
        const name = `e2e-ui-${Date.now().toString(36)}`;
        await page.locator("details.create summary").click();
        await page.getByLabel("Name (optional)").fill(name);
        await page.getByRole("button", { name: "Create" }).click();
        await page.locator("#detail-title").filter({ hasText: name }).waitFor({ timeout: WAIT });
        const id = (await page.locator("#detail-title").textContent()).match(/\((sb_[a-z2-7]+)\)/)[1];
        made.push(id);
        const listed = (await api("GET", "/v1/sandboxes")).sandboxes.find((s) => s.id === id);
        assert.equal(listed?.name, name);
        await page.locator(`a.sandbox-link[data-id="${id}"]`).waitFor({ timeout: WAIT });
        await shot("created");

        await page.getByRole("button", { name: "Delete" }).click();
        await page.locator(`a.sandbox-link[data-id="${id}"]`).waitFor({ state: "detached", timeout: WAIT });
        const r = await fetch(`${BASE}/v1/sandboxes/${id}`, { headers: { Authorization: `Bearer ${ADMIN}` } });
        assert.equal(r.status, 404);
});

test("an exec through the API appears as a new row without a reload, and its row shows the whole output", async () => {
        const sb = await newSandbox("e2e-live");
        await page.evaluate(() => { window.__sameDocument = true; });
        await openSandbox(sb);
        const before = await page.locator("#log-rows tr").count();
        // more than the 1 KiB a log row carries: the whole output comes from GET /v1/log/{row}/output
        const res = await api("POST", `/v1/sandboxes/${sb.id}/exec`, { command: "seq 1 2000; echo done-marker >&2" });
        assert.equal(res.exit_code, 0);
        const row = page.locator("#log-rows tr").filter({ hasText: "seq 1 2000" });
        await row.waitFor({ timeout: WAIT });
        assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was reloaded");
        assert.equal(await page.locator("#log-rows tr").count(), before + 1);
        // newest first, with its operation and exit code
        const cells = await page.locator("#log-rows tr").first().locator("td").allTextContents();
        assert.equal(cells[3], "exec");
        assert.equal(cells[5], "0");
        // one 24-hour form for every time on the page: the log's times of day, the sandbox's dates
        assert.match(cells[1], /^\d\d:\d\d:\d\d\.\d{3}$/);
        const props = await page.locator("#detail-props dd").allTextContents();
        const dates = props.filter((t) => /\d{4}-/.test(t));
        assert.equal(dates.length, 2, props.join(" | "));
        for (const d of dates)
                assert.match(d, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
        assert.ok(!/\b(AM|PM)\b/i.test(await page.locator("#detail").textContent()));
        // an argv shell-quoted, so that its argument boundaries show
        await api("POST", `/v1/sandboxes/${sb.id}/exec`, { argv: ["echo", "two words", "it's", "", "a/b=c"] });
        const quoted = page.locator("#log-rows tr").filter({ hasText: "two words" });
        await quoted.waitFor({ timeout: WAIT });
        assert.equal(await quoted.locator("td.detail-cell").textContent(), "echo 'two words' 'it'\\''s' '' a/b=c");
        // the create row's detail as key: value text, not JSON
        const create = page.locator("#log-rows tr").filter({ hasText: "sandbox.create" });
        const createDetail = await create.locator("td.detail-cell").getAttribute("title");
        assert.match(createDetail, /(^| · )name: e2e-live( · |$)/);
        assert.match(createDetail, /(^| · )type: small( · |$)/);
        assert.match(createDetail, /(^| · )expires_at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d( · |$)/);
        assert.ok(!/[{}"]/.test(createDetail), createDetail);
        await shot("live-row");

        await row.click();
        await page.locator("#output-stdout").filter({ hasText: "2000" }).waitFor({ timeout: WAIT });
        const out = await page.locator("#output-stdout").textContent();
        assert.ok(out.startsWith("1\n2\n") && out.trimEnd().endsWith("1999\n2000"), out.slice(-40));
        assert.equal(out.length, res.stdout.length);
        assert.match(await page.locator("#output-stderr").textContent(), /done-marker/);
        await shot("row-output");
});

test("older rows are paged in on demand", async () => {
        const sb = await newSandbox("e2e-pages");
        // 55 execs and the create row: more than the page of 50
        for (let i = 0; i < 11; i++)
                await Promise.all([0, 1, 2, 3, 4].map((j) => api("POST", `/v1/sandboxes/${sb.id}/exec`, { argv: ["true", `n${i * 5 + j}`] })));
        // an exec's row reaches the log just after its answer (sandboxd's spool delivers it): wait for
        // all 56, so the page has no row still to come
        const total = 56;
        for (const end = Date.now() + WAIT; ; await new Promise((r) => setTimeout(r, 50))) {
                const n = (await api("GET", `/v1/sandboxes/${sb.id}/log?limit=1000`)).entries.length;
                assert.ok(n <= total, `${n} rows`);
                if (n === total)
                        break;
                assert.ok(Date.now() < end, `only ${n} of ${total} rows in the log`);
        }
        await openSandbox(sb);
        await page.locator("#log-rows tr").nth(49).waitFor({ timeout: WAIT });
        assert.equal(await page.locator("#log-rows tr").count(), 50);
        assert.equal(await page.locator("#log-rows tr").filter({ hasText: "sandbox.create" }).count(), 0);
        await page.getByRole("button", { name: "Load older rows" }).click();
        await page.locator("#log-rows tr").filter({ hasText: "sandbox.create" }).waitFor({ timeout: WAIT });
        assert.equal(await page.locator("#log-rows tr").count(), total);
        assert.equal(await page.getByRole("button", { name: "Load older rows" }).isVisible(), false);
        // still newest first, each row once
        const ids = (await page.locator("#log-rows tr").evaluateAll((trs) => trs.map((t) => Number(t.dataset.id))));
        assert.deepEqual(ids, [...ids].sort((a, b) => b - a));
        assert.equal(new Set(ids).size, ids.length);
        await shot("paged");
});

test("the terminal takes over the sandbox: echo hi shows hi, and resizing the window resizes the shell", async () => {
        const sb = await newSandbox("e2e-term");
        await openSandbox(sb);
        await page.getByRole("button", { name: "Open terminal" }).click();
        await page.locator("#terminal-status").filter({ hasText: /^Connected/ }).waitFor({ timeout: WAIT });
        await typeInTerminal("echo hi");
        await waitForLine((l) => l === "hi", '"hi" on a line of its own');
        await shot("terminal-echo");

        // a terminal emulator, not a text box: colours (SGR 31) and cursor movement (CUB) are interpreted
        await typeInTerminal("printf '\\033[31mRED\\033[0m plain\\n'; printf 'abcd\\033[3DX\\n'");
        await waitForLine((l) => l === "RED plain", "the coloured line");
        await page.locator("#terminal .xterm-rows span.xterm-fg-1", { hasText: "RED" }).first().waitFor({ timeout: WAIT });
        await waitForLine((l) => l === "aXcd", "the line written over by moving the cursor back");

        await typeInTerminal("stty size");
        const size1 = await waitForLine((l) => /^\d+ \d+$/.test(l), "the output of stty size");
        const grid1 = await page.evaluate(() => [window.dashboardTerminal.rows, window.dashboardTerminal.cols]);
        assert.equal(size1, grid1.join(" "));

        await page.setViewportSize({ width: 900, height: 640 });
        await page.waitForFunction((g) => window.dashboardTerminal.cols !== g[1], grid1, { timeout: WAIT });
        const grid2 = await page.evaluate(() => [window.dashboardTerminal.rows, window.dashboardTerminal.cols]);
        await typeInTerminal("clear; stty size");
        const size2 = await waitForLine((l) => l === grid2.join(" "), `stty size saying ${grid2.join(" ")}`);
        assert.notEqual(size2, size1);
        await shot("terminal-resized");
        await page.setViewportSize({ width: 1280, height: 800 });

        // the session is one audit row of the takeover, live in the log once the terminal is closed
        await page.getByRole("button", { name: "Close terminal" }).click();
        const row = page.locator("#log-rows tr").filter({ hasText: "takeover" }).first();
        await row.waitFor({ timeout: WAIT });
        // closing the terminal is how a takeover ends: the hung-up shell's exit 129 reads "closed", not red
        const entry = (await api("GET", `/v1/sandboxes/${sb.id}/log?operation=takeover`)).entries[0];
        assert.equal(entry.exit_code, 129);
        assert.equal(entry.detail.ended_by, "client");
        const cells = await row.locator("td").allTextContents();
        assert.equal(cells[2], "human");
        assert.equal(cells[3], "takeover");
        assert.equal(cells[5], "closed");
        const exitCell = row.locator("td").nth(5);
        assert.ok(!(await exitCell.getAttribute("class")).includes("bad"));
        const colours = await page.evaluate(() => {
                const probe = document.createElement("span");
                probe.style.color = getComputedStyle(document.documentElement).getPropertyValue("--bad");
                document.body.append(probe);
                const bad = getComputedStyle(probe).color;
                probe.remove();
                return bad;
        });
        assert.notEqual(await exitCell.evaluate((e) => getComputedStyle(e).color), colours);
        assert.match(await exitCell.getAttribute("title"), /exit 129/);
        // its detail as key: value text, not JSON
        const detail = await row.locator("td.detail-cell").getAttribute("title");
        assert.match(detail, /(^| · )ended_by: client( · |$)/);
        assert.match(detail, /(^| · )recording: asciicast-v2( · |$)/);
        assert.ok(!/[{}"]/.test(detail), detail);
        await row.click();
        await page.locator("#output-detail").filter({ hasText: "ended_by: client" }).waitFor({ timeout: WAIT });
        await shot("takeover-closed");
        await page.getByRole("button", { name: "Close output" }).click();
});

test("an egress sandbox shows its network, address, policy and counters, and its policy is edited", async () => {
        const sb = await api("POST", "/v1/sandboxes", { name: "e2e-egress", type: "small", ttl_seconds: 900,
                                                        network: "egress",
                                                        egress_policy: { allow: ["203.0.113.0/24"] } });
        made.push(sb.id);
        await openSandbox(sb);
        const panel = page.locator("#network-panel");
        await panel.waitFor({ state: "visible", timeout: WAIT });
        const props = page.locator("#network-props");
        await props.filter({ hasText: sb.egress.address }).waitFor({ timeout: WAIT });
        assert.match(await props.textContent(), /default deny; allow 203\.0\.113\.0\/24; deny nothing/);
        assert.match(await props.textContent(), /Allowed\d+ packets/);
        assert.equal(await page.getByLabel(/^Default/).inputValue(), "deny");
        assert.equal(await page.getByLabel(/^Allow/).inputValue(), "203.0.113.0/24");
        await shot("egress-panel");

        // one edit: another CIDR allowed, a wildcard denied
        await page.getByLabel(/^Allow/).fill("203.0.113.0/24\n198.51.100.0/24\n");
        await page.getByLabel(/^Deny/).fill("*.example.test");
        await page.getByRole("button", { name: "Save policy" }).click();
        await page.locator("#policy-status").filter({ hasText: "Saved." }).waitFor({ timeout: WAIT });
        const want = { default: "deny", allow: ["203.0.113.0/24", "198.51.100.0/24"], deny: ["*.example.test"] };
        assert.deepEqual((await api("GET", `/v1/sandboxes/${sb.id}`)).egress_policy, want);
        await props.filter({ hasText: "deny *.example.test" }).waitFor({ timeout: WAIT });
        await shot("egress-policy-saved");

        // a bad entry: the gateway's sentence, and nothing changed
        await page.getByLabel(/^Allow/).fill("10.0.0.1/8");
        await page.getByRole("button", { name: "Save policy" }).click();
        await page.locator("#policy-error").filter({ hasText: "host bits" }).waitFor({ timeout: WAIT });
        assert.match(await page.locator("#policy-error").textContent(), /HTTP 400, invalid_request/);
        assert.deepEqual((await api("GET", `/v1/sandboxes/${sb.id}`)).egress_policy, want);
        await shot("egress-policy-refused");

        // a sandbox without egress has no network panel
        const plain = await newSandbox("e2e-no-egress");
        await openSandbox(plain);
        assert.equal(await panel.isVisible(), false);
});

// A row of the process list, once its state cell says `state`.
async function processRow(p, state) {
        const row = page.locator(`#proc-rows tr[data-id="${p.id}"]`);
        await row.locator("td").nth(2).filter({ hasText: new RegExp(`^${state}$`) }).waitFor({ timeout: WAIT });
        return row;
}

// What the attached process's output shows of one stream.
async function streamOf(stream) {
        return (await page.locator(`#proc-stream span.${stream}`).allTextContents()).join("");
}

async function waitForStream(text, cls = "stdout") {
        await page.locator(`#proc-stream span.${cls}`, { hasText: text }).first().waitFor({ timeout: WAIT });
}

let procSandbox = null;

test("background processes are listed live, attached to (kept output, then live, resumed), signalled and stopped", async () => {
        procSandbox = await newSandbox("e2e-procs");
        const sb = procSandbox;
        await openSandbox(sb);
        await page.locator("#proc-empty").waitFor({ state: "visible", timeout: WAIT });
        assert.equal(await page.locator("#proc-start-form").isVisible(), true, "an admin key may start one");
        const listGets = () => urls.filter((u) => u.endsWith(`/v1/sandboxes/${sb.id}/processes`)).length;
        const listedBefore = listGets();

        // started through the API: listed without a reload or a click (the watch's process.start row)
        const script = 'echo ready; echo warming >&2; while read l; do echo "got $l"; echo "err $l" >&2; done; echo bye; exit 3';
        const p = await api("POST", `/v1/sandboxes/${sb.id}/processes`, { argv: ["sh", "-c", script] });
        const row = await processRow(p, "running");
        assert.ok(listGets() > listedBefore, "the list was not loaded again");
        const cells = await row.locator("td").allTextContents();
        assert.equal(cells[0], p.id);
        assert.equal(cells[1], `sh -c '${script.replace(/'/g, "'\\''")}'`);
        assert.equal(cells[3], "", "no exit code while it runs");
        assert.match(cells[4], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
        assert.equal(cells[5], p.unit);

        // attach: the kept output first, both streams, stderr told apart
        await row.click();
        await page.locator("#proc-output").waitFor({ state: "visible", timeout: WAIT });
        await waitForStream("ready");
        await waitForStream("warming", "stderr");
        await page.locator("#proc-status").filter({ hasText: /^Live$/ }).waitFor({ timeout: WAIT });
        const colours = await page.evaluate(() => [...["stdout", "stderr"]].map((c) =>
                getComputedStyle(document.querySelector(`#proc-stream span.${c}`)).color));
        assert.notEqual(colours[0], colours[1], "stderr looks like stdout");
        assert.equal(await page.getByRole("button", { name: "Send SIGTERM" }).isEnabled(), true);

        // then live: what it writes after the attach arrives as it writes it
        await api("POST", `/v1/sandboxes/${sb.id}/processes/${p.id}/stdin`, { data: "one\n" });
        await waitForStream("got one");
        await waitForStream("err one", "stderr");
        await shot("process-attached");

        // a dropped connection resumes from its last event's id: nothing twice, nothing left out
        const lastId = await page.evaluate(() => window.dashboardFollow.lastId());
        assert.match(lastId, /^\d+:\d+$/);
        const resumed = page.waitForRequest((r) => r.url().includes(`/processes/${p.id}/output`) &&
                                            r.headers()["last-event-id"] === lastId, { timeout: WAIT });
        await page.evaluate(() => window.dashboardFollow.drop());
        await resumed;
        await page.locator("#proc-status").filter({ hasText: /^Live$/ }).waitFor({ timeout: WAIT });
        await api("POST", `/v1/sandboxes/${sb.id}/processes/${p.id}/stdin`, { data: "two\n", close: true });
        await waitForStream("bye");
        // the end: its status in the output's status line, and in the list, red as an Exec row's would be
        await page.locator("#proc-status").filter({ hasText: "Ended: exited, exit code 3" }).waitFor({ timeout: WAIT });
        // each stream whole, each byte once, in its order (the two pipes are not ordered with each other)
        assert.equal(await streamOf("stdout"), "ready\ngot one\ngot two\nbye\n");
        assert.equal(await streamOf("stderr"), "warming\nerr one\nerr two\n");
        const ended = await processRow(p, "exited");
        const exitCell = ended.locator("td").nth(3);
        assert.equal(await exitCell.textContent(), "3");
        assert.ok((await exitCell.getAttribute("class")).includes("bad"));
        assert.equal(await page.getByRole("button", { name: "Send SIGTERM" }).isDisabled(), true);
        assert.equal(await page.getByRole("button", { name: "Stop" }).isDisabled(), true);
        await shot("process-ended");

        // SIGTERM from the page: the process's own trap answers, live
        const trapped = await api("POST", `/v1/sandboxes/${sb.id}/processes`, {
                argv: ["sh", "-c", "trap 'echo term-caught; exit 7' TERM; echo armed; while :; do sleep 0.1; done"] });
        await (await processRow(trapped, "running")).click();
        await waitForStream("armed");
        await page.getByRole("button", { name: "Send SIGTERM" }).click();
        await waitForStream("term-caught");
        await page.locator("#proc-status").filter({ hasText: "exit code 7" }).waitFor({ timeout: WAIT });
        assert.equal((await api("GET", `/v1/sandboxes/${sb.id}/processes/${trapped.id}`)).exit_code, 7);
        assert.equal(await (await processRow(trapped, "exited")).locator("td").nth(3).textContent(), "7");

        // Stop (DELETE): TERM, then KILL; started from the page's own form
        await page.getByLabel(/^Start a background process/).fill("echo sleeping; exec sleep 600");
        await page.getByRole("button", { name: "Start", exact: true }).click();
        await waitForStream("sleeping");
        const started = (await api("GET", `/v1/sandboxes/${sb.id}/processes`)).processes.at(-1);
        assert.deepEqual(started.argv, ["sh", "-c", "echo sleeping; exec sleep 600"]);
        await page.locator("#proc-output-title").filter({ hasText: started.id }).waitFor({ timeout: WAIT });
        await page.getByRole("button", { name: "Stop" }).click();
        await page.locator("#proc-status").filter({ hasText: "Ended: killed, exit code 143" }).waitFor({ timeout: WAIT });
        const killed = await processRow(started, "killed");
        assert.equal(await killed.locator("td").nth(3).getAttribute("title"), "killed by signal 15");
        assert.equal((await api("GET", `/v1/sandboxes/${sb.id}/processes/${started.id}`)).state, "killed");
        // the audit log has its rows, argv shell-quoted as Exec's
        await page.locator("#log-rows tr").filter({ hasText: "process.exit" }).first().waitFor({ timeout: WAIT });
        await shot("process-stopped");
        await page.getByRole("button", { name: "Detach" }).click();
        assert.equal(await page.locator("#proc-output").isVisible(), false);
});

test("a key without exec sees the processes and their output, but no controls; the gateway still refuses", async () => {
        assert.ok(procSandbox, "the processes test ran first");
        // sandbox.read alone: no exec, and no log.read either, so no watch stream to follow the list by
        const minted = await api("POST", "/v1/api-keys", { name: "e2e-reader", role: "member", ttl_seconds: 900,
                                                           actions: ["sandbox.read"] });
        const watcher = minted.secret;
        try {
                await signOut();
                await signIn(watcher);
                await page.getByRole("button", { name: "Refresh the sandbox list" }).click();
                await page.locator(`a.sandbox-link[data-id="${procSandbox.id}"]`).click();
                const first = (await api("GET", `/v1/sandboxes/${procSandbox.id}/processes`)).processes[0];
                await (await processRow(first, "exited")).click();
                await waitForStream("bye");
                await page.locator("#proc-status").filter({ hasText: "exit code 3" }).waitFor({ timeout: WAIT });
                assert.equal(await page.locator("#proc-start-form").isVisible(), false);
                assert.equal(await page.getByRole("button", { name: "Send SIGTERM" }).isVisible(), false);
                assert.equal(await page.getByRole("button", { name: "Stop" }).isVisible(), false);
                // the log is refused to this key, so the list is reloaded on its own: a new process shows
                await page.locator("#log-error").filter({ hasText: "403" }).waitFor({ timeout: WAIT });
                const late = await api("POST", `/v1/sandboxes/${procSandbox.id}/processes`, { argv: ["sleep", "30"] });
                await processRow(late, "running");
                await shot("process-read-only");
                // hidden is a courtesy: the gateway is what refuses
                const r = await fetch(`${BASE}/v1/sandboxes/${procSandbox.id}/processes/${first.id}/signal`, {
                        method: "POST", headers: { Authorization: `Bearer ${watcher}`, "Content-Type": "application/json" },
                        body: JSON.stringify({ signal: "TERM" }) });
                assert.equal(r.status, 403);
                await api("DELETE", `/v1/sandboxes/${procSandbox.id}/processes/${late.id}`);
        } finally {
                await api("DELETE", `/v1/api-keys/${minted.apiKey.id}`).catch(() => {});
                await signOut().catch(() => {});
                await signIn(ADMIN);
        }
});

// issue 24: an image made through the API (POST /v1/images, a busybox-static tree), a sandbox on it
test("a sandbox's image is shown in the list and its properties, and the Images list shows the store", async () => {
        const { execFileSync } = await import("node:child_process");
        const { copyFileSync } = await import("node:fs");
        const tree = mkdtempSync(join(tmpdir(), "e2e-image-"));
        for (const d of ["bin", "etc", "tmp", "home", "proc", "dev"])
                mkdirSync(join(tree, d));
        copyFileSync("/bin/busybox", join(tree, "bin", "busybox"));
        const tar = execFileSync("tar", ["-C", tree, "--owner=0", "--group=0", "-cf", "-", "."], { maxBuffer: 64 << 20 });
        rmSync(tree, { recursive: true, force: true });
        const name = "e2e-img24";
        await fetch(`${BASE}/v1/images/${name}`, { method: "DELETE", headers: { Authorization: `Bearer ${ADMIN}` } });
        const r = await fetch(`${BASE}/v1/images?name=${name}`, {
                method: "POST", body: tar,
                headers: { Authorization: `Bearer ${ADMIN}`, "Content-Type": "application/x-tar" },
        });
        const image = await r.json();
        assert.equal(r.status, 201, JSON.stringify(image));
        let sb;
        try {
                sb = await api("POST", "/v1/sandboxes", { name: "e2e-image", type: "small", ttl_seconds: 900, image: name });
                made.push(sb.id);
                await openSandbox(sb);
                // the list's line and the properties name the image; a host sandbox's line does not
                const link = page.locator(`a.sandbox-link[data-id="${sb.id}"] .sb-meta`);
                assert.match(await link.textContent(), new RegExp(` · image ${name}$`));
                const props = await page.locator("#detail-props").textContent();
                assert.ok(props.includes(`Image${name}`), props);
                const host = await page.locator("a.sandbox-link .sb-meta").allTextContents();
                assert.ok(host.some((t) => !t.includes(" · image ")), host.join(" | "));
                // the Images list: name, source, size, created, the digest's prefix (whole in its tooltip)
                await page.getByRole("button", { name: "Refresh the image list" }).click();
                const item = page.locator(`#image-list li[data-name="${name}"]`);
                await item.waitFor({ timeout: WAIT });
                assert.equal(await item.locator(".img-name").textContent(), name);
                assert.equal(await item.locator(".img-source").textContent(), "tar");
                assert.match(await item.locator(".img-size").textContent(), /^[0-9.]+ (B|KiB|MiB)$/);
                assert.match(await item.locator(".img-created").textContent(), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
                const digest = item.locator(".img-digest");
                assert.equal(await digest.textContent(), image.digest.slice(0, "sha256:".length + 12));
                assert.equal(await digest.getAttribute("title"), image.digest);
                await shot("images");
        } finally {
                if (sb)
                        await api("DELETE", `/v1/sandboxes/${sb.id}`).catch(() => {});
                await fetch(`${BASE}/v1/images/${name}`, { method: "DELETE", headers: { Authorization: `Bearer ${ADMIN}` } });
        }
});

test("a member key sees the gateway's 403 when it tries to take over", async () => {
        const sb = await newSandbox("e2e-member");
        await signOut();
        assert.equal(await page.evaluate(() => sessionStorage.getItem("sandboxd.apiKey")), null);
        await signIn(MEMBER);
        await openSandbox(sb);
        await page.getByRole("button", { name: "Open terminal" }).click();
        const err = page.locator("#terminal-error");
        await err.filter({ hasText: "403" }).waitFor({ timeout: WAIT });
        const text = await err.textContent();
        // the gateway's own message, as it answered the token request
        const r = await fetch(`${BASE}/v1/sandboxes/${sb.id}/takeover-token`,
                              { method: "POST", headers: { Authorization: `Bearer ${MEMBER}` } });
        assert.equal(r.status, 403);
        const body = await r.json();
        assert.ok(text.includes(body.error), `${text} lacks ${body.error}`);
        assert.equal(await page.locator("#terminal-panel").isVisible(), false);
        assert.ok(!page.url().includes(MEMBER), page.url());
        // the refusal is in the log, live, as a person's takeover: source human, not agent
        const denied = page.locator("#log-rows tr").filter({ hasText: "takeover (denied)" }).first();
        await denied.waitFor({ timeout: WAIT });
        const cells = await denied.locator("td").allTextContents();
        assert.equal(cells[2], "human");
        assert.equal(cells[5], "", "a refusal ran nothing: no exit status");
        assert.equal(await denied.locator("td").nth(2).getAttribute("title"), "human_takeover");
        const detail = await denied.locator("td.detail-cell").getAttribute("title");
        assert.match(detail, /(^| · )status: 403( · |$)/);
        assert.ok(detail.includes(`reason: ${body.error}`), detail);
        await shot("member-403");
});

test("the page is legible in a narrow window", async () => {
        await page.setViewportSize({ width: 420, height: 800 });
        // one column, nothing wider than the window: the open sandbox first, the list below it
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 0, `the page is ${overflow}px wider than the window`);
        const list = await page.locator("nav.sandboxes").boundingBox();
        const detail = await page.locator("#detail").boundingBox();
        assert.ok(list.y >= detail.y + detail.height, "the list is not below the open sandbox");
        assert.ok(detail.width <= 420 && list.width <= 420, `${detail.width} ${list.width}`);
        await shot("narrow");
        // the table scrolls inside its frame rather than widening the page
        await page.locator("#log-rows tr").first().click();
        await page.locator("#output").waitFor({ state: "visible", timeout: WAIT });
        assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
        await shot("narrow-output");
});

test("no URL the page used carried a key; the takeover WebSocket carried a one-time token", async () => {
        assert.ok(urls.length > 20, urls.length);
        for (const u of urls) {
                assert.ok(!u.includes(ADMIN) && !u.includes(MEMBER), u);
                assert.ok(!/sbx_live_/.test(u), u);
        }
        const sockets = urls.filter((u) => u.startsWith("ws:"));
        assert.equal(sockets.length, 1, sockets.join(" "));
        assert.match(sockets[0], /\/takeover\?token=sbx_tt_[^&]+&cols=\d+&rows=\d+$/);
});

test("a sandbox is paused and resumed from the page (issue 26)", async () => {
        const sb = await newSandbox("e2e-pause");
        await openSandbox(sb);
        await page.getByRole("button", { name: "Pause" }).click();
        await page.getByRole("button", { name: "Resume" }).waitFor({ timeout: WAIT });
        await page.locator(`a.sandbox-link[data-id="${sb.id}"] .state-paused`).waitFor({ timeout: WAIT });
        assert.match(await page.locator("#detail-props").textContent(), /paused/);
        const got = await api("GET", `/v1/sandboxes/${sb.id}`);
        assert.equal(got.state, "paused");
        assert.equal(got.paused, true);
        const r = await fetch(`${BASE}/v1/sandboxes/${sb.id}/exec`, {
                method: "POST", headers: { Authorization: `Bearer ${ADMIN}`, "Content-Type": "application/json" },
                body: JSON.stringify({ command: "true" }),
        });
        assert.equal(r.status, 409);
        assert.equal((await r.json()).code, "sandbox_paused");
        await shot("paused");
        await page.getByRole("button", { name: "Resume" }).click();
        await page.getByRole("button", { name: "Pause" }).waitFor({ timeout: WAIT });
        await page.locator(`a.sandbox-link[data-id="${sb.id}"] .state-running`).waitFor({ timeout: WAIT });
        assert.equal((await api("GET", `/v1/sandboxes/${sb.id}`)).paused, false);
});

test("a snapshot is taken, forked and removed from the page (issue 26)", async () => {
        const sb = await newSandbox("e2e-snap");
        await api("POST", `/v1/sandboxes/${sb.id}/exec`, { command: "echo 'from the page' > ~/mark.txt" });
        await openSandbox(sb);
        const before = (await api("GET", "/v1/snapshots")).snapshots.map((s) => s.id);
        await page.getByRole("button", { name: "Snapshot", exact: true }).click();
        const item = page.locator("#snapshot-list li", { hasText: sb.id });
        await item.waitFor({ timeout: WAIT });
        const snap = (await api("GET", "/v1/snapshots")).snapshots.find((s) => !before.includes(s.id));
        assert.equal(snap.source, sb.id);
        await shot("snapshot");
        await item.getByRole("button", { name: /^Create a sandbox from snapshot/ }).click();
        await page.locator("#detail-title").filter({ hasNotText: sb.id }).waitFor({ timeout: WAIT });
        const fork = (await page.locator("#detail-title").textContent()).match(/(sb_[a-z2-7]{10})/)[1];
        made.push(fork);
        const r = await api("POST", `/v1/sandboxes/${fork}/exec`, { command: "cat ~/mark.txt" });
        assert.equal(r.stdout, "from the page\n");
        await item.getByRole("button", { name: /^Remove snapshot/ }).click();
        await item.waitFor({ state: "detached", timeout: WAIT });
        const gone = await fetch(`${BASE}/v1/snapshots/${snap.id}`, { headers: { Authorization: `Bearer ${ADMIN}` } });
        assert.equal(gone.status, 404);
});
