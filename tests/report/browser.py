"""Load a page in the system's headless chromium through Playwright (``executable_path``: no
browser download) and record what a person would see in the devtools console.

Used by the report and history tests to prove a page works opened from disk: console messages
and uncaught exceptions, every request and every failed one, the title, the text, a screenshot.
``Browser`` keeps one chromium open for many pages (a browser start costs seconds on a 2-core
machine); ``load_page`` opens one page in a browser of its own.

Run as a script it takes the screenshot of a page's top that the examples commit:

    python tests/report/browser.py reports/e2e_3step/3step/index.html top.png [--width 1280] [--height 900]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser")
# No sandbox (containers), no GPU; audio plays without a click, so a test can press play.
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--autoplay-policy=no-user-gesture-required",
]


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
    console: list[str] = field(default_factory=list)  # "type: text" for every console message
    errors: list[str] = field(default_factory=list)  # error-level console messages and exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    failed: list[str] = field(default_factory=list)  # requests that failed to load
    screenshot: bytes = b""
    title: str = ""
    body_text: str = ""
    images_broken: int = 0  # <img> elements that did not decode
    page: Any = None  # the open Playwright page (Browser.open only), for a test to act on


class Browser:
    """One headless chromium for several pages: ``with Browser(path) as b: load = b.open(url)``."""

    def __init__(self, chromium: str):
        self.chromium = chromium
        self.pw = self.browser = None

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        self.pw = sync_playwright().start()
        self.browser = self.pw.chromium.launch(executable_path=self.chromium, args=LAUNCH_ARGS)
        return self

    def __exit__(self, *exc) -> None:
        if self.browser is not None:
            self.browser.close()
        if self.pw is not None:
            self.pw.stop()

    def open(self, url: str, *, width: int = 1280, height: int = 2000, timeout: float = 60.0) -> PageLoad:
        """Open ``url`` in a fresh page, wait for the load event, collect everything; the page stays open
        (``PageLoad.page``) until the browser closes."""
        out = PageLoad()
        page = self.browser.new_page(viewport={"width": width, "height": height})

        def on_console(msg) -> None:
            out.console.append(f"{msg.type}: {msg.text}")
            if msg.type in ("error", "assert"):
                out.errors.append(f"console.{msg.type}: {msg.text} {msg.location.get('url', '')}".strip())

        def on_error(exc) -> None:
            out.console.append(f"exception: {exc}")
            out.errors.append(f"uncaught: {exc}")

        page.on("console", on_console)
        page.on("pageerror", on_error)
        page.on("request", lambda r: out.requests.append(r.url))
        page.on("requestfailed", lambda r: out.failed.append(f"{r.failure} ({r.url})"))
        page.goto(url, wait_until="load", timeout=timeout * 1000)
        out.title = page.title()
        out.body_text = page.inner_text("body")
        out.images_broken = page.evaluate(
            "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).length"
        )
        out.screenshot = page.screenshot(full_page=False)
        out.page = page
        return out


def load_page(
    chromium: str, url: str, *, width: int = 1280, height: int = 2000, timeout: float = 60.0
) -> PageLoad:
    """Open ``url`` in a fresh headless chromium, wait for the load event, collect everything."""
    with Browser(chromium) as b:
        out = b.open(url, width=width, height=height, timeout=timeout)
        out.page = None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Screenshot of the top of a page (what a reviewer sees first).")
    ap.add_argument("page", type=Path)
    ap.add_argument("png", type=Path)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        print("error: chromium not found (set HARNESS_CHROMIUM)", file=sys.stderr)
        return 2
    if not args.page.is_file():
        print(f"error: {args.page}: no such page", file=sys.stderr)
        return 2
    load = load_page(chromium, args.page.resolve().as_uri(), width=args.width, height=args.height)
    args.png.write_bytes(load.screenshot)
    for problem in load.errors + load.failed:
        print(f"page: {problem}", file=sys.stderr)
    print(f"{args.png}: {args.width}x{args.height}")
    return 1 if load.errors or load.failed else 0


if __name__ == "__main__":
    sys.exit(main())
