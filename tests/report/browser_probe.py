"""Headless Chromium for the sheet tests: dump a page's DOM while every network request the browser makes
is forced through a local recording proxy, so "makes no network request" is observed, not assumed."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for c in CHROMIUM_CANDIDATES:
        path = shutil.which(c)
        if path:
            return path
    return None


class RecordingProxy:
    """Accepts every connection on a loopback port, records the request line, answers 404."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        # After close() is called, keep accepting until the backlog is empty, so a connection the
        # browser opened just before exiting is still recorded.
        while True:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                if self._stop.is_set():
                    return
                continue
            with conn:
                conn.settimeout(5)
                try:
                    head = conn.recv(4096).decode("latin-1")
                except OSError:
                    head = ""
                self.requests.append(head.split("\r\n", 1)[0] or "(connection without request line)")
                with contextlib.suppress(OSError):
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


# Chromium's own service endpoints (component updater, Google account, network time). Debian's build
# contacts some of them on startup even with the flags below, for any page including an empty one; the
# page under test never names them (the tests assert that too), so they cannot be the page's requests.
BROWSER_SERVICE_HOSTS = (
    "update.googleapis.com",
    "accounts.google.com",
    "clients2.google.com",
    "clientservices.googleapis.com",
    "safebrowsing.googleapis.com",
    "optimizationguide-pa.googleapis.com",
    "content-autofill.googleapis.com",
    "redirector.gvt1.com",
    "edgedl.me.gvt1.com",
)


def request_host(request_line: str) -> str:
    """``GET http://h/x HTTP/1.1`` / ``CONNECT h:443 HTTP/1.1`` → ``h``."""
    parts = request_line.split()
    if len(parts) < 2:
        return ""
    target = parts[1]
    if "://" in target:
        target = target.split("://", 1)[1]
    return (
        target.split("/", 1)[0].rsplit(":", 1)[0]
        if ":" in target.split("/", 1)[0]
        else target.split("/", 1)[0]
    )


@dataclass
class PageResult:
    dom: str
    requests: list[str]
    text: str = ""
    tags: list[str] = field(default_factory=list)

    @property
    def page_requests(self) -> list[str]:
        """Requests not made by the browser's own services: i.e. made on behalf of the page."""
        return [r for r in self.requests if request_host(r) not in BROWSER_SERVICE_HOSTS]


class _DomWalker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def load(chromium: str, page: Path, timeout: float = 90) -> PageResult:
    proxy = RecordingProxy()
    profile = tempfile.mkdtemp(prefix="medic-chromium-")
    try:
        proc = subprocess.run(
            [
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
                "--disable-extensions",
                "--disable-default-apps",
                "--disable-domain-reliability",
                "--disable-client-side-phishing-detection",
                "--no-pings",
                "--no-default-browser-check",
                "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,AutofillServerCommunication,Translate,InterestFeedContentSuggestions,SafeBrowsing",
                f"--user-data-dir={profile}",
                f"--proxy-server=http://127.0.0.1:{proxy.port}",
                "--proxy-bypass-list=<-loopback>",
                "--virtual-time-budget=3000",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        proxy.close()
        shutil.rmtree(profile, ignore_errors=True)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-800:]}")
    walker = _DomWalker()
    walker.feed(proc.stdout)
    return PageResult(
        dom=proc.stdout, requests=list(proxy.requests), text="".join(walker.text), tags=walker.tags
    )


def screenshot(chromium: str, page: Path, png: Path, width: int = 1280, height: int = 1600) -> bytes:
    """A PNG of the page as headless Chromium draws it, offline (every request goes to a dead proxy)."""
    profile = tempfile.mkdtemp(prefix="medic-chromium-shot-")
    try:
        proc = subprocess.run(
            [
                chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--disable-extensions", "--hide-scrollbars",
                f"--user-data-dir={profile}", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
                f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri(),
            ],
            capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if proc.returncode != 0 or not png.is_file():
        raise RuntimeError(f"chromium --screenshot exited {proc.returncode}: {proc.stderr[-800:]}")
    return png.read_bytes()
