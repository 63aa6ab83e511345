"""Load a page in the system's headless chromium through Playwright (``executable_path``: no
browser download) and record what a person would see in the devtools console.

Used by the report and history tests to prove a page works opened from disk: console messages
and uncaught exceptions, every request and every failed one, the title, the text, a screenshot.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

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
    console: list[str] = field(default_factory=list)  # "type: text" for every console message
    errors: list[str] = field(default_factory=list)  # error-level console messages and exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    failed: list[str] = field(default_factory=list)  # requests that failed to load
    screenshot: bytes = b""
    title: str = ""
    body_text: str = ""
    images_broken: int = 0  # <img> elements that did not decode


def load_page(
    chromium: str, url: str, *, width: int = 1280, height: int = 2000, timeout: float = 60.0
) -> PageLoad:
    """Open ``url`` in a fresh headless chromium, wait for the load event, collect everything."""
    from playwright.sync_api import sync_playwright

    out = PageLoad()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})

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
        finally:
            browser.close()
    return out
