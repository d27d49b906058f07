# SPDX-License-Identifier: LGPL-2.1-or-later
# Background processes: start, list, get, and each one's handle (wait, kill, stop, stdin, output, follow).
from __future__ import annotations

import base64
import http.client
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from .client import _error_from_event, _iter_sse, _q, _ResumingStream
from .errors import ConnectionFailed, Timeout

if TYPE_CHECKING:
    from .client import Sandbox

JSON = Dict[str, Any]


@dataclass
class OutputChunk:
    """A piece of a process's output as it was written: its stream ("stdout" or "stderr"), the text (or
    bytes with binary=True), and its offset, the byte offset in its stream where it starts."""
    stream: str
    data: Union[str, bytes]
    offset: int


@dataclass
class ProcessExit:
    """How a process ended: its exit code (128 + the signal for one ended by a signal) and its state
    ("exited", "killed" or "timed-out")."""
    exit_code: int
    state: str


class OutputFollow(_ResumingStream):
    """An iterator over a process's output chunks as it writes them (GET …/output?follow=true): what is
    kept from the start position on, then live, until the process ends. A dropped connection is reopened
    from the last chunk's position (Last-Event-ID), so nothing is repeated or left out. After the end,
    `exit` holds how it ended. close() ends it from any thread."""

    def __init__(self, proc: "Process", stream: str = "both", binary: bool = False, offset: Any = None,
                 reconnect: bool = True, read_timeout: float = 60.0, retry_for: float = 60.0,
                 timeout: Optional[float] = None) -> None:
        if stream not in ("stdout", "stderr", "both"):
            raise ValueError('stream must be "stdout", "stderr" or "both"')
        super().__init__(proc._client, reconnect, read_timeout, retry_for)
        self._proc = proc
        self.stream = stream
        self.binary = binary
        # "<stdout offset>:<stderr offset>", as the gateway's event ids
        self.position: Optional[str] = None if offset is None else str(offset)
        self.exit: Optional[ProcessExit] = None
        # with timeout: Timeout (code "client_timeout") once that many seconds passed before the end
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._timeout = timeout

    def __iter__(self) -> Iterator[OutputChunk]:
        return self._chunks()

    def _before_line(self) -> None:
        """Before each line read: the deadline, if any, bounds the wait for it (heartbeats included)."""
        if self._deadline is None:
            return
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            conn.sock.settimeout(min(self.read_timeout, left))

    def _timed_out(self) -> Timeout:
        return Timeout(f"process {self._proc.id} still runs after {self._timeout} s", code="client_timeout")

    def _chunks(self) -> Iterator[OutputChunk]:
        client = self._client
        q = {"follow": True, "stream": self.stream, "encoding": "base64" if self.binary else None}
        path = client._url(self._proc._path("/output"), q)[len(client._prefix):]
        while not self._closed:
            self._before_line()
            headers = {} if self.position is None else {"Last-Event-ID": self.position}
            try:
                for ev in _iter_sse(self._open(path, headers), self._before_line):
                    if ev.event == "error":
                        raise _error_from_event(ev.data)
                    if ev.event in ("stdout", "stderr"):
                        d = json.loads(ev.data)
                        data: Union[str, bytes] = base64.b64decode(d["data"]) if self.binary else d["data"]
                        if ev.id is not None:
                            self.position = ev.id
                        yield OutputChunk(ev.event, data, int(d["offset"]))
                    elif ev.event == "exit":
                        if ev.id is not None:
                            self.position = ev.id
                        self._proc._set(json.loads(ev.data))
                        self.exit = ProcessExit(int(self._proc.exit_code or 0), str(self._proc.state))
                        return
                # ended without the exit event: the connection broke
                raise ConnectionFailed("the output stream ended before the process did")
            except (ConnectionFailed, Timeout, OSError, http.client.HTTPException) as e:
                if self._deadline is not None and not self._closed and time.monotonic() >= self._deadline:
                    raise self._timed_out() from e
                if not self._broke(e, "output"):
                    return
            finally:
                self._drop()
            self.reconnects += 1


class Process:
    """A background process's handle. Fields mirror the gateway's process object (id, sandbox, state,
    exit_code, pid, started_at, argv, unit) as of the last answer; refresh() reads them again."""

    def __init__(self, sb: "Sandbox", info: JSON) -> None:
        self._sb = sb
        self._client = sb._client
        self._set(info)

    def _set(self, info: JSON) -> None:
        self.info: JSON = dict(info)
        self.id: str = info["id"]
        self.sandbox_id: str = info.get("sandbox") or self._sb.id
        self.state: str = info.get("state", "")
        self.exit_code: Optional[int] = info.get("exit_code")
        self.pid: Optional[int] = info.get("pid")
        self.started_at: Optional[str] = info.get("started_at")
        self.argv: List[str] = list(info.get("argv") or [])
        self.unit: Optional[str] = info.get("unit")

    def __repr__(self) -> str:
        return f"Process(id={self.id!r}, sandbox={self.sandbox_id!r}, state={self.state!r})"

    def __iter__(self) -> Iterator[OutputChunk]:
        """Both streams' chunks, from the start, until it ends: for chunk in proc: …"""
        return iter(self.follow())

    def _path(self, sub: str = "") -> str:
        return self._sb._path(f"/processes/{_q(self.id)}{sub}")

    @property
    def running(self) -> bool:
        return self.state == "running"

    def refresh(self) -> "Process":
        self._set(self._client._request("GET", self._path()))
        return self

    def follow(self, stream: str = "both", binary: bool = False, offset: Any = None,
               read_timeout: float = 60.0, reconnect: bool = True) -> OutputFollow:
        """The output as it comes (an iterator of OutputChunk), from offset (a number, or a position
        "<stdout offset>:<stderr offset>" such as follow's .position) or the start, until it ends."""
        return OutputFollow(self, stream, binary, offset, reconnect=reconnect, read_timeout=read_timeout)

    def output(self, stream: str = "stdout", binary: bool = False) -> Union[str, bytes]:
        """All of the stream that is kept so far (its last ProcessOutputMax= bytes, 1 MiB by default)."""
        if stream not in ("stdout", "stderr"):
            raise ValueError('stream must be "stdout" or "stderr"')
        d = self._client._request("GET", self._path("/output"),
                                  query={"stream": stream, "encoding": "base64" if binary else None})
        return base64.b64decode(d["data"]) if binary else str(d["data"])

    def wait(self, timeout: Optional[float] = None) -> ProcessExit:
        """Blocks until the process has ended (the follow stream's exit event; the output it carries on
        the way is dropped) and answers how; the handle's fields are then its end's. With timeout
        (seconds) and the process still running then: Timeout, code "client_timeout" (it goes on)."""
        f = OutputFollow(self, "both", timeout=timeout)
        try:
            for _ in f:
                pass
        finally:
            f.close()
        if f.exit is None:  # closed from elsewhere
            raise ConnectionFailed(f"waiting for process {self.id} was ended")
        return f.exit

    def kill(self, signal: Union[str, int] = "TERM") -> "Process":
        """Sends a signal, by name ("TERM", "SIGKILL") or number; a process that has ended: Conflict."""
        self._set(self._client._request("POST", self._path("/signal"), {"signal": signal}))
        return self

    def stop(self) -> "Process":
        """SIGTERM, then SIGKILL if it still runs 5 s later; returns once it has ended (an ended one as it is)."""
        self._set(self._client._request("DELETE", self._path(), timeout=max(self._client.timeout, 30.0)))
        return self

    def write(self, data: Union[str, bytes]) -> None:
        """Queues data (str as UTF-8, or bytes) for its stdin; a process whose stdin is closed: Conflict."""
        if isinstance(data, str):
            body: JSON = {"data": data}
        else:
            body = {"data": base64.b64encode(bytes(data)).decode(), "encoding": "base64"}
        self._client._request("POST", self._path("/stdin"), body)

    def close_stdin(self) -> None:
        """Closes its stdin once what was written is read (EOF for the process)."""
        self._client._request("POST", self._path("/stdin"), {"close": True})


class Processes:
    """A sandbox's background processes (sb.processes)."""

    def __init__(self, sb: "Sandbox") -> None:
        self._sb = sb

    def start(self, command: Union[str, Sequence[str]], cwd: Optional[str] = None,
              env: Optional[Dict[str, str]] = None, timeout: Optional[int] = None) -> Process:
        """Starts a command in the background (a string for /bin/sh -c, or an argv list) and returns its
        handle once it runs. timeout: its runtime limit in seconds (default the type's longest)."""
        if isinstance(command, str):
            argv = ["/bin/sh", "-c", command]
        else:
            argv = [str(a) for a in command]
        body: JSON = {"argv": argv}
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = dict(env)
        if timeout is not None:
            body["timeout_seconds"] = int(timeout)
        return Process(self._sb, self._sb._client._request("POST", self._sb._path("/processes"), body))

    def list(self) -> List[Process]:
        """All of them, oldest first, the ended ones too."""
        d = self._sb._client._request("GET", self._sb._path("/processes"))
        return [Process(self._sb, p) for p in d["processes"]]

    def get(self, process_id: str) -> Process:
        return Process(self._sb, self._sb._client._request("GET", self._sb._path(f"/processes/{_q(process_id)}")))


__all__ = ["OutputChunk", "OutputFollow", "Process", "ProcessExit", "Processes"]
