"""The report's one HTML file: the payload as JSON, the page's script and style, and Plotly, all inline.

Nothing is fetched: a Content-Security-Policy forbids every request (scripts and styles run only from
the page itself; images only from data: and blob: URLs, which Plotly's "download as PNG" makes), so the
page works offline and cannot call out even if something in it tried.

Trace text is user data. The payload goes in as `<script type="application/json">`, where `<`, `>` and `&`
are written as \\u003c, \\u003e and \\u0026 (JSON.parse reads them back; no `</script>` or `<!--` can occur);
the page's script puts every name into the document with textContent, and escapes names it hands to Plotly
(whose labels are a small HTML dialect). The title, the only text written into the HTML itself, is escaped.
"""

from __future__ import annotations

import html
import re
from functools import cache
from importlib import resources

from ..render.escape import log_commands_neutral
from ..text import dumps, printable

ASSETS = "assets"
PLOTLY = "plotly-cartesian.min.js"
# No request of any kind; Plotly's toImage draws through blob: and data: images.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
       "connect-src 'none'; base-uri 'none'; form-action 'none'")


@cache
def asset(name: str) -> str:
    return resources.files(__package__).joinpath(ASSETS, name).read_text(encoding="utf-8")


_SCRIPT_END = re.compile(r"<(/script|!--)", re.IGNORECASE)


def inline_script(code: str) -> str:
    """JavaScript made safe inside <script>: `</script` and `<!--` cannot occur in it (`<\\/script`, `<\\!--`
    mean the same inside a JavaScript string or regular expression, where they can occur at all)."""
    return _SCRIPT_END.sub(lambda m: "<\\" + m.group(1), code)


def json_for_script(payload: dict) -> str:
    """The payload as JSON that no HTML parser can end early: <, > and & escaped as JSON's \\u escapes."""
    data = dumps(payload, indent=False).decode("utf-8")
    # "##[" is a CI log command (render.escape.ci_safe), should the page ever be printed to a job's log.
    return log_commands_neutral(data.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))


def _title(payload: dict) -> str:
    """The page's title: the inputs' names, printable and with the secrets of URLs hidden (as the
    payload's strings are, by dumps)."""
    title = payload.get("title", "spanfix report")
    return printable(title) if isinstance(title, str) else "spanfix report"


def render_html(payload: dict, script: str = "report.js", plotly: bool = True) -> bytes:
    """The page: the payload, Plotly (unless plotly is False: compare's page draws its own SVG), what both
    pages build with (assets/page.js) and the page's own script (one of assets/: the report's, or
    compare's)."""
    page = "".join([
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<meta name=\"generator\" content=\"spanfix {html.escape(str(payload.get('version', '')))}\">\n",
        f"<title>{html.escape(_title(payload)).replace('[', '&#91;')}</title>\n",
        f"<style>\n{asset('report.css')}</style>\n</head>\n<body>\n",
        ("<noscript><p class=\"noscript\">This report draws its tables and charts with JavaScript: "
         "open it in a browser with scripts allowed.</p></noscript>\n"),
        "<main id=\"report\"></main>\n",
        f"<script type=\"application/json\" id=\"spanfix-data\">{json_for_script(payload)}</script>\n",
        f"<script>\n{inline_script(asset(PLOTLY))}\n</script>\n" if plotly else "",
        f"<script>\n{inline_script(asset('page.js'))}{inline_script(asset(script))}</script>\n",
        "</body>\n</html>\n",
    ])
    return page.encode("utf-8", "backslashreplace")  # a file name that is not UTF-8, in the title
