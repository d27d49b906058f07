// SPDX-License-Identifier: LGPL-2.1-or-later
// TypeScript declarations of the sandbox-gatewayd JavaScript SDK (hand-written; the SDK has no build step).

export interface ClientOptions {
        /** An API key's secret (`sbx_live_…`); in Node defaults to $SANDBOXD_API_KEY. */
        apiKey?: string;
        /** Defaults to $SANDBOXD_URL in Node, else http://127.0.0.1:8790. */
        baseUrl?: string;
        /** Per-request deadline (default 60000); exec with timeoutSeconds waits that long plus 30 s. */
        timeoutMs?: number;
        /** A fetch implementation (default globalThis.fetch). */
        fetch?: typeof fetch;
}

export interface RequestOptions {
        signal?: AbortSignal;
}

export interface SandboxLimits {
        cpu_quota_percent: number | null;
        memory_max: number | null;
        tasks_max: number | null;
        /** Bytes of the disk holding home, /tmp and /var/tmp; null: no quota. */
        disk_max: number | null;
        timeout_seconds_default: number | null;
        timeout_seconds_max: number | null;
}

/** An egress sandbox's policy: entries are names, "*." wildcards and CIDRs (at most 256 in both lists). */
export interface EgressPolicy {
        default?: "deny" | "allow";
        allow?: string[];
        deny?: string[];
}

/** Packets and bytes the sandbox's firewall let out and dropped, as the gateway sends them. */
export interface EgressCounters {
        allowed_packets: number;
        allowed_bytes: number;
        denied_packets: number;
        denied_bytes: number;
}

/** Issue 26: a snapshot of a sandbox's disk, as sent. */
export interface SnapshotInfo {
        id: string;
        name: string;
        source: string;
        type: string;
        /** the image its source ran on ("host": the host's tree); a sandbox made from it runs on it too */
        image: string;
        owner: string;
        created_at: string;
        size: number;
}

/** The gateway's sandbox object, as sent (snake_case). */
export interface SandboxInfo {
        id: string;
        name: string;
        type: string;
        state: "starting" | "running" | "paused" | "stopping" | "failed";
        network: "none" | "egress" | "host";
        /** the image its root is made of, or "host" (issue 24) */
        image: string;
        /** network "egress" only; all three fields */
        egress_policy: Required<EgressPolicy> | null;
        egress: { address: string; counters: EgressCounters } | null;
        owner: string;
        created_at: string;
        expires_at: string;
        limits: SandboxLimits | null;
        /** issue 26 */
        paused: boolean;
        paused_at: string | null;
}

export interface CreateSandboxOptions extends RequestOptions {
        type?: string;
        ttlSeconds?: number;
        name?: string;
        network?: "none" | "egress" | "host";
        /** with network "egress"; without it the type's policy */
        egressPolicy?: EgressPolicy;
        /** "host" or an image of sandboxd's store; without it the type's Image= */
        image?: string;
        /** issue 26: a snapshot's id or name: the new sandbox's disk is a copy of it */
        snapshot?: string;
}

export interface WithSandboxOptions extends CreateSandboxOptions {
        /** "delete" (default): delete the sandbox when the function settles; "keep": leave it. */
        onExit?: "delete" | "keep";
}

export interface ExecOptions extends RequestOptions {
        cwd?: string;
        env?: Record<string, string>;
        /** A string is sent as UTF-8; bytes are sent base64 (and the output comes back decoded). */
        stdin?: string | Uint8Array;
        timeoutSeconds?: number;
        /** Answer stdout and stderr as bytes (the request uses "encoding":"base64"). */
        binary?: boolean;
        /** Given either callback, the answer is streamed (SSE) and each chunk is passed as it arrives; the
         * result's stdout and stderr are then the chunks joined, as the unstreamed call answers them. */
        onStdout?: (chunk: string | Uint8Array) => void | Promise<void>;
        onStderr?: (chunk: string | Uint8Array) => void | Promise<void>;
}

export interface ExecResult<T = string> {
        exitCode: number;
        stdout: T;
        stderr: T;
        stdoutTruncated: boolean;
        stderrTruncated: boolean;
        durationMs: number;
        timedOut: boolean;
        oomKilled: boolean;
}

/** An audit row as the gateway sends it (snake_case). */
export interface LogEntry {
        id: number;
        session_id: string | null;
        account_id: string | null;
        source: string;
        operation: string;
        event: string;
        detail: unknown;
        exit_code: number | null;
        output_truncated: { stdout: string; stderr: string } | null;
        started_at: string;
        duration_ms: number | null;
        request_id: string | null;
        [field: string]: unknown;
}

export interface LogOptions extends RequestOptions {
        limit?: number;
        offset?: number;
        operation?: string;
        event?: string;
        source?: string;
        accountId?: string;
        since?: string;
        until?: string;
        afterId?: number;
        /** Only rows with a smaller id: page back below the oldest id seen. */
        beforeId?: number;
}

export interface GlobalLogOptions extends LogOptions {
        sessionId?: string;
}

export interface WatchOptions {
        /** Resume after this row id (sent as Last-Event-ID). */
        lastEventId?: number | string;
        signal?: AbortSignal;
        /** Base delay between reconnects (default 500 ms, growing with consecutive failures). */
        retryDelayMs?: number;
        /** Consecutive failed reconnects before giving up with ConnectionError (default 10). */
        maxRetries?: number;
}

export declare class Watch implements AsyncIterable<LogEntry> {
        /** The id of the last row received, sent as Last-Event-ID when reconnecting. */
        lastEventId: string | null;
        /** How many times the stream was reopened after a drop. */
        reconnects: number;
        /** Ends the stream; the iterator then finishes. */
        close(): void;
        [Symbol.asyncIterator](): AsyncIterator<LogEntry>;
}

export interface TakeoverOptions extends RequestOptions {
        cols?: number;
        rows?: number;
        /** Mint a single-use token and pass ?token= (default in browsers; in Node the header is used). */
        useToken?: boolean;
        /** The WebSocket class to use (default: `ws` in Node, globalThis.WebSocket in browsers). */
        WebSocket?: unknown;
        binaryType?: "nodebuffer" | "arraybuffer" | "blob" | "fragments";
}

export interface FileWriteOptions extends RequestOptions {
        /** A number (0o755) or an octal string ("0755"). */
        mode?: number | string;
        createDirs?: boolean;
        append?: boolean;
}

export interface FileReadOptions extends RequestOptions {
        offset?: number;
        length?: number;
        encoding?: "utf-8" | "utf8";
}

export declare class Files {
        write(path: string, data: string | Uint8Array | ArrayBuffer, opts?: FileWriteOptions): Promise<void>;
        read(path: string, opts: FileReadOptions & { encoding: "utf-8" | "utf8" }): Promise<string>;
        read(path: string, opts?: FileReadOptions): Promise<Uint8Array>;
        readText(path: string, opts?: Omit<FileReadOptions, "encoding">): Promise<string>;
        /** One of sandboxd's file tools by name; arguments and result as in docs/dbus-api.md. */
        tool(name: string, args?: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
        view(args: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
        ls(args: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
        glob(args: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
        grep(args: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
        create(args: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
        strReplace(args: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
        insert(args: Record<string, unknown>, opts?: RequestOptions): Promise<any>;
}

/** The gateway's process object (GET …/processes/{p}). */
export interface ProcessInfo {
        id: string;
        sandbox: string;
        state: "running" | "exited" | "killed" | "timed-out";
        /** null while it runs; 128 + the signal for one ended by a signal */
        exit_code: number | null;
        pid: number;
        started_at: string;
        argv: string[];
        unit: string;
}

export interface StartProcessOptions extends RequestOptions {
        cwd?: string;
        env?: Record<string, string>;
        /** Its runtime limit in seconds (default the type's longest). */
        timeout?: number;
}

/** A piece of output as the process wrote it; offset: where it starts in its stream (bytes). */
export interface OutputChunk<T = string> {
        stream: "stdout" | "stderr";
        data: T;
        offset: number;
}

export interface ProcessExit {
        exitCode: number;
        state: "exited" | "killed" | "timed-out";
}

export interface FollowOptions {
        stream?: "both" | "stdout" | "stderr";
        binary?: boolean;
        /** A number, or a position "<stdout offset>:<stderr offset>" (an earlier follow's position). */
        offset?: number | string;
        signal?: AbortSignal;
        /** Base delay between reconnects (default 500 ms, growing with consecutive failures). */
        retryDelayMs?: number;
        /** Consecutive failed reconnects before giving up with ConnectionError (default 10). */
        maxRetries?: number;
}

export declare class OutputFollow<T = string> implements AsyncIterable<OutputChunk<T>> {
        stream: "both" | "stdout" | "stderr";
        binary: boolean;
        /** After the last chunk: "<stdout offset>:<stderr offset>", sent as Last-Event-ID when reconnecting. */
        position: string | null;
        /** How it ended, once the iteration finished at its end. */
        exit: ProcessExit | null;
        reconnects: number;
        close(): void;
        [Symbol.asyncIterator](): AsyncIterator<OutputChunk<T>>;
}

export declare class Process implements AsyncIterable<OutputChunk<string>> {
        info: ProcessInfo;
        id: string;
        sandboxId: string;
        state: ProcessInfo["state"];
        exitCode: number | null;
        pid: number;
        startedAt: string;
        argv: string[];
        unit: string;
        readonly running: boolean;
        refresh(opts?: RequestOptions): Promise<this>;
        follow(opts: FollowOptions & { binary: true }): OutputFollow<Uint8Array>;
        follow(opts?: FollowOptions): OutputFollow<string>;
        /** Both streams from the start until it ends: `for await (const chunk of proc)`. */
        [Symbol.asyncIterator](): AsyncIterator<OutputChunk<string>>;
        output(stream: "stdout" | "stderr", opts: RequestOptions & { binary: true }): Promise<Uint8Array>;
        output(stream?: "stdout" | "stderr", opts?: RequestOptions & { binary?: false }): Promise<string>;
        /** timeout in seconds: past it, Timeout (code "client_timeout"), and the process goes on. */
        wait(opts?: RequestOptions & { timeout?: number }): Promise<ProcessExit>;
        kill(signal?: string | number, opts?: RequestOptions): Promise<this>;
        /** SIGTERM, then SIGKILL 5 s later if it still runs; resolves once it has ended. */
        stop(opts?: RequestOptions): Promise<this>;
        write(data: string | Uint8Array | ArrayBuffer, opts?: RequestOptions): Promise<void>;
        closeStdin(opts?: RequestOptions): Promise<void>;
}

export declare class Processes {
        /** A string runs by /bin/sh -c; an array is the argv. */
        start(command: string | string[], opts?: StartProcessOptions): Promise<Process>;
        list(opts?: RequestOptions): Promise<Process[]>;
        get(id: string, opts?: RequestOptions): Promise<Process>;
}

export declare class Sandbox {
        readonly client: Client;
        readonly files: Files;
        readonly processes: Processes;
        info: SandboxInfo;
        id: string;
        name: string;
        type: string;
        state: SandboxInfo["state"];
        network: SandboxInfo["network"];
        image: string;
        owner: string;
        createdAt: string;
        expiresAt: string;
        limits: SandboxLimits | null;
        paused: boolean;
        pausedAt: string | null;
        egressPolicy: Required<EgressPolicy> | null;
        egressAddress: string | null;
        /** as of the last answer: refresh() reads them again */
        egressCounters: EgressCounters | null;
        refresh(opts?: RequestOptions): Promise<this>;
        extend(ttlSeconds: number, opts?: RequestOptions): Promise<this>;
        /** Freezes it (its TTL stops); calls that need it running reject with Conflict "sandbox_paused". */
        pause(opts?: RequestOptions): Promise<this>;
        /** issue 26: a snapshot of its disk (frozen meanwhile) */
        snapshot(opts?: RequestOptions & { name?: string }): Promise<SnapshotInfo>;
        resume(opts?: RequestOptions): Promise<this>;
        /** Replaces the whole egress policy (PUT …/network). */
        setNetworkPolicy(policy: EgressPolicy, opts?: RequestOptions): Promise<this>;
        /** Resolves also when the sandbox is gone already (a 404 not_found is no error). */
        delete(opts?: RequestOptions): Promise<void>;
        exec(command: string | string[], opts: ExecOptions & { binary: true }): Promise<ExecResult<Uint8Array>>;
        exec(command: string | string[], opts?: ExecOptions): Promise<ExecResult<string>>;
        getLog(opts?: LogOptions): Promise<LogEntry[]>;
        watch(opts?: WatchOptions): Watch;
        /** Node: a `ws` WebSocket; browsers: a DOM WebSocket. Resolves once open. */
        takeover(opts?: TakeoverOptions): Promise<any>;
}

/** The API key object, in the reference API's camelCase. */
export interface ApiKey {
        id: string;
        name: string;
        role: "admin" | "member";
        expiresAt: string | null;
        createdAt: string;
        revokedAt: string | null;
        scope: { actions: string[]; sandboxes: "*" | string[] };
}

export interface CreateApiKeyOptions extends RequestOptions {
        name?: string;
        preset?: "admin" | "member" | "runner";
        role?: "admin" | "member";
        actions?: string[];
        sandboxes?: "*" | string[];
        ttlSeconds?: number;
}

export declare class ApiKeys {
        create(opts?: CreateApiKeyOptions): Promise<{ secret: string; apiKey: ApiKey }>;
        list(opts?: RequestOptions): Promise<ApiKey[]>;
        revoke(id: string, opts?: RequestOptions): Promise<void>;
}

/** An image of sandboxd's store (issue 24); info is the gateway's object as sent. */
export interface Image {
        name: string;
        source: string;
        createdAt: string;
        size: number;
        digest: string;
        /** get() only: what import hygiene changed, and the sandboxes (the key may read) running on it */
        devicesDropped?: number;
        setidStripped?: number;
        ownersReset?: number;
        usedBy?: string[];
        info: Record<string, unknown>;
}

export interface ImageProgress {
        job: string;
        phase: string;
        done: number;
        total: number;
}

export interface MakeImageOptions extends RequestOptions {
        /** Each progress event of the job (the answer is then read as SSE). */
        onProgress?: (p: ImageProgress) => void;
        timeoutMs?: number;
}

export type ArchiveSource = Uint8Array | ArrayBuffer | Blob | string | ReadableStream<Uint8Array> |
        AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>;

export declare class Images {
        list(opts?: RequestOptions): Promise<Image[]>;
        get(name: string, opts?: RequestOptions): Promise<Image>;
        remove(name: string, opts?: RequestOptions): Promise<void>;
        /** Admin keys: the archive (bytes, a path in Node, a stream) streamed to the gateway. */
        importArchive(name: string, source: ArchiveSource,
                      opts?: MakeImageOptions & { format?: "tar" | "oci-archive" | "docker-archive"; tag?: string }):
                Promise<Image>;
        /** Admin keys: mmdebstrap from the host's archive. */
        build(name: string, opts?: MakeImageOptions & { suite?: string; variant?: string; packages?: string[] }):
                Promise<Image>;
}

export declare class Client {
        constructor(opts?: ClientOptions);
        readonly baseUrl: string;
        readonly timeoutMs: number;
        readonly apiKeys: ApiKeys;
        readonly images: Images;
        createSandbox(opts?: CreateSandboxOptions): Promise<Sandbox>;
        getSandbox(idOrName: string, opts?: RequestOptions): Promise<Sandbox>;
        listSandboxes(opts?: RequestOptions): Promise<Sandbox[]>;
        listSnapshots(opts?: RequestOptions): Promise<SnapshotInfo[]>;
        getSnapshot(idOrName: string, opts?: RequestOptions): Promise<SnapshotInfo>;
        deleteSnapshot(idOrName: string, opts?: RequestOptions): Promise<void>;
        getLog(opts?: GlobalLogOptions): Promise<LogEntry[]>;
        getLogOutput(rowId: number, opts?: RequestOptions & { encoding?: "base64" }):
                Promise<{ id: number; stdout: string; stderr: string }>;
        /** The run-session export (admin keys): events of the rows after `since`, oldest first. With
         * `dir` (Node), also written as `sandboxctl log --export DIR` does, resuming from dir's state. */
        export(opts?: ExportOptions): AsyncIterableIterator<ExportEvent>;
}

export interface ExportOptions {
        since?: number;
        /** a sandbox id */
        sandbox?: string;
        dir?: string;
        signal?: AbortSignal;
}

/** One line of audit.jsonl (docs/audit-api.md, "Run-session export"). */
export interface ExportEvent {
        runId: string;
        time: string;
        event: string;
        rowId: number;
        sandbox: string | null;
        account: string | null;
        source: string | null;
        requestId: string | null;
        operation: string;
        rowEvent: string;
        kind?: "exec" | "takeover";
        command?: string | null;
        argv?: string[];
        exitCode?: number | null;
        durationMs?: number;
        stdoutBytes?: number;
        stderrBytes?: number;
        status?: string;
        reason?: string;
        path?: string;
        [field: string]: unknown;
}

/** Creates a sandbox, runs fn with it, and deletes it when fn settles (unless onExit is "keep"). */
export declare function withSandbox<T>(client: Client, opts: WithSandboxOptions, fn: (sb: Sandbox) => Promise<T> | T): Promise<T>;
export declare function withSandbox<T>(client: Client, fn: (sb: Sandbox) => Promise<T> | T): Promise<T>;

export interface SseEvent {
        id: string | null;
        event: string;
        data: string;
}
export declare function parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent>;

export interface ErrorBody {
        event?: "error";
        error?: string;
        code?: string;
        status?: number;
        requestId?: string;
}

export declare class SandboxdError extends Error {
        constructor(message: string, opts?: { status?: number; code?: string; requestId?: string | null; body?: ErrorBody | null; cause?: unknown });
        /** The HTTP status (0: no answer, e.g. a connection error or this client's own timeout). */
        status: number;
        /** The gateway's stable code (`not_found`, `invalid_request`, …), or `client_timeout`, `connection_error`. */
        code: string;
        /** The X-Request-Id of the answer, also in the audit rows the request caused. */
        requestId: string | null;
        body: ErrorBody | null;
}
export declare class BadRequest extends SandboxdError {}
export declare class Unauthorized extends SandboxdError {}
export declare class Forbidden extends SandboxdError {}
export declare class NotFound extends SandboxdError {}
export declare class MethodNotAllowed extends SandboxdError {}
export declare class Conflict extends SandboxdError {}
export declare class PayloadTooLarge extends SandboxdError {}
export declare class Unprocessable extends SandboxdError {}
export declare class LimitExceeded extends Unprocessable {}
export declare class RateLimited extends SandboxdError {
        /** Seconds, from Retry-After, when the gateway sent one. */
        retryAfter: number | null;
}
export declare class Timeout extends SandboxdError {}
export declare class ServerError extends SandboxdError {}
export declare class Unavailable extends ServerError {}
/** No answer: status 0, code "connection_error". */
export declare class ConnectionError extends SandboxdError {}
export declare function errorFromBody(status: number, body: ErrorBody | null, headers?: { get(name: string): string | null }): SandboxdError;

export default Client;
