# SPDX-License-Identifier: LGPL-2.1-or-later
# The sandboxd SDK's client: sandboxes, exec (plain and streamed), files, file tools, audit log, watch, takeover, keys.
from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .errors import ConnectionFailed, NotFound, SandboxdError, Timeout, error_for

DEFAULT_BASE_URL = "http://127.0.0.1:8790"
JSON = Dict[str, Any]
OutputCallback = Callable[[Union[str, bytes]], None]


@dataclass
class ExecResult:
    """The outcome of one exec: output (str, or bytes with binary=True), exit code and how it ended."""
    exit_code: int
    stdout: Union[str, bytes]
    stderr: Union[str, bytes]
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0
    timed_out: bool = False
    oom_killed: bool = False

    @classmethod
    def from_json(cls, d: JSON, binary: bool = False) -> "ExecResult":
        out, err = d.get("stdout", ""), d.get("stderr", "")
        if binary:
            out, err = base64.b64decode(out), base64.b64decode(err)
        return cls(exit_code=int(d["exit_code"]), stdout=out, stderr=err,
                   stdout_truncated=bool(d.get("stdout_truncated")), stderr_truncated=bool(d.get("stderr_truncated")),
                   duration_ms=int(d.get("duration_ms", 0)), timed_out=bool(d.get("timed_out")),
                   oom_killed=bool(d.get("oom_killed")))


@dataclass
class SseEvent:
    """One Server-Sent Event: its id (or None), event name ("message" if none was given) and data."""
    id: Optional[str]
    event: str
    data: str


@dataclass
class CreatedKey:
    """An API key just made: the secret (shown only once) and the key object (camelCase, as the gateway sends)."""
    secret: str
    api_key: JSON = field(default_factory=dict)

    @property
    def id(self) -> str:
        return str(self.api_key.get("id", ""))


def _iter_sse(resp: http.client.HTTPResponse, before_line: Optional[Callable[[], None]] = None) -> Iterator[SseEvent]:
    """Parses an SSE stream line by line as it arrives (comments, such as heartbeats, are skipped);
    before_line runs before each line is read (a deadline's check)."""
    ev_id: Optional[str] = None
    ev_name = ""
    data: List[str] = []
    while True:
        if before_line is not None:
            before_line()
        try:
            raw = resp.readline()
        except (AttributeError, ValueError) as e:
            # http.client's answer to reading a response whose socket was shut down under it
            raise ConnectionFailed(f"stream closed: {e!r}") from e
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data or ev_name:
                yield SseEvent(ev_id, ev_name or "message", "\n".join(data))
            ev_id, ev_name, data = None, "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            ev_name = value
        elif name == "id":
            ev_id = value


class Client:
    """A connection to sandbox-gatewayd with one API key. Thread-safe: each thread keeps its own
    keep-alive HTTP connection; streams (watch, streamed exec) get one of their own."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, timeout: float = 60.0) -> None:
        """api_key defaults to $SANDBOXD_API_KEY, base_url to $SANDBOXD_URL or http://127.0.0.1:8790
        (as in the JS SDK); no key at all is a TypeError."""
        if api_key is None:
            api_key = os.environ.get("SANDBOXD_API_KEY")
        if not api_key:
            raise TypeError("Client: api_key is required (or set $SANDBOXD_API_KEY)")
        if base_url is None:
            base_url = os.environ.get("SANDBOXD_URL") or DEFAULT_BASE_URL
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port], not {base_url!r}")
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._local = threading.local()
        self.api_keys = ApiKeys(self)
        from .images import Images
        self.images = Images(self)  # issue 24: the image store (images.py)

    def __repr__(self) -> str:  # never the key
        return f"Client(base_url={self.base_url!r})"

    # --- transport ---------------------------------------------------------------------------------------

    def _new_conn(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        h = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"}
        if extra:
            h.update(extra)
        return h

    def _url(self, path: str, query: Optional[Dict[str, Any]] = None) -> str:
        url = self._prefix + path
        if query:
            q = {k: ("true" if v is True else "false" if v is False else v) for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        return url

    def _send(self, method: str, path: str, body: Optional[bytes], headers: Dict[str, str],
              timeout: Optional[float]) -> Tuple[int, Dict[str, str], bytes]:
        """One request on this thread's keep-alive connection; a connection the server closed while
        idle is replaced once (the request never reached it)."""
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = self._local.conn = self._new_conn(timeout)
            try:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                hdrs = {k.lower(): v for k, v in resp.getheaders()}
                if resp.will_close:
                    self._drop_conn()
                return resp.status, hdrs, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self._drop_conn()
                if reused and attempt == 0:
                    continue
                raise ConnectionFailed(f"connection to {self.base_url} broke: {e}") from e
            except socket.timeout as e:
                self._drop_conn()
                raise Timeout(f"no answer from {self.base_url} within {timeout} s", code="client_timeout") from e
            except OSError as e:
                self._drop_conn()
                raise ConnectionFailed(f"cannot reach {self.base_url}: {e}") from e
        raise AssertionError("unreachable")

    def _drop_conn(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _request(self, method: str, path: str, body: Any = None, query: Optional[Dict[str, Any]] = None,
                 raw: Optional[bytes] = None, headers: Optional[Dict[str, str]] = None,
                 timeout: Optional[float] = None, want_bytes: bool = False) -> Any:
        extra = dict(headers or {})
        payload: Optional[bytes] = None
        if raw is not None:
            payload = raw
            extra.setdefault("Content-Type", "application/octet-stream")
        elif body is not None:
            payload = json.dumps(body).encode()
            extra["Content-Type"] = "application/json"
        status, hdrs, data = self._send(method, self._url(path, query), payload, self._headers(extra),
                                        self.timeout if timeout is None else timeout)
        if status >= 400:
            raise _error_from(status, hdrs, data)
        if want_bytes:
            return data
        if status == 204 or not data:
            return None
        return json.loads(data)

    def _open_stream(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
                     timeout: Optional[float] = None) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """A request on a connection of its own whose answer is read as it arrives (SSE)."""
        extra = {"Accept": "text/event-stream"}
        extra.update(headers or {})
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            extra["Content-Type"] = "application/json"
        conn = self._new_conn(timeout)
        try:
            conn.request(method, self._prefix + path, body=payload, headers=self._headers(extra))
            resp = conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise Timeout(f"no answer from {self.base_url} within {timeout} s", code="client_timeout") from e
        except OSError as e:
            conn.close()
            raise ConnectionFailed(f"cannot reach {self.base_url}: {e}") from e
        if resp.status >= 400:
            data = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            conn.close()
            raise _error_from(resp.status, hdrs, data)
        return conn, resp

    # --- sandboxes --------------------------------------------------------------------------------------

    def create(self, type: Optional[str] = None, ttl_seconds: Optional[int] = None, name: Optional[str] = None,
               network: Optional[str] = None, on_exit: str = "delete",
               egress_policy: Optional[JSON] = None, image: Optional[str] = None,
               snapshot: Optional[str] = None) -> "Sandbox":
        """Makes a sandbox and returns once it runs. Used as a context manager, a sandbox made with
        on_exit="delete" is deleted when the block ends, whether or not the block raised. network is
        "none", "egress" or "host"; egress_policy ({"default": "deny"|"allow", "allow": [...], "deny":
        [...]}, entries are names, "*." wildcards and CIDRs) goes with network="egress". image: "host" or
        an image of sandboxd's store (its root is then that image's; NotFound if there is none).
        snapshot (an id or name, Sandbox.snapshot()) makes its disk a copy of that snapshot's: a fork;
        processes are not carried over."""
        if on_exit not in ("delete", "keep"):
            raise ValueError('on_exit must be "delete" or "keep"')
        body = {k: v for k, v in (("type", type), ("ttl_seconds", ttl_seconds), ("name", name),
                                  ("network", network), ("egress_policy", egress_policy),
                                  ("image", image), ("snapshot", snapshot)) if v is not None}
        try:
            info = self._request("POST", "/v1/sandboxes", body)
        except (Timeout, ConnectionFailed):
            # The gateway may have made it before the answer was lost: with a name we can find it
            # again, and a sandbox meant to be deleted must not be left behind.
            if name is not None and on_exit == "delete":
                try:
                    self._request("DELETE", f"/v1/sandboxes/{_q(name)}")
                except SandboxdError:
                    pass
            raise
        return Sandbox(self, info, on_exit=on_exit)

    def get(self, sandbox_id: str) -> "Sandbox":
        """A sandbox by id or name (on_exit "keep": leaving a with block does not delete it)."""
        return Sandbox(self, self._request("GET", f"/v1/sandboxes/{_q(sandbox_id)}"), on_exit="keep")

    def list(self) -> List["Sandbox"]:
        return [Sandbox(self, s, on_exit="keep") for s in self._request("GET", "/v1/sandboxes")["sandboxes"]]

    def delete(self, sandbox_id: str) -> None:
        """Deletes a sandbox by id or name; one that is gone already (deleted, expired) is no error, as
        Sandbox.delete() and the JS SDK's sb.delete()."""
        try:
            self._request("DELETE", f"/v1/sandboxes/{_q(sandbox_id)}", timeout=max(self.timeout, 120.0))
        except NotFound as e:
            if e.code != "not_found":
                raise

    # --- snapshots (issue 26) ---------------------------------------------------------------------------

    def list_snapshots(self) -> List[JSON]:
        """The snapshots the key may read: {"id", "name", "source", "type", "image", "owner", "created_at", "size"}."""
        return list(self._request("GET", "/v1/snapshots")["snapshots"])

    def get_snapshot(self, snapshot_id: str) -> JSON:
        """One snapshot by id or name (NotFound if there is none)."""
        return dict(self._request("GET", f"/v1/snapshots/{_q(snapshot_id)}"))

    def delete_snapshot(self, snapshot_id: str) -> None:
        """Removes a snapshot; sandboxes made from it keep their disks."""
        self._request("DELETE", f"/v1/snapshots/{_q(snapshot_id)}")

    # --- audit log --------------------------------------------------------------------------------------

    def get_log(self, limit: Optional[int] = None, offset: Optional[int] = None, **filters: Any) -> List[JSON]:
        """Rows of the whole audit log the key may read, newest first. Filters: operation, event, source,
        account_id, session_id, since, until, after_id, before_id (page back below the oldest id seen)."""
        q = dict(filters, limit=limit, offset=offset)
        return list(self._request("GET", "/v1/log", query=q)["entries"])

    def get_output(self, row_id: int, binary: bool = False) -> Tuple[Union[str, bytes], Union[str, bytes]]:
        """A log row's whole captured (stdout, stderr)."""
        d = self._request("GET", f"/v1/log/{int(row_id)}/output", query={"encoding": "base64" if binary else None})
        if binary:
            return base64.b64decode(d["stdout"]), base64.b64decode(d["stderr"])
        return d["stdout"], d["stderr"]

    def export(self, since: Optional[int] = None, sandbox: Optional[str] = None,
               dir: Optional[str] = None, read_timeout: float = 60.0) -> Iterator[JSON]:
        """The run-session export (GET /v1/log/export, admin keys): the events of the rows after row id
        `since` (of one sandbox, by id, or of all), oldest first, each a dict, read as they arrive; the
        stream ends at the row that was newest when it began. Resume with since= the last event's
        "rowId". With dir, the events are also written in the layout of `sandboxctl log --export DIR`
        (audit.jsonl, run-N/stdout.txt, stderr.txt, metadata.json, and its state file), resuming where
        an earlier export into dir (by either) ended; then `since` must not be given."""
        if dir is not None:
            if since is not None:
                raise ValueError("with dir, the export resumes from dir's own state: give no since")
            return _export_dir(self, dir, sandbox, read_timeout)
        return (ev for ev, _ in self._export_lines(since, sandbox, read_timeout))

    def _export_lines(self, since: Optional[int], sandbox: Optional[str],
                      read_timeout: float) -> Iterator[Tuple[JSON, bytes]]:
        """(event, its line as the gateway sent it)"""
        q = self._url("/v1/log/export", {"since": since, "sandbox": sandbox})
        conn, resp = self._open_stream("GET", q[len(self._prefix):], headers={"Accept": "application/x-ndjson"},
                                       timeout=read_timeout)
        try:
            for line in resp:
                if not line.endswith(b"\n"):
                    raise ConnectionFailed("the export stream ended in the middle of a line")
                ev = json.loads(line)
                if ev.get("event") == "error":  # the stream failed after it began: its last line
                    raise _error_from_event(line.decode())
                yield ev, line
        except socket.timeout as e:
            raise Timeout(f"no data from {self.base_url} within {read_timeout} s", code="client_timeout") from e
        finally:
            conn.close()


class Files:
    """A sandbox's files: whole-file write and read (raw bytes over HTTP), and the file tools."""

    def __init__(self, sb: "Sandbox") -> None:
        self._sb = sb

    def write(self, path: str, data: Union[str, bytes], mode: Optional[int] = None, create_dirs: bool = False,
              append: bool = False) -> None:
        """Writes data (str is encoded as UTF-8) to path, created or truncated (or appended to)."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        q: Dict[str, Any] = {"path": path, "mode": None if mode is None else format(mode, "o"),
                             "create_dirs": True if create_dirs else None, "append": True if append else None}
        self._sb._client._request("PUT", self._sb._path("/files"), query=q, raw=raw)

    def read(self, path: str, offset: Optional[int] = None, length: Optional[int] = None) -> bytes:
        return bytes(self._sb._client._request("GET", self._sb._path("/files"),
                                               query={"path": path, "offset": offset, "length": length},
                                               want_bytes=True))

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read(path).decode(encoding, errors)

    # The file tools: each maps one-to-one to sandboxd's tool (docs/dbus-api.md has the fields).
    def tool(self, name: str, **args: Any) -> JSON:
        return dict(self._sb._client._request("POST", self._sb._path(f"/tools/{name}"),
                                              {k: v for k, v in args.items() if v is not None}))

    def file_create(self, path: str, content: str, overwrite: Optional[bool] = None, mode: Optional[int] = None,
                    create_dirs: Optional[bool] = None) -> JSON:
        return self.tool("file_create", path=path, content=content, overwrite=overwrite, mode=mode,
                         create_dirs=create_dirs)

    def str_replace(self, path: str, old: str, new: str) -> JSON:
        return self.tool("str_replace", path=path, old=old, new=new)

    def insert(self, path: str, line: int, text: str) -> JSON:
        return self.tool("insert", path=path, line=line, text=text)

    def view(self, path: str, start_line: Optional[int] = None, end_line: Optional[int] = None) -> JSON:
        return self.tool("view", path=path, start_line=start_line, end_line=end_line)

    def ls(self, path: str, max_results: Optional[int] = None) -> JSON:
        return self.tool("ls", path=path, max_results=max_results)

    def glob(self, pattern: str, path: Optional[str] = None, max_results: Optional[int] = None) -> JSON:
        return self.tool("glob", pattern=pattern, path=path, max_results=max_results)

    def grep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None,
             ignore_case: Optional[bool] = None, max_results: Optional[int] = None) -> JSON:
        return self.tool("grep", pattern=pattern, path=path, glob=glob, ignore_case=ignore_case,
                         max_results=max_results)


class _ResumingStream:
    """An SSE stream that is reopened after a dropped connection from where it was (the subclass's
    Last-Event-ID): the connection, close() from any thread, drop_connection(), and the back-off."""

    def __init__(self, client: Client, reconnect: bool, read_timeout: float, retry_for: float) -> None:
        self._client = client
        self.reconnect = reconnect
        self.read_timeout = read_timeout  # > the gateway's heartbeat (15 s): silence this long is a dead link
        self.retry_for = retry_for
        self.reconnects = 0
        self._conn: Optional[http.client.HTTPConnection] = None
        self._closed = False
        self._failing_since: Optional[float] = None
        self._delay = 0.1

    def close(self) -> None:
        self._closed = True
        self._drop()

    def drop_connection(self) -> None:
        """Breaks the current connection (as a network failure would); iteration resumes on a new one."""
        conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            if conn.sock is not None:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            conn.close()

    def _open(self, path: str, headers: Dict[str, str]) -> http.client.HTTPResponse:
        self._conn, resp = self._client._open_stream("GET", path, headers=headers, timeout=self.read_timeout)
        self._failing_since, self._delay = None, 0.1
        return resp

    def _broke(self, e: BaseException, what: str) -> bool:
        """After the connection broke with e: False to stop (closed), True to reconnect (after a pause),
        or raises ConnectionFailed when reconnecting is off or has failed for retry_for seconds."""
        if self._closed:
            return False
        if not self.reconnect:
            raise ConnectionFailed(f"{what} stream broke: {e}") from e
        now = time.monotonic()
        self._failing_since = self._failing_since or now
        if now - self._failing_since > self.retry_for:
            raise ConnectionFailed(f"{what} stream broke and could not be resumed: {e}") from e
        time.sleep(self._delay)
        self._delay = min(self._delay * 2, 2.0)
        return True


class Watch(_ResumingStream):
    """An iterator over a sandbox's new audit rows as they are written (SSE). A dropped connection
    is reopened with Last-Event-ID, so no row is missed or repeated; an `event: error` of the stream
    (e.g. too_far_behind) raises its typed error. close() ends it from any thread."""

    def __init__(self, client: Client, path: str, last_event_id: Optional[int] = None, reconnect: bool = True,
                 read_timeout: float = 60.0, retry_for: float = 60.0) -> None:
        super().__init__(client, reconnect, read_timeout, retry_for)
        self._path = path
        self.last_event_id = last_event_id

    def __iter__(self) -> Iterator[JSON]:
        return self._entries()

    def _entries(self) -> Iterator[JSON]:
        while not self._closed:
            headers = {} if self.last_event_id is None else {"Last-Event-ID": str(self.last_event_id)}
            try:
                for ev in _iter_sse(self._open(self._path, headers)):
                    if ev.event == "error":
                        raise _error_from_event(ev.data)
                    if ev.event != "entry":
                        continue
                    entry = json.loads(ev.data)
                    if ev.id is not None:
                        self.last_event_id = int(ev.id)
                    yield entry
            except (ConnectionFailed, Timeout, OSError, http.client.HTTPException) as e:
                if not self._broke(e, "watch"):
                    return
            finally:
                self._drop()
            if self._closed or not self.reconnect:
                return
            self.reconnects += 1


class Sandbox:
    """One sandbox. Fields mirror the gateway's sandbox object; refresh() reloads them."""

    def __init__(self, client: Client, info: JSON, on_exit: str = "keep") -> None:
        self._client = client
        self.on_exit = on_exit
        self.files = Files(self)
        from .processes import Processes  # it builds on this module
        self.processes = Processes(self)
        self._set(info)

    def _set(self, info: JSON) -> None:
        self.info: JSON = dict(info)
        self.id: str = info["id"]
        self.name: Optional[str] = info.get("name")
        self.type: Optional[str] = info.get("type")
        self.state: Optional[str] = info.get("state")
        self.network: Optional[str] = info.get("network")
        self.image: Optional[str] = info.get("image")  # issue 24: an image's name, or "host"
        self.owner: Optional[str] = info.get("owner")
        self.created_at: Optional[str] = info.get("created_at")
        self.expires_at: Optional[str] = info.get("expires_at")
        self.limits: Optional[JSON] = info.get("limits")
        self.paused: bool = bool(info.get("paused", False))
        self.paused_at: Optional[str] = info.get("paused_at")
        # network "egress" only (None for the others): {"default", "allow", "deny"}; the address; the
        # firewall's counters {"allowed_packets", "allowed_bytes", "denied_packets", "denied_bytes"},
        # as of the last answer (refresh() reads them again)
        self.egress_policy: Optional[JSON] = info.get("egress_policy")
        egress = info.get("egress") or {}
        self.egress_address: Optional[str] = egress.get("address")
        self.egress_counters: Optional[JSON] = egress.get("counters")

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, name={self.name!r}, state={self.state!r})"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.on_exit == "delete":
            try:
                self.delete()
            except SandboxdError:
                if exc[0] is None:
                    raise  # the block's own exception matters more than a failed clean-up

    def _path(self, sub: str = "") -> str:
        return f"/v1/sandboxes/{_q(self.id)}{sub}"

    def refresh(self) -> "Sandbox":
        self._set(self._client._request("GET", self._path()))
        return self

    def delete(self) -> None:
        """Deletes the sandbox (returns once its processes are gone); deleting a deleted one is no error."""
        self._client.delete(self.id)

    def extend(self, ttl_seconds: int) -> "Sandbox":
        """The sandbox now expires ttl_seconds from now."""
        self._set(self._client._request("PATCH", self._path(), {"ttl_seconds": int(ttl_seconds)}))
        return self

    def pause(self) -> "Sandbox":
        """Freezes every process of the sandbox; its TTL stops until resume(). While paused, exec, files,
        tools, processes and takeovers raise Conflict (code "sandbox_paused") unless its type resumes on
        use (AutoResume=yes). Pausing a paused sandbox changes nothing."""
        self._set(self._client._request("POST", self._path("/pause")))
        return self

    def snapshot(self, name: Optional[str] = None) -> JSON:
        """Takes a snapshot of the sandbox's disk (home, /tmp, /var/tmp; it is frozen meanwhile) and returns
        it: {"id", "name", "source", "type", "image", "owner", "created_at", "size"}. client.create(snapshot=id) starts
        sandboxes from it. Processes are not part of it."""
        body = {"name": name} if name is not None else {}
        return dict(self._client._request("POST", self._path("/snapshots"), body,
                                          timeout=max(self._client.timeout, 600.0)))

    def resume(self) -> "Sandbox":
        """Lets a paused sandbox run again; its expiry moves out by the time it was paused."""
        self._set(self._client._request("POST", self._path("/resume")))
        return self

    def set_network_policy(self, policy: Optional[JSON] = None, *, default: Optional[str] = None,
                           allow: Optional[Sequence[str]] = None,
                           deny: Optional[Sequence[str]] = None) -> "Sandbox":
        """Replaces the egress sandbox's whole policy (what is left out is "deny" and no entries), given
        as a dict or as keywords; effective within a second. Raises BadRequest for a bad policy and
        Conflict (code "not_egress") for a sandbox whose network is not egress."""
        if policy is None:
            policy = {k: (list(v) if k != "default" else v)
                      for k, v in (("default", default), ("allow", allow), ("deny", deny)) if v is not None}
        elif default is not None or allow is not None or deny is not None:
            raise ValueError("give the policy as a dict or as keywords, not both")
        self._set(self._client._request("PUT", self._path("/network"), {"egress_policy": policy}))
        return self

    def exec(self, command: Union[str, Sequence[str]], cwd: Optional[str] = None,
             env: Optional[Dict[str, str]] = None, stdin: Union[str, bytes, None] = None,
             timeout_seconds: Optional[int] = None, on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None, binary: bool = False) -> ExecResult:
        """Runs a command (a string for /bin/sh -c, or an argv list) and returns its result. With
        on_stdout/on_stderr the output is streamed: each callback gets chunks as they are written (the
        result's stdout/stderr are then what the callbacks got). binary=True (or bytes stdin) moves
        everything base64-encoded, and the output is bytes."""
        body: JSON = {"command": command} if isinstance(command, str) else {"argv": list(command)}
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = dict(env)
        if timeout_seconds is not None:
            body["timeout_seconds"] = int(timeout_seconds)
        binary = binary or isinstance(stdin, (bytes, bytearray))
        if stdin is not None:
            if binary:
                raw = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
                body["stdin"] = base64.b64encode(raw).decode()
            else:
                body["stdin"] = stdin
        if binary:
            body["encoding"] = "base64"
        # The answer comes when the command ends: wait for its timeout (default at most an hour).
        limit = timeout_seconds or ((self.limits or {}).get("timeout_seconds_default") or 3600)
        wait = max(self._client.timeout, float(limit) + 30.0)
        if on_stdout is None and on_stderr is None:
            return ExecResult.from_json(self._client._request("POST", self._path("/exec"), body, timeout=wait), binary)
        return self._exec_stream(body, on_stdout, on_stderr, binary, wait)

    def _exec_stream(self, body: JSON, on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback],
                     binary: bool, wait: float) -> ExecResult:
        conn, resp = self._client._open_stream("POST", self._path("/exec"), body, timeout=wait)
        out: List[Any] = []
        err: List[Any] = []
        try:
            for ev in _iter_sse(resp):
                if ev.event in ("stdout", "stderr"):
                    chunk: Union[str, bytes] = json.loads(ev.data)["data"]
                    if binary:
                        chunk = base64.b64decode(chunk)
                    (out if ev.event == "stdout" else err).append(chunk)
                    cb = on_stdout if ev.event == "stdout" else on_stderr
                    if cb is not None:
                        cb(chunk)
                elif ev.event == "exit":
                    r = ExecResult.from_json(json.loads(ev.data), binary)
                    empty: Union[str, bytes] = b"" if binary else ""
                    r.stdout = empty.join(out) if out else r.stdout  # type: ignore[attr-defined]
                    r.stderr = empty.join(err) if err else r.stderr  # type: ignore[attr-defined]
                    return r
                elif ev.event == "error":
                    raise _error_from_event(ev.data)
        except socket.timeout as e:
            raise Timeout(f"exec stream silent for {wait} s", code="client_timeout") from e
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed(f"exec stream broke: {e}") from e
        finally:
            conn.close()
        raise ConnectionFailed("exec stream ended without a result")

    def get_log(self, limit: Optional[int] = None, offset: Optional[int] = None, **filters: Any) -> List[JSON]:
        """This sandbox's audit rows, newest first (filters: operation, event, source, account_id, since,
        until, after_id, before_id)."""
        q = dict(filters, limit=limit, offset=offset)
        return list(self._client._request("GET", self._path("/log"), query=q)["entries"])

    def watch(self, last_event_id: Optional[int] = None, reconnect: bool = True, read_timeout: float = 60.0,
              retry_for: float = 60.0) -> Watch:
        """New audit rows as they are written (blocks between rows). last_event_id resumes after that row."""
        return Watch(self._client, self._path("/watch"), last_event_id, reconnect, read_timeout, retry_for)

    def takeover_token(self) -> JSON:
        """A short-lived single-use token for the takeover route ({"token", "expires_at"})."""
        return dict(self._client._request("POST", self._path("/takeover-token")))

    def takeover(self, cols: Optional[int] = None, rows: Optional[int] = None, timeout: Optional[float] = None) -> Any:
        """An interactive shell in the sandbox: a connected TakeoverSocket (a websocket.WebSocket) with
        binary frames carrying the terminal's raw bytes. Needs python3-websocket and an admin key."""
        from .takeover import connect
        return connect(self._client, self._path("/takeover"), cols, rows,
                       self._client.timeout if timeout is None else timeout)


class ApiKeys:
    """API keys (the calling key needs api-key.admin)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, name: Optional[str] = None, preset: Optional[str] = None, role: Optional[str] = None,
               actions: Optional[Sequence[str]] = None, sandboxes: Union[str, Sequence[str], None] = None,
               ttl_seconds: Optional[int] = None) -> CreatedKey:
        body: JSON = {}
        for k, v in (("name", name), ("preset", preset), ("role", role), ("ttl_seconds", ttl_seconds)):
            if v is not None:
                body[k] = v
        if actions is not None:
            body["actions"] = list(actions)
        if sandboxes is not None:
            body["sandboxes"] = sandboxes if isinstance(sandboxes, str) else list(sandboxes)
        d = self._client._request("POST", "/v1/api-keys", body)
        return CreatedKey(secret=d["secret"], api_key=d["apiKey"])

    def list(self) -> List[JSON]:
        return list(self._client._request("GET", "/v1/api-keys")["api_keys"])

    def revoke(self, key_id: str) -> None:
        self._client._request("DELETE", f"/v1/api-keys/{_q(key_id)}")


def _q(s: str) -> str:
    return urllib.parse.quote(str(s), safe="")


def _error_from(status: int, headers: Dict[str, str], data: bytes) -> SandboxdError:
    rid = headers.get("x-request-id")
    body = None
    try:
        body = json.loads(data) if data else None
    except ValueError:
        pass
    return error_for(status, body, rid, data.decode("utf-8", "replace") if body is None else "")


def _error_from_event(data: str) -> SandboxdError:
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    status = int(body.get("status", 500)) if isinstance(body, dict) else 500
    return error_for(status, body, None, data)


# --- the export's directory layout (docs/audit-api.md, "Run-session export") --------------------------------

_STATE = ".audit-export.json"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_atomic(d: str, name: str, data: bytes, sync: bool = False) -> None:
    """d/name replaced at once (a temporary file renamed over it); symlinks are not followed."""
    tmp = os.path.join(d, f".{name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        _write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(d, name))


def _metadata(events: List[JSON]) -> JSON:
    """metadata.json from a run's events: its last event without time and event, with both ends."""
    last = events[-1]
    md = {k: v for k, v in last.items() if k not in ("time", "event")}
    start = events[0]["time"]
    t = datetime.strptime(start, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    end = t + timedelta(milliseconds=int(last.get("durationMs") or 0))
    md["startedAt"] = start
    md["finishedAt"] = end.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return md


_RUN_ID = re.compile(r"run-([0-9]+|sb_[a-z2-7]{10}-p[0-9]{1,10})")


def _process_metadata(old: Optional[JSON], evs: List[JSON]) -> Tuple[int, Optional[JSON]]:
    """A background process's metadata.json after one row's events, as sandboxctl's (audit-export.c):
    0 nothing to write, 1 metadata.json only (it runs on), 2 also its output (it ended). A row applied
    twice changes nothing."""
    md, what = (json.loads(json.dumps(old)) if old is not None else None), 0

    def carry(new: JSON, ev: JSON, start: bool) -> JSON:
        new["startRowId"] = ev["rowId"] if start else (md or {}).get("startRowId")
        sig = (md or {}).get("signals")
        new["signals"] = sig if isinstance(sig, list) else []
        return new

    for ev in evs:
        name = ev.get("event")
        if name == "sandbox.command.signal":
            if ev.get("status") != "finished":
                continue  # not sent: nothing about the process changed
            if md is None:  # its start is not in this export (retention removed it)
                md = {"runId": ev.get("runId"), "kind": "process"}
                for k in ("process", "unit", "sandbox"):
                    if k in ev:
                        md[k] = ev[k]
                md.update(state=None, startedAt=None, finishedAt=None, startRowId=None, signals=[])
            if not isinstance(md.get("signals"), list):
                md["signals"] = []
            if all(s.get("rowId") != ev["rowId"] for s in md["signals"]):
                entry = {k: ev[k] for k in ("signal", "time") if k in ev}
                entry["rowId"] = ev["rowId"]
                entry.update({k: ev[k] for k in ("account", "source", "requestId") if k in ev})
                md["signals"].append(entry)
                md["signals"].sort(key=lambda s: s.get("rowId", 0))
            what = max(what, 1)
            continue
        base = {k: v for k, v in ev.items() if k not in ("time", "event")}
        if name == "sandbox.command.started":
            if md is not None and isinstance(md.get("finishedAt"), str):
                continue  # a page applied again after the run's end was written: the end stays
            base.update(state="running", startedAt=ev.get("time"), finishedAt=None)
            md, what = carry(base, ev, True), max(what, 1)
        else:
            base.setdefault("state", None)
            base.setdefault("startedAt", ev.get("time"))
            base["finishedAt"] = ev.get("time")
            md, what = carry(base, ev, ev.get("operation") == "process.start"), 2
    return what, (md if what else None)


def _export_dir(client: Client, d: str, sandbox: Optional[str], read_timeout: float) -> Iterator[JSON]:
    import fcntl
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(dfd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as sandboxctl does: one export per directory
    except BlockingIOError:
        os.close(dfd)
        raise ValueError(f"{d}: another export is writing to it") from None
    jsonl = os.path.join(d, "audit.jsonl")
    try:
        fd = os.open(jsonl, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except BaseException:
        os.close(dfd)
        raise
    try:
        size = os.fstat(fd).st_size
        last, committed = 0, 0
        try:
            with open(os.path.join(d, _STATE), "rb") as f:
                st = json.load(f)
            if st.get("version") != 1:
                raise ValueError(f"{d}/{_STATE} is not an export state this SDK knows")
            last, committed = int(st["lastRowId"]), int(st["jsonlSize"])
            if st.get("sandbox") != sandbox:
                raise ValueError(f"{d} holds an export of {st.get('sandbox') or 'the whole log'}")
        except FileNotFoundError:
            if size > 0:
                raise ValueError(f"{jsonl} is not empty but {_STATE} is missing: export into an empty directory")
        if size < committed:
            raise ValueError(f"{jsonl} is shorter than the export wrote: it was changed by something else")
        # lines past the state were never committed: cut, and written again from the log
        os.ftruncate(fd, committed)
        os.lseek(fd, committed, os.SEEK_SET)

        def write_run(evs: List[JSON], rid: int) -> None:
            run = evs[0]["runId"]
            if not _RUN_ID.fullmatch(run):
                raise ValueError(f"unexpected runId {run!r}")
            rd = os.path.join(d, run)
            if evs[0].get("kind") == "process":  # one run over several rows: what it holds so far
                old = None
                try:
                    mfd = os.open(os.path.join(rd, "metadata.json"), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    with os.fdopen(mfd, "rb") as f:
                        old = json.load(f)
                except FileNotFoundError:
                    pass
                what, md = _process_metadata(old, evs)
            else:
                what, md = 2, _metadata(evs)
            if what == 0:
                return
            try:
                os.mkdir(rd, 0o755)
            except FileExistsError:
                pass
            if os.path.islink(rd) or not os.path.isdir(rd):
                raise ValueError(f"{rd} must be a directory, not a symlink")
            if what == 2:
                try:
                    out, err = client.get_output(rid, binary=True)
                    md["outputAvailable"] = True
                except NotFound:
                    out, err = b"", b""
                    md["outputAvailable"] = False
                _write_atomic(rd, "stdout.txt", out)
                _write_atomic(rd, "stderr.txt", err)
            _write_atomic(rd, "metadata.json", (json.dumps(md, indent=2) + "\n").encode())

        def commit(rows: List[List[Tuple[JSON, bytes]]]) -> None:
            nonlocal last, committed
            buf = b""
            for lines in rows:
                evs = [ev for ev, _ in lines]
                rid = evs[0]["rowId"]
                if evs[0]["event"].startswith("sandbox.command."):
                    write_run(evs, rid)
                for _, line in lines:
                    buf += line
            _write_all(fd, buf)
            os.fdatasync(fd)
            committed += len(buf)
            last = rows[-1][0][0]["rowId"]
            state = {"version": 1, "lastRowId": last, "jsonlSize": committed, "sandbox": sandbox}
            _write_atomic(d, _STATE, (json.dumps(state, indent=2) + "\n").encode(), sync=True)

        # a row's events are committed together, and only once the next row's begin (or the stream ends)
        pending: List[List[Tuple[JSON, bytes]]] = []
        for ev, line in client._export_lines(last, sandbox, read_timeout):
            if pending and pending[-1][0][0]["rowId"] == ev["rowId"]:
                pending[-1].append((ev, line))
            else:
                if len(pending) >= 200:  # all complete: ev begins another row
                    commit(pending)
                    pending = []
                pending.append([(ev, line)])
            yield ev
        if pending:
            commit(pending)
    finally:
        os.close(fd)
        os.close(dfd)
