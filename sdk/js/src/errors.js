// SPDX-License-Identifier: LGPL-2.1-or-later
// Typed errors of the SDK: one class per kind of gateway refusal, each carrying status, code and requestId.

export class SandboxdError extends Error {
        constructor(message, { status = 0, code = "", requestId = null, body = null, cause } = {}) {
                super(message, cause === undefined ? undefined : { cause });
                this.name = new.target.name;
                this.status = status;
                this.code = code;
                this.requestId = requestId;
                this.body = body;
        }
}

/* 400: invalid_json, invalid_request. */
export class BadRequest extends SandboxdError {}
/* 401: no usable credentials, or a bad takeover token. */
export class Unauthorized extends SandboxdError {}
/* 403: forbidden, session_required. */
export class Forbidden extends SandboxdError {}
/* 404: unknown route, sandbox, file, row, key. */
export class NotFound extends SandboxdError {}
/* 405. */
export class MethodNotAllowed extends SandboxdError {}
/* 409: a name in use, a sandbox that is not running, a file that exists, too_far_behind. */
export class Conflict extends SandboxdError {}
/* 413. */
export class PayloadTooLarge extends SandboxdError {}
/* 422: a request that is well-formed but cannot be done, e.g. a file tool's no_match or ambiguous_match. */
export class Unprocessable extends SandboxdError {}
/* 422 limit_exceeded: a sandbox limit. */
export class LimitExceeded extends Unprocessable {}
/* 429: too_many_streams, too_many_calls, too_many_execs, too_many_sandboxes, too_many_refusals; retryAfter (seconds) when the gateway says. */
export class RateLimited extends SandboxdError {
        constructor(message, opts = {}) {
                super(message, opts);
                this.retryAfter = opts.retryAfter ?? null;
        }
}
/* 408, 504, or this client's own deadline (status 0, code "client_timeout"). */
export class Timeout extends SandboxdError {}
/* 500, 502, 503. */
export class ServerError extends SandboxdError {}
/* 503: sandboxd or the audit log unreachable or out of resources. */
export class Unavailable extends ServerError {}
/* The gateway could not be reached at all, or the connection broke (status 0). */
export class ConnectionError extends SandboxdError {}

const BY_STATUS = {
        400: BadRequest,
        401: Unauthorized,
        403: Forbidden,
        404: NotFound,
        405: MethodNotAllowed,
        408: Timeout,
        409: Conflict,
        413: PayloadTooLarge,
        422: Unprocessable,
        429: RateLimited,
        503: Unavailable,
        504: Timeout,
};

/* The error for an error body (or a non-JSON error answer) with the given HTTP status. */
export function errorFromBody(status, body, headers) {
        const requestId = (body && body.requestId) || (headers && headers.get && headers.get("x-request-id")) || null;
        const code = (body && body.code) || "";
        const message = (body && body.error) || `HTTP ${status}`;
        let Cls = BY_STATUS[status] || (status >= 500 ? ServerError : SandboxdError);
        if (code === "limit_exceeded")
                Cls = LimitExceeded;
        let retryAfter = null;
        if (headers && headers.get && headers.get("retry-after"))
                retryAfter = Number(headers.get("retry-after"));
        return new Cls(message, { status: body && body.status ? body.status : status, code, requestId, body, retryAfter });
}
