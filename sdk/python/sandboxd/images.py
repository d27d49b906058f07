# SPDX-License-Identifier: LGPL-2.1-or-later
# The images namespace (issue 24): sandboxd's image store over the gateway: list, get, remove, import, build.
from __future__ import annotations

import http.client
import io
import json
import os
import socket
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

from .errors import ConnectionFailed, SandboxdError, Timeout, error_for

if TYPE_CHECKING:
    from .client import Client

JSON = Dict[str, Any]
ProgressCallback = Callable[[JSON], None]
# What import_archive() sends: a path, the bytes themselves, or a binary stream (a file, a pipe, a socket's
# makefile(), any object with read()) or an iterable of byte chunks, sent chunked as it is read.
ArchiveSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes], Iterable[bytes]]


class Images:
    """The images sandboxes may be made of (`client.images`). Reading needs sandbox.read; building, importing
    and removing need an admin key. Images are JSON objects as the gateway sends them: name, source,
    created_at, size, digest (and, from get(), the hygiene counts and used_by)."""

    def __init__(self, client: "Client") -> None:
        self._client = client

    def list(self) -> List[JSON]:
        return list(self._client._request("GET", "/v1/images")["images"])

    def get(self, name: str) -> JSON:
        from .client import _q
        return dict(self._client._request("GET", f"/v1/images/{_q(name)}"))

    def remove(self, name: str) -> None:
        """Removes the image; Conflict while a sandbox runs on it, NotFound if there is none."""
        from .client import _q
        self._client._request("DELETE", f"/v1/images/{_q(name)}")

    def import_archive(self, name: str, source: ArchiveSource, format: str = "tar", tag: Optional[str] = None,
                       on_progress: Optional[ProgressCallback] = None, timeout: Optional[float] = 600.0) -> JSON:
        """Imports an archive (format "tar", any compression; "oci-archive" with tag; "docker-archive") as
        image name and returns it once sandboxd's job is done. The archive is streamed, never read whole
        into memory here (a path or a stream; bytes are sent as they are). on_progress gets each progress
        event ({"job", "phase", "done", "total"}). A refused archive raises BadRequest (code invalid_image);
        an interrupted call (an exception in on_progress, a timeout) cancels the job."""
        query = {"name": name, "format": format, "tag": tag}
        if isinstance(source, (bytes, bytearray, memoryview)):
            return self._make(query, bytes(source), None, on_progress, timeout)
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                return self._make(query, f, os.fstat(f.fileno()).st_size, on_progress, timeout)
        return self._make(query, source, None, on_progress, timeout)

    def build(self, name: str, suite: Optional[str] = None, variant: Optional[str] = None,
              packages: Optional[Sequence[str]] = None, on_progress: Optional[ProgressCallback] = None,
              timeout: Optional[float] = 3600.0) -> JSON:
        """Builds image name with mmdebstrap (suite, variant, packages as sandboxd's BuildImage takes them)
        and returns it once done; on_progress as import_archive()'s. A failed build raises with code
        build_failed."""
        build: JSON = {}
        for k, v in (("suite", suite), ("variant", variant)):
            if v is not None:
                build[k] = v
        if packages is not None:
            build["packages"] = list(packages)
        return self._make({}, json.dumps({"name": name, "build": build}).encode(), None, on_progress, timeout,
                          content_type="application/json")

    # --- one POST /v1/images on a connection of its own --------------------------------------------------

    def _make(self, query: JSON, body: Any, length: Optional[int], on_progress: Optional[ProgressCallback],
              timeout: Optional[float], content_type: str = "application/octet-stream") -> JSON:
        from .client import _error_from, _iter_sse
        c = self._client
        extra = {"Content-Type": content_type}
        if on_progress is not None:
            extra["Accept"] = "text/event-stream"
        if isinstance(body, bytes):
            length = len(body)
        elif not hasattr(body, "read"):
            body = _IterReader(iter(body))
        if length is not None:
            extra["Content-Length"] = str(length)
        else:
            extra["Transfer-Encoding"] = "chunked"
        conn = c._new_conn(timeout)
        try:
            try:
                conn.putrequest("POST", c._url("/v1/images", query), skip_accept_encoding=True)
                for k, v in c._headers(extra).items():
                    conn.putheader(k, v)
                conn.endheaders()
                _send_body(conn, body, chunked=length is None)
                resp = conn.getresponse()
            except socket.timeout as e:
                raise Timeout(f"no answer from {c.base_url} within {timeout} s", code="client_timeout") from e
            except (BrokenPipeError, ConnectionResetError):
                # the gateway answered early (a refusal) and closed: its answer is what counts
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException) as e:
                    raise ConnectionFailed(f"connection to {c.base_url} broke: {e}") from e
            except OSError as e:
                raise ConnectionFailed(f"cannot reach {c.base_url}: {e}") from e
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            if resp.status >= 400 or on_progress is None:
                data = resp.read()
                if resp.status >= 400:
                    raise _error_from(resp.status, hdrs, data)
                return dict(json.loads(data))
            for ev in _iter_sse(resp):
                d = json.loads(ev.data) if ev.data else {}
                if ev.event == "progress":
                    on_progress(d)
                elif ev.event == "image":
                    return dict(d)
                elif ev.event == "error":
                    raise error_for(int(d.get("status", 502)), d, hdrs.get("x-request-id"), "")
            raise ConnectionFailed("the image stream ended without the image or an error")
        except socket.timeout as e:
            raise Timeout(f"no answer from {c.base_url} within {timeout} s", code="client_timeout") from e
        finally:
            # before the end, closing the connection makes the gateway cancel the job
            conn.close()


class _IterReader(io.RawIOBase):
    """An iterable of byte chunks as a file to read()."""

    def __init__(self, it: Iterable[bytes]) -> None:
        self._it = iter(it)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        while not self._buf:
            try:
                self._buf = bytes(next(self._it))
            except StopIteration:
                return b""
        if n < 0 or n >= len(self._buf):
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _send_body(conn: http.client.HTTPConnection, body: Any, chunked: bool) -> None:
    if isinstance(body, bytes):
        conn.send(body)
        return
    while True:
        block = body.read(65536)
        if not block:
            break
        conn.send(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
    if chunked:
        conn.send(b"0\r\n\r\n")


__all__ = ["Images", "ArchiveSource", "ProgressCallback", "SandboxdError"]
