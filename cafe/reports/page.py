"""The one HTML page shell (web/page.html) both pages use: the run report and the leaderboard.

Every value a page shows that cafe did not write itself is escaped by the caller (html.escape,
or JSON made safe for <script> by cafe.reports.html.script_json); the Content-Security-Policy
lets only the page's own script run, named by its sha256 (no 'unsafe-inline' for scripts, so
an injected <script> or inline handler such as onerror= is refused by the browser too)."""

from __future__ import annotations

import base64
import hashlib
import string
from pathlib import Path

WEB = Path(__file__).with_name("web")


def script_hash(js: str) -> str:
    """The CSP source naming exactly this inline script."""
    digest = hashlib.sha256(js.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


def render_page(*, title: str, subtitle: str, nav: str, body: str, data: str, js: str) -> str:
    """The page: ``title`` is plain text (escaped here); ``subtitle``, ``nav`` and ``body`` are
    HTML the caller escaped; ``data`` is script-safe JSON; ``js`` is one of web/*.js."""
    import html

    return string.Template((WEB / "page.html").read_text(encoding="utf-8")).substitute(
        title=html.escape(title, quote=True),
        subtitle=subtitle,
        css=(WEB / "report.css").read_text(encoding="utf-8"),
        nav=nav,
        body=body,
        data=data,
        js=js,
        script_src=script_hash(js),
    )
