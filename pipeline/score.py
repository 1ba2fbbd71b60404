"""Score: context recall per request, one UTC day window at a time.

Each window is replaced in one transaction (delete its rows, insert the new ones, and drop the
window metrics derived from the old ones), so scoring a window twice changes nothing once it is
aggregated again, and scoring one day never touches another. Consecutive windows
are scored together, in one transaction per batch of up to BATCH_REQUESTS requests: one large
statement uses both cores far better than many small ones, and a batch is still replaced whole
or not at all. The chunk-ID route is sql/score_ids.sql; this module picks the gold-set version
and the windows, and records the settings the aggregation needs (cutoffs, pass mark)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pipeline.errors import RecallwatchError
from pipeline.warehouse import run_script, sql, transaction

DEFAULT_CUTOFFS = (1, 3, 5, 10, 20, 50, 100)
DEFAULT_PASS_MARK = 0.7
ROUTES = ("ids",)
BATCH_REQUESTS = 5_000_000
MAX_CUTOFF = 1_000_000

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ScoreSummary:
    gold_version: str
    cutoffs: tuple[int, ...]
    windows: tuple[tuple[datetime, datetime], ...]
    by_status: dict[str, int]
    joined: dict[str, int]   # requests that found their golden by_gold_id / by_query / unmatched


def parse_cutoffs(text: str) -> tuple[int, ...]:
    """'1,3,5' -> (1, 3, 5): positive integers, sorted, duplicates dropped."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise RecallwatchError(
            f"--cutoffs {text!r} must be comma-separated positive integers, e.g. 1,3,5,10."
        ) from None
    if not values or values[0] < 1 or values[-1] > MAX_CUTOFF:
        raise RecallwatchError(
            f"--cutoffs {text!r} must be integers from 1 to {MAX_CUTOFF}, e.g. 1,3,5,10.")
    return tuple(values)


def latest_gold_version(con) -> str:
    rows = con.execute(
        "SELECT gold_version FROM gold_versions ORDER BY seq DESC LIMIT 1").fetchall()
    if not rows:
        raise RecallwatchError(
            "no gold set is loaded: run `recallwatch ingest gold PATH --version V` first."
        )
    return rows[0][0]


def day_windows(con, start: datetime | None, end: datetime | None,
                route: str = "ids") -> list[tuple[datetime, datetime]]:
    """UTC day windows covering [start, end); a partial day at either end is clipped to the
    given bounds, and a day without requests is a window too (its stale scores go). Without
    bounds: every day that has requests or scores (so a day whose requests were all removed is
    cleared); with one bound, those days on that side of it."""
    if start is not None and end is not None and end <= start:
        raise RecallwatchError(f"the window is empty: --end {end} is not after --start {start}.")
    if start is None or end is None:
        days = [row[0] for row in con.execute(
            sql("days_with_data"), {"start": start, "end": end, "route": route}).fetchall()]
        one_day = timedelta(days=1)
        return [(max(day, start) if start else day,
                 min(day + one_day, end) if end else day + one_day) for day in days]
    windows = []
    cursor = start
    while cursor < end:
        next_day = datetime.combine(cursor.date(), datetime.min.time()) + timedelta(days=1)
        windows.append((cursor, min(next_day, end)))
        cursor = next_day
    return windows


def batches(con, windows: list[tuple[datetime, datetime]],
            batch_requests: int) -> list[list[tuple[datetime, datetime]]]:
    """Group consecutive windows so that each group holds at most batch_requests requests
    (a single window larger than that is a group of its own)."""
    if not windows:
        return []
    counts = dict(con.execute(
        "SELECT date_trunc('day', timestamp) AS day, count(*) FROM requests "
        "WHERE timestamp >= $start AND timestamp < $end GROUP BY day",
        {"start": windows[0][0], "end": windows[-1][1]}).fetchall())
    groups: list[list[tuple[datetime, datetime]]] = []
    size = 0
    for window in windows:
        n = counts.get(datetime.combine(window[0].date(), datetime.min.time()), 0)
        if groups and size + n <= batch_requests:
            groups[-1].append(window)
            size += n
        else:
            groups.append([window])
            size = n
    return groups


def current_cutoffs(con, cutoffs: tuple[int, ...] | None) -> tuple[int, ...]:
    """The given cutoffs, else those of the last score run, else the defaults."""
    if cutoffs is not None:
        return tuple(cutoffs)
    stored = setting(con, "cutoffs", "")
    return tuple(int(c) for c in stored.split(",")) if stored else DEFAULT_CUTOFFS


def current_pass_mark(con, pass_mark: float | None) -> float:
    """The given pass mark, else the last one used, else the default."""
    if pass_mark is not None:
        return pass_mark
    return float(setting(con, "pass_mark", str(DEFAULT_PASS_MARK)))


def manifest_fingerprint(con) -> str:
    """Which manifest content each index version holds: miss causes depend on it."""
    return con.execute(
        "SELECT coalesce(string_agg(version || ':' || content_hash, ',' ORDER BY version), '') "
        "FROM ingest_files WHERE kind = 'index'").fetchall()[0][0]


def save_settings(con, **values) -> None:
    for name, value in values.items():
        con.execute("DELETE FROM settings WHERE name = $name", {"name": name})
        con.execute("INSERT INTO settings VALUES ($name, $value)",
                    {"name": name, "value": str(value)})


def setting(con, name: str, default: str) -> str:
    rows = con.execute("SELECT value FROM settings WHERE name = $name", {"name": name}).fetchall()
    return rows[0][0] if rows else default


def score(con, *, start: datetime | None = None, end: datetime | None = None,
          cutoffs: tuple[int, ...] | None = None, pass_mark: float | None = None,
          gold_version: str | None = None, route: str = "ids",
          batch_requests: int = BATCH_REQUESTS,
          progress: Progress | None = None) -> ScoreSummary:
    """Score every request in [start, end) (every window with data when not given). Cutoffs
    and pass mark default to those of the last run (initially DEFAULT_CUTOFFS and 0.7)."""
    if route not in ROUTES:
        raise RecallwatchError(f"route {route!r} is not available; choose one of {ROUTES}.")
    # unless given, the settings of the last run hold, so every day is scored alike
    cutoffs = current_cutoffs(con, cutoffs)
    pass_mark = current_pass_mark(con, pass_mark)
    if not 0.0 <= pass_mark <= 1.0:
        raise RecallwatchError(f"--pass-mark {pass_mark} must lie in [0, 1].")
    windows = day_windows(con, start, end, route)
    gold_version = gold_version or latest_gold_version(con)
    known = con.execute("SELECT 1 FROM gold_versions WHERE gold_version = $v",
                        {"v": gold_version}).fetchall()
    if not known:
        raise RecallwatchError(f"gold version {gold_version!r} is not loaded.")
    config = {"route": route, "gold": gold_version, "cutoffs": ",".join(map(str, cutoffs)),
              "manifests": manifest_fingerprint(con)}
    # Given cutoffs and pass mark are in force from now on (saved with the first batch, or
    # alone when there is nothing to score); days scored otherwise are out of date and `run`
    # rescores them (see score_windows).
    groups = batches(con, windows, batch_requests)
    if not groups:
        with transaction(con):
            save_settings(con, cutoffs=config["cutoffs"], pass_mark=pass_mark)
    done = 0
    for batch in groups:
        if progress:
            progress(f"score {batch[0][0]:%Y-%m-%d}..{batch[-1][1]:%Y-%m-%d}", done,
                     len(windows))
        with transaction(con):
            save_settings(con, cutoffs=config["cutoffs"], pass_mark=pass_mark)
            run_script(con, f"score_{route}", {
                "start": batch[0][0], "end": batch[-1][1], "gold_version": gold_version,
                "cutoffs": list(cutoffs)})
            run_script(con, "record_score_windows", {
                **config, "windows": [{"start": a, "end": b} for a, b in batch]})
        done += len(batch)
    if progress:
        progress("score", len(windows), len(windows))
    by_status, joined = {}, {}
    if windows:
        span = {"route": route, "start": windows[0][0], "end": windows[-1][1]}
        by_status = dict(con.execute(
            "SELECT status, count(*) FROM request_scores WHERE route = $route "
            "AND timestamp >= $start AND timestamp < $end GROUP BY status ORDER BY status",
            span).fetchall())
        cursor = con.execute(sql("gold_join_counts"), span)
        names = [d[0] for d in cursor.description]
        joined = dict(zip(names, cursor.fetchall()[0], strict=True))
    return ScoreSummary(gold_version, cutoffs, tuple(windows), by_status, joined)
