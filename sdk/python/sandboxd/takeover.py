# SPDX-License-Identifier: LGPL-2.1-or-later
# Takeover: a WebSocket to a sandbox's interactive shell, authenticated with the Authorization header.
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Optional, Tuple

import websocket  # python3-websocket

from .errors import ConnectionFailed, SandboxdError, error_for

if TYPE_CHECKING:
    from .client import Client


class TakeoverSocket(websocket.WebSocket):
    """A connected websocket.WebSocket to the shell. Binary frames carry the terminal's raw bytes both
    ways; write()/read() handle them, resize() sends the control message. When the shell exits the
    gateway closes with 1000 and the reason "exit N"; read() then returns None and close_status and
    close_reason say so."""

    close_status: Optional[int] = None
    close_reason: str = ""

    def write(self, data: bytes | str) -> None:
        self.send_binary(data.encode() if isinstance(data, str) else bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        self.send(json.dumps({"type": "resize", "cols": int(cols), "rows": int(rows)}))

    def read(self) -> Optional[bytes]:
        """The next bytes of terminal output, or None once the connection closed."""
        while True:
            try:
                op, frame = self.recv_data_frame(True)
            except websocket.WebSocketConnectionClosedException:
                return None
            if op == websocket.ABNF.OPCODE_CLOSE:
                data = frame.data or b""
                self.close_status = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
                self.close_reason = data[2:].decode("utf-8", "replace")
                return None
            if op in (websocket.ABNF.OPCODE_BINARY, websocket.ABNF.OPCODE_TEXT, websocket.ABNF.OPCODE_CONT):
                return bytes(frame.data)

    def read_until(self, marker: bytes, limit: int = 1 << 20) -> Tuple[bytes, bool]:
        """Reads until marker appears in the output (or the connection closes): (all output, found)."""
        buf = b""
        while marker not in buf and len(buf) < limit:
            chunk = self.read()
            if chunk is None:
                return buf, False
            buf += chunk
        return buf, marker in buf

    @property
    def exit_status(self) -> Optional[int]:
        """The shell's exit status once the gateway closed with "exit N"."""
        if self.close_reason.startswith("exit "):
            try:
                return int(self.close_reason[5:])
            except ValueError:
                return None
        return None


def connect(client: "Client", path: str, cols: Optional[int], rows: Optional[int], timeout: float) -> TakeoverSocket:
    scheme = "wss" if client._https else "ws"
    url = f"{scheme}://{client._host}:{client._port}{client._prefix}{path}"
    if cols is not None or rows is not None:
        url += f"?cols={int(cols or 80)}&rows={int(rows or 24)}"
    try:
        ws = websocket.create_connection(url, header=[f"Authorization: Bearer {client.api_key}"], timeout=timeout,
                                         class_=TakeoverSocket, suppress_origin=True)
    except websocket.WebSocketBadStatusException as e:
        body = None
        raw = getattr(e, "resp_body", None) or b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            pass
        headers = getattr(e, "resp_headers", None) or {}
        raise error_for(e.status_code, body, headers.get("x-request-id"), str(e)) from e
    except (OSError, websocket.WebSocketException) as e:
        if isinstance(e, SandboxdError):
            raise
        raise ConnectionFailed(f"takeover connection failed: {e}") from e
    return ws
