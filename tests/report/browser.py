"""Load a page in the system's headless chromium through Playwright (``executable_path``: no
browser download) and record what a person would see in the devtools console.

Used by the report and history tests to prove a page works opened from disk: console messages
and uncaught exceptions, every request and every failed one, the title, the text, a screenshot.
``Browser`` keeps one chromium open for many pages (a browser start costs seconds on a 2-core
machine); ``load_page`` opens one page in a browser of its own.

Run as a script it takes the screenshot of a page's top that the examples commit:

    python tests/report/browser.py reports/e2e_3step/3step/index.html top.png [--width 1280] [--height 900]

or of one element of the page opened at a fragment, e.g. the frame compare control at the worst
frame by PSNR of the run it shows (page.js reads ``#compare?run=...&frame=...&mode=...``); a
``.jpg`` name is written as JPEG (``--quality``), anything else as PNG (``--colours 256``: a palette
PNG, a third of the size and sharper text than a JPEG of it):

    python tests/report/browser.py index.html compare.jpg --fragment 'compare?frame=worst-psnr' \\
        --element '.compare.linked'
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


def screenshot(
    page: Any, out: Path, element: str | None = None, quality: int = 80, colours: int | None = None
) -> bytes:
    """The page's viewport (or the first element matching the CSS selector ``element``) as the image
    ``out`` names: JPEG for .jpg/.jpeg (``quality``), else PNG (of at most ``colours`` colours)."""
    jpeg = out.suffix.lower() in (".jpg", ".jpeg")
    kind = {"type": "jpeg", "quality": quality} if jpeg else {"type": "png"}
    shot = (
        page.locator(element).first.screenshot(**kind)
        if element
        else page.screenshot(full_page=False, **kind)
    )
    if jpeg or not colours:
        return shot
    import io

    from PIL import Image

    with Image.open(io.BytesIO(shot)) as im:
        fewer = im.convert("RGB").quantize(colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    fewer.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Screenshot of the top of a page (what a reviewer sees first).")
    ap.add_argument("page", type=Path)
    ap.add_argument("png", type=Path, help="the image to write (.jpg: JPEG, else PNG)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument(
        "--fragment", default="", help="opened at this fragment (no '#'), e.g. 'compare?frame=worst-psnr'"
    )
    ap.add_argument("--element", default=None, help="a CSS selector: that element alone, e.g. '.compare'")
    ap.add_argument("--quality", type=int, default=80, help="JPEG quality")
    ap.add_argument(
        "--colours", type=int, default=None, help="a PNG of at most this many colours (a palette)"
    )
    args = ap.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        print("error: chromium not found (set HARNESS_CHROMIUM)", file=sys.stderr)
        return 2
    if not args.page.is_file():
        print(f"error: {args.page}: no such page", file=sys.stderr)
        return 2
    url = args.page.resolve().as_uri() + (f"#{args.fragment}" if args.fragment else "")
    with Browser(chromium) as b:
        load = b.open(url, width=args.width, height=args.height)
        args.png.write_bytes(screenshot(load.page, args.png, args.element, args.quality, args.colours))
    for problem in load.errors + load.failed:
        print(f"page: {problem}", file=sys.stderr)
    print(f"{args.png}: {args.element or 'the top'} at {args.width}x{args.height}")
    return 1 if load.errors or load.failed else 0


if __name__ == "__main__":
    sys.exit(main())
