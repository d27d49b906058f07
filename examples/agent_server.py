#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# An always-on agent server: holds the only API key and runs each untrusted piece of code in a fresh sandbox.
"""agent_server.py — the always-on agent process of the Python SDK's example.

    SANDBOXD_API_KEY=sbx_live_… examples/agent_server.py [--listen 127.0.0.1] [--port 8080]

POST /task with a JSON body:
  {"kind": "status"}                      answered locally, without the gateway
  {"kind": "run_code", "code": "…"}       run as python3 in a fresh sandbox (on_exit delete), at most
                                          --max-sandboxes (2) at once; optional "timeout_seconds"
The answer to run_code carries the result, the timings create_to_ready / write_and_exec / delete /
total (ms) and "key_in_output": whether the API key appeared in the output (it is searched for, and
redacted if it ever did). The key is never passed into a sandbox: not in its environment, files or
command line.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))

from sandboxd import Client, SandboxdError  # noqa: E402

MAX_BODY = 1 << 20


class Agent:
    def __init__(self, client: Client, max_sandboxes: int = 2, sandbox_type: str = "small") -> None:
        self.client = client
        self.max_sandboxes = max_sandboxes
        self.sandbox_type = sandbox_type
        self.slots = threading.BoundedSemaphore(max_sandboxes)
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.running = 0
        self.peak_running = 0
        self.waiting = 0
        self.completed = 0
        self.failed = 0
        self.seq = 0

    def status(self) -> Dict[str, Any]:
        with self.lock:
            return {"ok": True, "kind": "status", "running": self.running, "waiting": self.waiting,
                    "peak_running": self.peak_running, "max_sandboxes": self.max_sandboxes,
                    "completed": self.completed, "failed": self.failed,
                    "uptime_s": round(time.monotonic() - self.started, 3)}

    def _redact(self, text: str) -> Tuple[str, bool]:
        secret = self.client.api_key
        found = False
        for needle in (secret, secret[len("sbx_live_"):] if secret.startswith("sbx_live_") else secret):
            if needle and needle in text:
                found = True
                text = text.replace(needle, "[REDACTED]")
        return text, found

    def run_code(self, code: str, timeout_seconds: int) -> Dict[str, Any]:
        with self.lock:
            self.seq += 1
            n = self.seq
            self.waiting += 1
        self.slots.acquire()
        with self.lock:
            self.waiting -= 1
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
        t0 = time.monotonic()
        timings: Dict[str, float] = {}
        sid = None
        try:
            sb = self.client.create(type=self.sandbox_type, ttl_seconds=max(60, timeout_seconds + 60),
                                    name=f"agent-task-{os.getpid()}-{n}", on_exit="delete")
            t1 = time.monotonic()
            timings["create_to_ready"] = (t1 - t0) * 1000
            with sb:
                sid = sb.id
                sb.files.write("/tmp/task.py", code)
                r = sb.exec(["python3", "/tmp/task.py"], timeout_seconds=timeout_seconds)
                t2 = time.monotonic()
                timings["write_and_exec"] = (t2 - t1) * 1000
            t3 = time.monotonic()
            timings["delete"] = (t3 - t2) * 1000
            timings["total"] = (t3 - t0) * 1000
            stdout, leak_out = self._redact(str(r.stdout))
            stderr, leak_err = self._redact(str(r.stderr))
            with self.lock:
                self.completed += 1
            return {"ok": True, "kind": "run_code", "sandbox_id": sid, "exit_code": r.exit_code,
                    "stdout": stdout, "stderr": stderr, "stdout_truncated": r.stdout_truncated,
                    "stderr_truncated": r.stderr_truncated, "timed_out": r.timed_out, "oom_killed": r.oom_killed,
                    "duration_ms": r.duration_ms, "timings_ms": {k: round(v, 3) for k, v in timings.items()},
                    "key_in_output": leak_out or leak_err}
        except Exception:
            with self.lock:
                self.failed += 1
            raise
        finally:
            with self.lock:
                self.running -= 1
            self.slots.release()


def make_handler(agent: Agent) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "agent-server/0.1"

        def log_message(self, fmt: str, *args: Any) -> None:
            sys.stderr.write("agent_server: " + (fmt % args) + "\n")

        def _answer(self, status: int, body: Dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, code: str, message: str, **extra: Any) -> None:
            self._answer(status, dict({"ok": False, "code": code, "error": message}, **extra))

        def do_GET(self) -> None:
            self._error(405 if self.path == "/task" else 404, "not_found", "POST /task only")

        def do_POST(self) -> None:
            if self.path != "/task":
                return self._error(404, "not_found", "POST /task only")
            try:
                n = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return self._error(400, "invalid_request", "bad Content-Length")
            if n > MAX_BODY:
                return self._error(413, "payload_too_large", f"the body is over {MAX_BODY} bytes")
            try:
                task = json.loads(self.rfile.read(n) or b"null")
            except ValueError:
                return self._error(400, "invalid_json", "the body is not JSON")
            if not isinstance(task, dict):
                return self._error(400, "invalid_request", "the body must be a JSON object")
            kind = task.get("kind")
            if kind == "status":
                return self._answer(200, agent.status())
            if kind != "run_code":
                return self._error(400, "invalid_request", 'kind must be "status" or "run_code"')
            code = task.get("code")
            timeout = task.get("timeout_seconds", 30)
            if not isinstance(code, str):
                return self._error(400, "invalid_request", "run_code needs code, a string")
            if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 3600:
                return self._error(400, "invalid_request", "timeout_seconds must be an integer 1..3600")
            try:
                return self._answer(200, agent.run_code(code, timeout))
            except SandboxdError as e:
                return self._error(502, "sandbox_error", e.message, upstream_status=e.status,
                                   upstream_code=e.code, request_id=e.request_id)

    return Handler


def main(argv: Any = None) -> int:
    p = argparse.ArgumentParser(description="Runs untrusted code from POST /task in fresh sandboxes.")
    p.add_argument("--listen", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080, help="0 picks a free port (printed on stdout)")
    p.add_argument("--base-url", default=os.environ.get("SANDBOXD_BASE_URL", "http://127.0.0.1:8790"))
    p.add_argument("--max-sandboxes", type=int, default=2)
    p.add_argument("--type", default="small")
    args = p.parse_args(argv)
    key = os.environ.get("SANDBOXD_API_KEY")
    if not key:
        print("agent_server: set SANDBOXD_API_KEY", file=sys.stderr)
        return 2
    agent = Agent(Client(key, args.base_url, timeout=120), args.max_sandboxes, args.type)
    server = ThreadingHTTPServer((args.listen, args.port), make_handler(agent))
    server.daemon_threads = False  # on shutdown, wait for tasks so their sandboxes are deleted
    print(f"listening on http://{args.listen}:{server.server_address[1]}", flush=True)

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
