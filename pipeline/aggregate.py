"""Aggregate: per window x slice x route x cutoff k x gold version, the mean recall with its
interval, the pass rate and the full-coverage rate with theirs (`window_metrics`).

SQL reduces each group to sufficient statistics (sql/window_metrics.sql); pipeline/stats.py
turns them into intervals: for mean recall the t-interval of the recalls with a 0 and a 1
added (too narrow without them on small windows of skewed recalls), Wilson for the pass and
full-coverage proportions, or, when any request of the group belongs to a session, the
cluster-robust t-interval over sessions of the same sample and Wilson on the
design-effect-adjusted effective n
(`ci_method`, `rate_ci_method` say which). A group whose every recall is 0 or 1 (one gold
chunk per golden, say) has a proportion for its mean: it gets the full-coverage rate's
interval. A window range is replaced in one transaction; its statistics are gathered a few
whole days at a time, as many as the memory limit holds (no window spans two days, and the
cluster sums hold an entry per session, slice and cutoff while they are added up)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa

from pipeline import state
from pipeline.config import DEFAULT_ALPHA, GRAINS, Config, given_or_resolved
from pipeline.errors import RecallwatchError
from pipeline.progress import Progress
from pipeline.stats import (
    Interval,
    all_binary,
    bias_reduced_t_interval,
    clip_unit,
    cluster_wilson_interval,
    no_spread,
    wilson_interval,
)
from pipeline.warehouse import run_script, sql, transaction, unordered

# Memory one request takes while its window's statistics are gathered (with 3 slices and 7
# cutoffs; measured under a 300MB limit): a batch holds as many requests as the memory limit
# allows, so at the default limit 1M requests are one batch. More batches cost time, since each
# reads every request's cutoff counts (recall_at_k) again.
REQUEST_BYTES = 1500


@dataclass(frozen=True)
class AggregateSummary:
    grain: str
    start: datetime | None
    end: datetime | None
    rows: int


def aggregate(con, config: Config | None = None, *, grain: str = "day",
              start: datetime | None = None, end: datetime | None = None,
              batch_requests: int | None = None, progress: Progress | None = None,
              **settings) -> AggregateSummary:
    """Recompute window_metrics for the windows of `grain` in [start, end) (widened to whole
    windows; every window with requests or metrics when not given), for every route, with the
    pass mark and cutoffs of `config` (default: the settings in force, overridden by
    `settings` such as pass_mark=; nothing is put in force).

    Replaces those windows' rows in one transaction. Idempotent: aggregating the same windows
    again over the same scores changes nothing. `batch_requests` (default: what the memory limit
    holds, REQUEST_BYTES each) bounds the requests gathered at once; whole days go together."""
    config = given_or_resolved(con, config, settings)
    if grain not in GRAINS:
        raise RecallwatchError(f"--window {grain!r} must be one of {', '.join(GRAINS)}.")
    start, end = state.aggregate_span(con, grain, start, end)
    if start is None:
        return AggregateSummary(grain, None, None, 0)
    if progress:
        progress(f"aggregate by {grain}", 0, 2)
    _refuse_part_scored(con, config, start, end)
    params = {"start": start, "end": end, "grain": grain}
    days = [(max(day, start), min(day + state.ONE_DAY, end)) for day in state.days_of(start, end)]
    with unordered(con), transaction(con):
        stats = pa.concat_tables([
            run_script(con, "window_metrics", {
                "start": batch[0][0], "end": batch[-1][1], "grain": grain,
                "pass_mark": config.pass_mark, "cutoffs": list(config.cutoffs)}, as_arrow=True)
            for batch in state.batches(con, days, batch_requests or _batch_requests(con))])
        if progress:
            progress(f"aggregate by {grain}", 1, 2)
        table = _with_intervals(stats, grain, config.pass_mark, DEFAULT_ALPHA)
        # windows are keyed by their start: a range's windows are replaced whole
        con.execute("DELETE FROM window_metrics WHERE grain = $grain AND window_start >= $start "
                    "AND window_start < $end", params)
        con.register("metrics_batch", table)
        con.execute("INSERT INTO window_metrics BY NAME SELECT * FROM metrics_batch")
        con.unregister("metrics_batch")
        con.execute("DELETE FROM window_sums WHERE grain = $grain AND window_start >= $start "
                    "AND window_start < $end", params)
        con.register("sums_batch", _sums(stats, grain))
        con.execute("INSERT INTO window_sums BY NAME SELECT * FROM sums_batch")
        con.unregister("sums_batch")
        state.invalidate(con, "aggregate", state.days_of(start, end))
    if progress:
        progress(f"aggregate by {grain}", 2, 2)
    return AggregateSummary(grain, start, end, table.num_rows)


def _refuse_part_scored(con, config: Config, start: datetime, end: datetime) -> None:
    """One error naming the first day of [start, end) (whole windows) scored only in part on a
    route in force within it (score with bounds inside a day, or requests logged or moved
    since it was scored): its window would count the scored part alone."""
    found = con.execute(sql("part_scored_days"), {
        "start": start, "end": end, "routes": list(config.routes)}).fetchall()
    if found:
        route, day, requests, unscored, _stray = found[0]
        first, after = day.date(), (day + state.ONE_DAY).date()
        more = f" ({len(found) - 1} more day(s) too)" if len(found) > 1 else ""
        what = (f"{unscored} of its {requests} requests have no score" if unscored else
                "its scores hold requests no longer logged on it")
        raise RecallwatchError(
            f"{first} is scored only in part on route {route}: {what}{more}, so its window "
            "would count the scores it holds as the whole day; score the whole day first "
            f"(`recallwatch score --start {first} --end {after}`), or `recallwatch run`, "
            "which does.")


def _batch_requests(con) -> int:
    """How many requests the memory limit in force holds at once (REQUEST_BYTES each)."""
    limit = con.execute(
        "SELECT parse_formatted_bytes(current_setting('memory_limit'))").fetchall()[0][0]
    return max(1, limit // REQUEST_BYTES)


# window_sums column <- the column of sql/window_metrics.sql's result it keeps
_SUMS = {
    "n": "n", "n_clusters": "n_clusters", "any_session": "any_session", "max_size": "max_size",
    "recall_sum": "recall_sum", "recall_cluster_sq": "sum_cluster_sq",
    "recall_cluster_cross": "sum_cluster_cross", "size_sq": "sum_size_sq",
    "pass_sum": "n_pass", "pass_cluster_sq": "pass_cluster_sq",
    "pass_cluster_cross": "pass_cluster_cross", "full_sum": "n_full",
    "full_cluster_sq": "full_cluster_sq", "full_cluster_cross": "full_cluster_cross",
    "cr2_size_sq": "cr2_size_sq",
}


def _sums(stats: pa.Table, grain: str) -> pa.Table:
    """window_sums rows: the sufficient statistics the drift step pools and tests."""
    columns = {
        "window_start": stats.column("window_start"),
        "grain": pa.array([grain] * stats.num_rows, pa.string()),
        **{key: stats.column(key)
           for key in ("slice", "route", "k", "gold_version", "version_counts", "size_hist")},
    }
    for target, source in _SUMS.items():
        column = stats.column(source)
        columns[target] = column if target in ("n", "n_clusters", "any_session", "max_size") else \
            pa.array(np.nan_to_num(column.to_numpy(zero_copy_only=False).astype(float)),
                     pa.float64())
    return pa.table(columns)


def _rate_interval(col: dict, indicator: str, use_cluster: np.ndarray, alpha: float):
    """Wilson for the pass or full-coverage rate; on the design-effect-adjusted effective n
    where the group has sessions (their indicators are correlated)."""
    n = col["n"].astype(float)
    successes = col[f"n_{indicator}"].astype(float)
    plain = wilson_interval(successes, n, alpha)
    clustered = cluster_wilson_interval(
        n, col["n_clusters"].astype(float), successes,
        col[f"{indicator}_cluster_sq"].astype(float),
        col[f"{indicator}_cluster_cross"].astype(float), col["sum_size_sq"].astype(float),
        alpha, cr2=(col[f"cr2_{indicator}_cluster_sq"].astype(float),
                    col[f"cr2_{indicator}_cluster_cross"].astype(float),
                    col["cr2_size_sq"].astype(float), col["cr2_size_b2"].astype(float),
                    col["max_size"].astype(float)))
    return Interval(np.where(use_cluster, clustered.low, plain.low),
                    np.where(use_cluster, clustered.high, plain.high))


def _with_intervals(stats: pa.Table, grain: str, pass_mark: float, alpha: float) -> pa.Table:
    """window_metrics rows from the sufficient statistics of each group."""
    # the numeric columns alone: a list or text column made a Python object per row (with
    # 100,000 slices a day, 1.3 GB more held at once for columns no interval reads)
    col = {name: stats.column(name).to_numpy(zero_copy_only=False)
           for name in stats.column_names
           if not (pa.types.is_nested(stats.schema.field(name).type)
                   or pa.types.is_string(stats.schema.field(name).type)
                   or pa.types.is_large_string(stats.schema.field(name).type))}
    n = col["n"].astype(float)
    mean = col["mean_recall"].astype(float)
    n_or_nan = np.where(n > 0, n, np.nan)  # rates of an all-excluded window are undefined
    # requests without a session are clusters of one, so the cluster sums serve both forms
    # (CR2 with Bell-McCaffrey degrees of freedom where a session holds more than one request:
    # CR1 with G - 1 badly undercovered a window one session dominates)
    spread = clip_unit(bias_reduced_t_interval(
        n, col["n_clusters"].astype(float), col["recall_sum"].astype(float),
        col["sum_cluster_sq"].astype(float), col["sum_cluster_cross"].astype(float),
        col["sum_size_sq"].astype(float), *(col[f"cr2_{name}"].astype(float) for name in (
            "cluster_sq", "cluster_cross", "size_sq", "size_b2")),
        col["max_size"].astype(float), alpha))
    use_cluster = col["any_session"].astype(bool)
    passes = _rate_interval(col, "pass", use_cluster, alpha)
    full = _rate_interval(col, "full", use_cluster, alpha)
    # every recall 0 or 1: the mean is the full-coverage rate, and gets its interval; recalls
    # with no spread (all equal) get a proportion's interval at their mean
    binary = np.asarray(all_binary(n, col["recall_sum"].astype(float),
                                   col["n_full"].astype(float)), dtype=bool)
    recall_sums = (col["recall_sum"].astype(float), col["sum_cluster_sq"].astype(float),
                   col["sum_cluster_cross"].astype(float), col["sum_size_sq"].astype(float))
    flat = ~binary & np.asarray(no_spread(n, *recall_sums), dtype=bool)
    proportion = full
    if flat.any():
        with np.errstate(all="ignore"):
            plain_rate = wilson_interval(recall_sums[0], n, alpha)
            clustered_rate = cluster_wilson_interval(
                n, col["n_clusters"].astype(float), *recall_sums, alpha,
                cr2=tuple(col[f"cr2_{name}"].astype(float) for name in (
                    "cluster_sq", "cluster_cross", "size_sq", "size_b2")) + (
                    col["max_size"].astype(float),))
        proportion = Interval(*(
            np.where(flat, np.where(use_cluster, c, p), f)
            for c, p, f in zip(clustered_rate, plain_rate, full, strict=True)))
        binary = binary | flat
    step = GRAINS[grain]

    def nullable(values: np.ndarray) -> pa.Array:
        values = np.asarray(values, dtype=float)
        return pa.array(values, mask=np.isnan(values), type=pa.float64())

    return pa.table({
        "window_start": stats.column("window_start"),
        "window_end": pa.array([w + step for w in stats.column("window_start").to_pylist()],
                               pa.timestamp("us")),
        "grain": pa.array([grain] * stats.num_rows, pa.string()),
        "slice": stats.column("slice"),
        "route": stats.column("route"),
        "k": stats.column("k"),
        "gold_version": stats.column("gold_version"),
        "n": stats.column("n"),
        "n_sessions": np.where(use_cluster, col["n_clusters"], col["n"]).astype(np.int64),
        "mean_recall": nullable(mean),
        "ci_low": nullable(np.where(binary, proportion.low, spread.low)),
        "ci_high": nullable(np.where(binary, proportion.high, spread.high)),
        "ci_method": pa.array(np.where(binary, np.where(use_cluster, "cluster_wilson", "wilson"),
                                       np.where(use_cluster, "cluster_adjusted_t",
                                                "adjusted_t")).tolist(), pa.string()),
        "mean_precision": stats.column("mean_precision"),
        "pass_mark": pa.array([pass_mark] * stats.num_rows, pa.float64()),
        "pass_rate": nullable(col["n_pass"] / n_or_nan),
        "pass_ci_low": nullable(passes.low),
        "pass_ci_high": nullable(passes.high),
        "full_coverage_rate": nullable(col["n_full"] / n_or_nan),
        "fc_ci_low": nullable(full.low),
        "fc_ci_high": nullable(full.high),
        "rate_ci_method": pa.array(np.where(use_cluster, "cluster_wilson", "wilson").tolist(),
                                   pa.string()),
        "index_versions": stats.column("index_versions"),
        "max_index_size": stats.column("max_index_size"),
        "n_excluded": stats.column("n_excluded"),
    })
