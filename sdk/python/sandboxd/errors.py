# SPDX-License-Identifier: LGPL-2.1-or-later
# Typed errors of the sandboxd SDK: one class per kind of gateway refusal, each carrying status, code, request_id.
from __future__ import annotations

from typing import Any, Dict, Optional, Type


class SandboxdError(Exception):
    """Any error from the gateway (or reaching it). status is the HTTP status (0 when there was no
    answer), code the gateway's stable error code, request_id the X-Request-Id of the answer."""

    def __init__(self, message: str, status: int = 0, code: str = "", request_id: Optional[str] = None,
             body: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id
        self.body = body

    def __str__(self) -> str:
        rid = f", request_id={self.request_id}" if self.request_id else ""
        return f"{self.message} (status={self.status}, code={self.code}{rid})"


class ConnectionFailed(SandboxdError):
    """The gateway could not be reached, or the connection broke before an answer: status 0, code
    "connection_error" (as the JS SDK's ConnectionError)."""

    def __init__(self, message: str, status: int = 0, code: str = "connection_error",
                 request_id: Optional[str] = None, body: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message, status=status, code=code, request_id=request_id, body=body)


class BadRequest(SandboxdError):
    """400: invalid_json, invalid_request."""


class Unauthorized(SandboxdError):
    """401: no usable credentials (unknown, expired, revoked key; bad takeover token)."""


class Forbidden(SandboxdError):
    """403: the key lacks the right (forbidden, session_required)."""


class NotFound(SandboxdError):
    """404: unknown sandbox, file, log row, key, route."""


class MethodNotAllowed(SandboxdError):
    """405."""


class Timeout(SandboxdError):
    """408 request_timeout, 504 upstream_timeout, or no answer within the client's timeout."""


class Conflict(SandboxdError):
    """409: a name in use, a sandbox not running, a file that exists, a watch too far behind."""


class PayloadTooLarge(SandboxdError):
    """413."""


class LimitExceeded(SandboxdError):
    """422 limit_exceeded (and the file tools' 422s)."""


class UpgradeRequired(SandboxdError):
    """426: the takeover route without a WebSocket upgrade."""


class RateLimited(SandboxdError):
    """429 too_many_streams, too_many_calls, too_many_execs, too_many_sandboxes, too_many_refusals."""


class ServerError(SandboxdError):
    """5xx: internal, upstream_error."""


class Unavailable(ServerError):
    """503: sandboxd or sandbox-auditd unreachable or out of resources."""


_BY_STATUS: Dict[int, Type[SandboxdError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    408: Timeout, 409: Conflict, 413: PayloadTooLarge, 422: LimitExceeded, 426: UpgradeRequired,
    429: RateLimited, 503: Unavailable, 504: Timeout,
}


def error_for(status: int, body: Optional[Dict[str, Any]], request_id: Optional[str] = None,
          fallback_text: str = "") -> SandboxdError:
    """The typed error for an error answer (the gateway's body if it sent one)."""
    if isinstance(body, dict) and "code" in body:
        message = str(body.get("error") or fallback_text or f"HTTP {status}")
        code = str(body.get("code"))
        request_id = body.get("requestId") or request_id
        status = int(body.get("status") or status)
    else:
        message = fallback_text.strip()[:200] or f"HTTP {status}"
        code = ""
        body = None
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else SandboxdError)
    return cls(message, status=status, code=code, request_id=request_id, body=body)
