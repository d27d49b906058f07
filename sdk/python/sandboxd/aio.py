# SPDX-License-Identifier: LGPL-2.1-or-later
# An asyncio variant of the SDK: the same calls as coroutines, each run on a worker thread (no new packages).
from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Sequence, Union

from .client import Client, CreatedKey, ExecResult, Sandbox, Watch
from .processes import OutputChunk, Process, Processes, ProcessExit

JSON = Dict[str, Any]


async def _run(fn: Any, *args: Any, **kw: Any) -> Any:
    # http.client blocks; a worker thread (each with its own keep-alive connection) keeps the loop free
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kw))


async def _aiter(it: Iterator[Any], close: Callable[[], Any]) -> AsyncIterator[Any]:
    """A blocking iterator's items, each taken on a worker thread; close() when the iteration ends."""
    done = object()
    try:
        while True:
            item = await _run(next, it, done)
            if item is done:
                return
            yield item
    finally:
        await _run(close)


class AsyncFiles:
    def __init__(self, sb: Sandbox) -> None:
        self._files = sb.files

    async def write(self, path: str, data: Union[str, bytes], **kw: Any) -> None:
        await _run(self._files.write, path, data, **kw)

    async def read(self, path: str, offset: Optional[int] = None, length: Optional[int] = None) -> bytes:
        return bytes(await _run(self._files.read, path, offset, length))

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return str(await _run(self._files.read_text, path, encoding))

    async def tool(self, name: str, **args: Any) -> JSON:
        return dict(await _run(self._files.tool, name, **args))


class AsyncProcess:
    """A background process's handle for asyncio: Process's calls as coroutines, its output as an async
    iterator (`async for chunk in proc`)."""

    def __init__(self, proc: Process) -> None:
        self.sync = proc

    def __getattr__(self, name: str) -> Any:  # id, state, exit_code, pid, argv, …
        return getattr(self.sync, name)

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"

    async def refresh(self) -> "AsyncProcess":
        await _run(self.sync.refresh)
        return self

    async def wait(self, timeout: Optional[float] = None) -> ProcessExit:
        r: ProcessExit = await _run(self.sync.wait, timeout)
        return r

    async def kill(self, signal: Union[str, int] = "TERM") -> "AsyncProcess":
        await _run(self.sync.kill, signal)
        return self

    async def stop(self) -> "AsyncProcess":
        await _run(self.sync.stop)
        return self

    async def write(self, data: Union[str, bytes]) -> None:
        await _run(self.sync.write, data)

    async def close_stdin(self) -> None:
        await _run(self.sync.close_stdin)

    async def output(self, stream: str = "stdout", binary: bool = False) -> Union[str, bytes]:
        r: Union[str, bytes] = await _run(self.sync.output, stream, binary)
        return r

    async def follow(self, stream: str = "both", binary: bool = False, offset: Any = None,
                     **kw: Any) -> AsyncIterator[OutputChunk]:
        """Process.follow's chunks, resuming after dropped connections the same way."""
        f = self.sync.follow(stream, binary, offset, **kw)
        async for chunk in _aiter(iter(f), f.close):
            yield chunk

    def __aiter__(self) -> AsyncIterator[OutputChunk]:
        return self.follow()


class AsyncProcesses:
    def __init__(self, processes: Processes) -> None:
        self._p = processes

    async def start(self, command: Union[str, Sequence[str]], **kw: Any) -> AsyncProcess:
        return AsyncProcess(await _run(self._p.start, command, **kw))

    async def list(self) -> List[AsyncProcess]:
        return [AsyncProcess(p) for p in await _run(self._p.list)]

    async def get(self, process_id: str) -> AsyncProcess:
        return AsyncProcess(await _run(self._p.get, process_id))


class AsyncSandbox:
    """A sandbox for asyncio code; `async with` deletes it at the end when on_exit is "delete"."""

    def __init__(self, sb: Sandbox) -> None:
        self.sync = sb
        self.files = AsyncFiles(sb)
        self.processes = AsyncProcesses(sb.processes)

    def __getattr__(self, name: str) -> Any:  # id, name, state, expires_at, …
        return getattr(self.sync, name)

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await _run(self.sync.__exit__, *exc)

    async def delete(self) -> None:
        await _run(self.sync.delete)

    async def extend(self, ttl_seconds: int) -> "AsyncSandbox":
        await _run(self.sync.extend, ttl_seconds)
        return self

    async def refresh(self) -> "AsyncSandbox":
        await _run(self.sync.refresh)
        return self

    async def pause(self) -> "AsyncSandbox":
        await _run(self.sync.pause)
        return self

    async def resume(self) -> "AsyncSandbox":
        await _run(self.sync.resume)
        return self

    async def snapshot(self, name: Optional[str] = None) -> JSON:
        return dict(await _run(self.sync.snapshot, name))

    async def set_network_policy(self, policy: Optional[JSON] = None, **kw: Any) -> "AsyncSandbox":
        """Sandbox.set_network_policy: the egress policy replaced whole (a dict, or default=, allow=, deny=)."""
        await _run(self.sync.set_network_policy, policy, **kw)
        return self

    async def exec(self, command: Union[str, Sequence[str]], **kw: Any) -> ExecResult:
        """As Sandbox.exec; on_stdout/on_stderr callbacks run on the worker thread."""
        r: ExecResult = await _run(self.sync.exec, command, **kw)
        return r

    async def get_log(self, limit: Optional[int] = None, offset: Optional[int] = None, **filters: Any) -> List[JSON]:
        return list(await _run(self.sync.get_log, limit, offset, **filters))

    async def watch(self, last_event_id: Optional[int] = None, **kw: Any) -> AsyncIterator[JSON]:
        """New audit rows as they are written, resuming after dropped connections like Sandbox.watch."""
        w: Watch = self.sync.watch(last_event_id, **kw)
        async for entry in _aiter(iter(w), w.close):
            yield entry


class AsyncApiKeys:
    def __init__(self, client: Client) -> None:
        self._keys = client.api_keys

    async def create(self, **kw: Any) -> CreatedKey:
        k: CreatedKey = await _run(self._keys.create, **kw)
        return k

    async def list(self) -> List[JSON]:
        return list(await _run(self._keys.list))

    async def revoke(self, key_id: str) -> None:
        await _run(self._keys.revoke, key_id)


class AsyncImages:
    """Images's calls as coroutines (issue 24); on_progress runs on the worker thread the call runs on."""

    def __init__(self, client: Client) -> None:
        self._images = client.images

    async def list(self) -> List[JSON]:
        return list(await _run(self._images.list))

    async def get(self, name: str) -> JSON:
        return dict(await _run(self._images.get, name))

    async def remove(self, name: str) -> None:
        await _run(self._images.remove, name)

    async def import_archive(self, name: str, source: Any, **kw: Any) -> JSON:
        return dict(await _run(self._images.import_archive, name, source, **kw))

    async def build(self, name: str, **kw: Any) -> JSON:
        return dict(await _run(self._images.build, name, **kw))


class AsyncClient:
    """Client for asyncio: `async with await client.create(...) as sb: r = await sb.exec(...)`."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, timeout: float = 60.0) -> None:
        self.sync = Client(api_key, base_url, timeout)
        self.api_keys = AsyncApiKeys(self.sync)
        self.images = AsyncImages(self.sync)

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"

    async def create(self, type: Optional[str] = None, ttl_seconds: Optional[int] = None, name: Optional[str] = None,
                     network: Optional[str] = None, on_exit: str = "delete",
                     egress_policy: Optional[JSON] = None, image: Optional[str] = None,
                     snapshot: Optional[str] = None) -> AsyncSandbox:
        return AsyncSandbox(await _run(self.sync.create, type, ttl_seconds, name, network, on_exit, egress_policy,
                                       image, snapshot))

    async def list_snapshots(self) -> List[JSON]:
        return list(await _run(self.sync.list_snapshots))

    async def get_snapshot(self, snapshot_id: str) -> JSON:
        return dict(await _run(self.sync.get_snapshot, snapshot_id))

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await _run(self.sync.delete_snapshot, snapshot_id)

    async def get(self, sandbox_id: str) -> AsyncSandbox:
        return AsyncSandbox(await _run(self.sync.get, sandbox_id))

    async def list(self) -> List[AsyncSandbox]:
        return [AsyncSandbox(s) for s in await _run(self.sync.list)]

    async def delete(self, sandbox_id: str) -> None:
        await _run(self.sync.delete, sandbox_id)

    async def get_log(self, limit: Optional[int] = None, offset: Optional[int] = None, **filters: Any) -> List[JSON]:
        return list(await _run(self.sync.get_log, limit, offset, **filters))

    async def export(self, since: Optional[int] = None, sandbox: Optional[str] = None,
                     dir: Optional[str] = None, **kw: Any) -> AsyncIterator[JSON]:
        """The run-session export's events as they stream, like Client.export (dir: written as well)."""
        it = self.sync.export(since, sandbox, dir, **kw)
        async for ev in _aiter(it, it.close):
            yield ev
