"""How long Chromium takes to render a `spanfix report` file: from navigation start to every chart drawn.

    python bench/render_report.py report.html [--loads 5]

Each load is a fresh page of one headless Chromium (Debian's `chromium`, driven by Playwright); the page
marks the moment its last chart is drawn (window.spanfix.drawnAt, performance.now() from navigation start).
Prints each load's time and the median; bench/run.py calls render_seconds() for its report row.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def render_seconds(report: Path, loads: int = 3) -> list[float] | None:
    """Seconds from navigation start to the charts drawn, per load; None without Chromium or Playwright."""
    executable = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if executable is None:
        return None
    times = []
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(profile, executable_path=executable, args=ARGS,
                                                                headless=True, viewport={"width": 1400, "height": 900})
        for _ in range(loads):
            page = context.new_page()
            page.goto(report.resolve().as_uri())
            page.wait_for_function("window.spanfix && (window.spanfix.drawn || window.spanfix.error)", timeout=120_000)
            if page.evaluate("window.spanfix.error"):
                raise SystemExit(f"render: the page failed: {page.evaluate('window.spanfix.error')}")
            times.append(page.evaluate("window.spanfix.drawnAt") / 1000)
            page.close()
        context.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    times = render_seconds(args.report, args.loads)
    if times is None:
        sys.exit("render: needs Chromium (apt-get install chromium) and Playwright (pip install playwright)")
    print(f"{args.report}: {args.report.stat().st_size / 1e6:.2f} MB; rendered in "
          + ", ".join(f"{t:.2f}" for t in times) + f" s; median {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
