"""How numbers read in the report, and the Jinja2 environment that renders it. The formats are
plain functions shared by the section builders, the chart axes and the template (as filters);
the environment autoescapes every value, so a string from the logs reaches the page as text.
"""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path

import jinja2
import markupsafe

TEMPLATES = Path(__file__).parent.parent / "templates"


def cut(text: str, limit: int) -> str:
    """The first `limit` code points of `text`, or fewer: never ending inside what a reader
    sees as one character (a letter and its combining marks, a flag's two regional
    indicators, emoji joined by a zero-width joiner or given a modifier)."""
    end = min(max(limit, 0), len(text))
    while 0 < end < len(text) and _continues(text, end):
        end -= 1
    return text[:end]


def _continues(text: str, i: int) -> bool:
    """Whether text[i] belongs to the character that text[i - 1] is part of."""
    ch, before = text[i], text[i - 1]
    if unicodedata.category(ch) in ("Mn", "Mc", "Me") or before == "\u200d":
        return True
    if ch == "\u200d" or "\ufe00" <= ch <= "\ufe0f" or "\U0001f3fb" <= ch <= "\U0001f3ff" \
            or "\U000e0020" <= ch <= "\U000e007f":
        return True
    if _regional(ch) and _regional(before):
        run = 0   # regional indicators pair up from the start of their run
        while i - run - 1 >= 0 and _regional(text[i - run - 1]):
            run += 1
        return run % 2 == 1
    return False


def _regional(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"


def f3(x) -> str:
    """Three decimals; an em dash for a value that is missing or NaN."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def f2(x) -> str:
    return f"{x:.2f}"


def interval(low, high) -> str:
    if low is None or high is None:
        return "—"
    return f"[{f3(low)}, {f3(high)}]"


def count(n) -> str:
    return "—" if n is None else f"{n:,}"


def compact(x: float) -> str:
    """Three significant digits with a k/M/G suffix, for axis ticks of large counts."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.3g}{suffix}"
    return f"{x:.3g}"


# Characters that change how the text around them reads without being seen: bidirectional
# controls (a right-to-left override in a tag value turned the dates and counts after it
# around) and invisible ones (a zero-width space hid inside a slice name).
INVISIBLE = dict.fromkeys([0x061C, 0x200B, 0x200E, 0x200F, *range(0x202A, 0x202F),
                           0x2060, *range(0x2066, 0x206A), 0xFEFF])
SHOWN = {code: f"\\u{code:04x}" for code in INVISIBLE}
ZWJ = "\u200d"   # joins emoji sequences: kept


def visible(value):
    """Every value the template writes, with the characters a reader would not see or that
    turn the text around them written as their codes (`\\u202e`): in a plain string as the
    CLI writes them (pipeline.alerts.printable) but the emoji joiner; in markup (a chart, a
    caption the template built) the characters of INVISIBLE only, its line breaks being
    layout."""
    if not isinstance(value, str) or value.isprintable():
        return value
    if isinstance(value, markupsafe.Markup):
        shown = value.translate(SHOWN)
        return value if shown == value else markupsafe.Markup(shown)
    from pipeline.alerts import printable

    return ZWJ.join(printable(part) for part in value.split(ZWJ))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # the template is .j2, which select_autoescape would not match
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=visible,
    )
    env.filters.update(f3=f3, interval=interval, count=count)
    return env
