"""A tiny Chrome DevTools Protocol client (stdlib only) to load a page in headless chromium.

It records what a person would see in the devtools console (console API calls, uncaught
exceptions, log entries such as failed resource loads) and every request the page made, and
takes a screenshot. Used by the report tests to prove index.html works opened from disk.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser")


def find_chromium() -> str | None:
    override = os.environ.get("HARNESS_CHROMIUM")
    if override:
        return override if Path(override).exists() or shutil.which(override) else None
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name) if not os.path.isabs(name) else (name if Path(name).exists() else None)
        if found:
            return found
    return None


@dataclass
class PageLoad:
    console: list[str] = field(default_factory=list)  # "level: text" for every console message
    errors: list[str] = field(default_factory=list)  # error-level console messages and exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    failed: list[str] = field(default_factory=list)  # requests that failed to load
    screenshot: bytes = b""
    title: str = ""
    body_text: str = ""


class _WebSocket:
    """Just enough RFC 6455 for CDP: text frames, client masking, no extensions."""

    def __init__(self, url: str, timeout: float):
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (
            f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def _recv_exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return buf

    def send(self, text: str) -> None:
        payload = text.encode()
        head = bytes([0x81])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._recv_exact(2)
            opcode = b0 & 0x0F
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            mask = self._recv_exact(4) if b1 & 0x80 else None
            data = self._recv_exact(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode == 0x9:  # ping -> pong
                self.sock.sendall(bytes([0x8A, 0x80]) + os.urandom(4))
                continue
            message += data
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _Session:
    def __init__(self, ws: _WebSocket):
        self.ws = ws
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"CDP {method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"CDP {method}: no answer in {timeout} s")

    def wait_event(self, name: str, timeout: float) -> dict:
        for ev in self.events:
            if ev["method"] == name:
                return ev
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == name:
                    return msg
        raise TimeoutError(f"CDP: no {name} in {timeout} s")

    def drain(self, seconds: float) -> None:
        """Collect events for a short while (late console messages, image decodes)."""
        previous = self.ws.sock.gettimeout()
        self.ws.sock.settimeout(0.2)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                try:
                    msg = json.loads(self.ws.recv())
                except TimeoutError:
                    continue
                if "method" in msg:
                    self.events.append(msg)
        finally:
            self.ws.sock.settimeout(previous)


def _wait_port(user_data_dir: Path, proc: subprocess.Popen, timeout: float) -> int:
    port_file = user_data_dir / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited early with code {proc.returncode}")
        if port_file.exists():
            first = port_file.read_text().splitlines()
            if first and first[0].strip().isdigit():
                return int(first[0])
        time.sleep(0.1)
    raise TimeoutError("chromium did not open its debugging port")


def _remote_object_text(arg: dict) -> str:
    if "value" in arg:
        return str(arg["value"])
    return str(arg.get("description") or arg.get("type"))


def load_page(
    chromium: str, url: str, *, width: int = 1280, height: int = 2000, timeout: float = 60.0
) -> PageLoad:
    """Open ``url`` in a fresh headless chromium, wait for the load event, collect everything."""
    with tempfile.TemporaryDirectory(prefix="harness-chromium-", ignore_cleanup_errors=True) as tmp:
        udd = Path(tmp)
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={udd}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        # Own process group: the browser's helper processes are ended with it, by its id.
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        ws = None
        try:
            port = _wait_port(udd, proc, timeout)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
                targets = json.load(r)
            page = next(t for t in targets if t.get("type") == "page")
            ws = _WebSocket(page["webSocketDebuggerUrl"], timeout)
            s = _Session(ws)
            for domain in ("Page", "Runtime", "Log", "Network"):
                s.call(f"{domain}.enable")
            s.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
            s.call("Page.navigate", {"url": url})
            s.wait_event("Page.loadEventFired", timeout)
            s.drain(0.5)
            shot = s.call("Page.captureScreenshot", {"format": "png"})
            title = s.call("Runtime.evaluate", {"expression": "document.title", "returnByValue": True})
            body = s.call(
                "Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True}
            )
            s.drain(0.2)
            out = PageLoad(
                screenshot=base64.b64decode(shot["data"]),
                title=str(title.get("result", {}).get("value", "")),
                body_text=str(body.get("result", {}).get("value", "")),
            )
            _collect(s.events, out)
            return out
        finally:
            if ws is not None:
                ws.close()
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def _collect(events: list[dict], out: PageLoad) -> None:
    for ev in events:
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.consoleAPICalled":
            text = " ".join(_remote_object_text(a) for a in p.get("args", []))
            out.console.append(f"{p.get('type')}: {text}")
            if p.get("type") in ("error", "assert"):
                out.errors.append(f"console.{p.get('type')}: {text}")
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "exception")
            out.console.append(f"exception: {text}")
            out.errors.append(f"uncaught: {text}")
        elif m == "Log.entryAdded":
            e = p.get("entry", {})
            text = f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip()
            out.console.append(f"{e.get('level')}: {text}")
            if e.get("level") == "error":
                out.errors.append(text)
        elif m == "Network.requestWillBeSent":
            out.requests.append(p.get("request", {}).get("url", ""))
        elif m == "Network.loadingFailed":
            out.failed.append(f"{p.get('errorText')} ({p.get('requestId')})")
