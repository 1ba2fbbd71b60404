"""Self-contained HTML report of context recall for one route, cutoff k and gold-set version.

`write_report` settles the scope (`scope`), reads the scored warehouse section by section
(`sections`, over the named queries of sql/report_*.sql), and writes one offline HTML file:
header counts, daily mean recall with its interval and the index size, the recall@k curve, pass
and full-coverage rates, miss causes, the worst goldens and the latest day per slice. Charts are
inline SVG computed from numbers (`charts`); every string from the warehouse reaches the page
through Jinja2 autoescaping, never marked safe, so a logged query cannot become markup. Every
figure carries a caption with its k, route, gold-set version and n.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from pipeline.atomic import written_whole
from pipeline.errors import RecallwatchError
from pipeline.report.charts import FC_COLOR, MEAN_COLOR, PASS_COLOR, SIZE_COLOR
from pipeline.report.formats import environment
from pipeline.report.reads import prepare
from pipeline.report.scope import Scope, ScopeChoice, default_gold_version, default_k, resolve_scope
from pipeline.report.sections import build_sections
from pipeline.report.summary import index_version_summary

__all__ = [
    "Scope", "ScopeChoice", "default_gold_version", "default_k", "index_version_summary",
    "check_report_dir", "resolve_scope", "write_report",
]


def check_report_dir(out_dir: str | os.PathLike) -> None:
    """Refuse an --out directory the report could not be written to, before the work that
    leads to it: a file in its place or on its path, or a directory this user cannot write."""
    target = Path(out_dir)
    existing = next(p for p in (target, *target.parents) if p.exists() or p == p.parent)
    problem = ("File exists" if not existing.is_dir()
               else "Permission denied" if not os.access(existing, os.W_OK | os.X_OK) else None)
    if problem:
        raise RecallwatchError(f"cannot write the report to {out_dir} ({problem}); choose "
                               "another --out directory.")


def _hourly_only(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether window_metrics holds hourly windows and no daily ones (`aggregate --window
    hour` alone): the report reads daily windows, so it says why its sections are empty."""
    ((day, other),) = con.execute(
        "SELECT coalesce(bool_or(grain = 'day'), false), coalesce(bool_or(grain <> 'day'), "
        "false) FROM window_metrics").fetchall()
    return other and not day


def write_report(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    *,
    route: str | None = None,
    k: int | None = None,
    gold_version: str | None = None,
    title: str = "recallwatch report",
) -> Path:
    """Write `out_dir/report.html` for one route, cutoff k and gold-set version; return its path.

    Defaults: the first route in force; the gold set with the highest `seq` in gold_versions
    (else the most common in window_metrics); k = the most common served k of scored requests
    if window_metrics has it, else the largest window_metrics k below it, else the smallest.
    With nothing scored the report still gets written and says so.
    """
    prepare(con)
    scope, gold_choice, k_choice = resolve_scope(con, route=route, k=k, gold_version=gold_version)
    html = environment().get_template("report.html.j2").render(
        title=title,
        scope=scope,
        gold_choice=gold_choice,
        k_choice=k_choice,
        colors={"mean": MEAN_COLOR, "size": SIZE_COLOR, "pass": PASS_COLOR, "fc": FC_COLOR},
        hourly_only=_hourly_only(con),
        **build_sections(con, scope),
    )

    out_dir = Path(out_dir)
    path = out_dir / "report.html"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        # a reader (or a scheduled mail) never sees half a report; two reports written at once
        # (readers may share the warehouse) never write into each other's; 0644: a web
        # server reads it
        with written_whole(path, 0o644) as written:
            written.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise RecallwatchError(
            f"cannot write the report to {out_dir} ({exc.strerror or exc}); choose another "
            "--out directory.") from None
    return path
