"""Debian's Chromium, headless, driven through its DevTools protocol over a WebSocket (websocket-client).

Each page is a target of its own with a flattened session; the events of a session (console messages,
exceptions, network requests, log entries) are kept for the test to read.
"""

import json
import queue
import re
import subprocess
import threading
import time

import websocket


class DevToolsError(RuntimeError):
    pass


class Page:
    def __init__(self, browser, session):
        self.browser = browser
        self.session = session
        self.events = []

    def call(self, method, **params):
        return self.browser.call(method, params, self.session)

    def wait_for(self, method, timeout=60):
        return self.browser.wait_for(method, self.session, timeout)

    def evaluate(self, expression):
        """The value of a JavaScript expression, awaited if it is a promise; raises on an exception."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise DevToolsError("%s: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def mouse(self, kind, x, y, button="left"):
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button=button, clickCount=1)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y, "none")
        self.mouse("mousePressed", x, y)
        self.mouse("mouseReleased", x, y)

    def drag(self, start, end, steps=8):
        self.mouse("mouseMoved", start[0], start[1], "none")
        self.mouse("mousePressed", start[0], start[1])
        for step in range(1, steps + 1):
            x = start[0] + (end[0] - start[0]) * step / steps
            y = start[1] + (end[1] - start[1]) * step / steps
            self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y, button="left", buttons=1)
        self.mouse("mouseReleased", end[0], end[1])

    def screenshot(self, path):
        import base64

        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))

    def close(self):
        self.browser.call("Target.closeTarget", {"targetId": self.target})


class Browser:
    """One headless Chromium for the tests of a module; its profile lives in `profile`."""

    def __init__(self, executable, profile):
        self.process = subprocess.Popen(
            [
                executable,
                "--headless=new",
                # As root (CI) Chromium runs only without its sandbox; it opens local files only.
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--user-data-dir=%s" % profile,
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.process.stderr], daemon=True).start()
        url, seen, deadline = None, [], time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            seen.append(line)
            match = re.search(r"DevTools listening on (ws://\S+)", line)
            if match:
                url = match[1]
        if url is None:
            self.process.kill()
            raise DevToolsError("Chromium did not start: " + "".join(seen[-20:]))
        self.socket = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.pending = []

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise DevToolsError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.pending.append(reply)

    def wait_for(self, method, session, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for index, event in enumerate(self.pending):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.pending.pop(index)
            if not self.receive(max(deadline - time.monotonic(), 0.1)):
                break
        raise DevToolsError("no %s within %s s" % (method, timeout))

    def receive(self, timeout):
        """Keeps the next message that arrives within `timeout` s; False when none did."""
        self.socket.settimeout(timeout)
        try:
            self.pending.append(json.loads(self.socket.recv()))
            return True
        except websocket.WebSocketTimeoutException:
            return False
        finally:
            self.socket.settimeout(60)

    def drain(self, quiet=0.3):
        """Keeps every message that arrives until none has for `quiet` s."""
        while self.receive(quiet):
            pass

    def events(self, session):
        """The events of a page so far, those still on their way included."""
        self.drain()
        return [event for event in self.pending if event.get("sessionId") == session]

    def open(self, url, width=1280, height=800, dark=False):
        """A new page showing `url` at width x height, its load awaited."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.target = target
        for domain in ("Page", "Runtime", "Network", "Log"):
            page.call(domain + ".enable")
        page.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        page.call(
            "Emulation.setEmulatedMedia",
            features=[{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}],
        )
        page.call("Page.navigate", url=url)
        page.wait_for("Page.loadEventFired")
        return page

    def close(self):
        try:
            self.socket.close()
        finally:
            self.process.kill()
            self.process.wait(timeout=30)
