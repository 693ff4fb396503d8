"""A real headless Chromium driven over the DevTools protocol on a pipe (no extra Python package needed).

``chromium --remote-debugging-pipe`` reads NUL-separated JSON commands on fd 3 and writes replies and
events on fd 4. Enough of the protocol for a page test: load a page, collect console errors and uncaught
exceptions, evaluate JavaScript, click at a point with real mouse events, take a screenshot.
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    """The first Chromium-family executable on PATH, or None."""
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class Browser:
    """One headless browser with one page (``with Browser(exe) as b: b.load(url) ...``)."""

    def __init__(self, exe: str, width: int = 1400, height: int = 1000, timeout: float = 60.0):
        self.timeout, self._id, self._buf, self.events = timeout, 0, b"", []
        to_child, self._w = os.pipe()
        self._r, from_child = os.pipe()

        def fds() -> None:  # in the child: the protocol's fds 3 (commands in) and 4 (replies out)
            a, b = os.dup(to_child), os.dup(from_child)  # fresh numbers first: a pipe end may already be 3 or 4
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=fds, close_fds=False,  # our pipe ends are non-inheritable; fds 3 and 4 are
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("no answer from the browser")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise ConnectionError("the browser closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        """Send one command and wait for its reply (events meanwhile go to ``self.events``)."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self._message(deadline)
            if e.get("method") == method:
                return e
            self.events.append(e)

    def load(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression!r} threw {res['exceptionDetails']}")
        return res["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A left click with real mouse events at page coordinates (x, y) of the viewport."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
                      session=True)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:300])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=True)
        Path(path).write_bytes(base64.b64decode(data["data"]))
        return Path(path)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.send("Browser.close")
        except (OSError, RuntimeError, TimeoutError, ConnectionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._w)
        os.close(self._r)
