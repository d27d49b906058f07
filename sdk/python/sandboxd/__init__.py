# SPDX-License-Identifier: LGPL-2.1-or-later
# The Python SDK of sandboxd's gateway: Client, Sandbox, ExecResult, Watch and the typed errors.
"""sandboxd: disposable confined sandboxes for AI agents' code, through sandbox-gatewayd.

    from sandboxd import Client
    client = Client(api_key)
    with client.create(type="small", ttl_seconds=600, on_exit="delete") as sb:
        sb.files.write("/tmp/task.py", code)
        r = sb.exec("python3 /tmp/task.py", timeout_seconds=30)
"""
from .client import DEFAULT_BASE_URL, ApiKeys, Client, CreatedKey, ExecResult, Files, Sandbox, SseEvent, Watch
from .images import Images
from .processes import OutputChunk, OutputFollow, Process, Processes, ProcessExit
from .errors import (BadRequest, Conflict, ConnectionFailed, Forbidden, LimitExceeded, MethodNotAllowed, NotFound,
                     PayloadTooLarge, RateLimited, SandboxdError, ServerError, Timeout, Unauthorized, Unavailable,
                     UpgradeRequired)

__version__ = "0.1.0"
__all__ = [
    "DEFAULT_BASE_URL", "ApiKeys", "Client", "CreatedKey", "ExecResult", "Files", "Sandbox", "SseEvent", "Watch",
    "Images",
    "OutputChunk", "OutputFollow", "Process", "Processes", "ProcessExit",
    "BadRequest", "Conflict", "ConnectionFailed", "Forbidden", "LimitExceeded", "MethodNotAllowed", "NotFound",
    "PayloadTooLarge", "RateLimited", "SandboxdError", "ServerError", "Timeout", "Unauthorized", "Unavailable",
    "UpgradeRequired",
]
