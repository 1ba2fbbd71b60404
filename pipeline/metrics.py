"""Metrics out: the latest window of every slice, route and cutoff k as Prometheus gauges, for
node_exporter's textfile collector or a push gateway, so a Grafana panel and an alert rule can
sit beside the report.

The numbers are window_metrics' own (sql/metrics_latest.sql picks, per slice x route x k of one
grain and gold-set version, the most recent window) and the drift state of each drift metric in
that window. A custom collector yields them as gauge families on a fresh registry, and
prometheus_client writes the exposition (`prometheus`: the classic text format 0.0.4;
`openmetrics`: OpenMetrics 1.0 text), so label values taken from logs (tags, index versions)
are escaped by the library, not by hand.

Every sample is labelled grain, slice, route, k and gold_version; the drift state also
metric (mean_recall, pass_rate or full_coverage_rate). Samples carry no timestamp, since the
textfile collector refuses them: `recallwatch_window_start_timestamp_seconds` says which window
the values describe. A value the window does not have (an interval of one request, a window
that drift has not judged) is left out rather than written as NaN. The drift state is -1 while
a drop episode is open, 1 while a rise episode is open, 0 when none is, so an alert rule reads
`recallwatch_drift_state{metric="mean_recall"} == -1`."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry

from pipeline.alerts import printable
from pipeline.atomic import written_whole
from pipeline.config import DRIFT_METRICS
from pipeline.errors import RecallwatchError
from pipeline.warehouse import queries

FORMATS = ("prometheus", "openmetrics")
DEFAULT_FORMAT = "prometheus"
LABELS = ("grain", "slice", "route", "k", "gold_version")


@dataclass(frozen=True)
class Gauge:
    """One exported gauge: its name (the unit is appended), the window_metrics column it
    carries, its unit and its help text."""

    name: str
    column: str
    unit: str
    help: str


GAUGES = (
    Gauge("recallwatch_mean_recall", "mean_recall", "ratio",
          "Mean recall@k of the window's scored requests (window_metrics.mean_recall)."),
    Gauge("recallwatch_mean_recall_ci_low", "ci_low", "ratio",
          "Lower bound of the 95% interval of mean recall@k (window_metrics.ci_low)."),
    Gauge("recallwatch_mean_recall_ci_high", "ci_high", "ratio",
          "Upper bound of the 95% interval of mean recall@k (window_metrics.ci_high)."),
    Gauge("recallwatch_pass_rate", "pass_rate", "ratio",
          "Share of scored requests with recall@k at or above the pass mark "
          "(window_metrics.pass_rate)."),
    Gauge("recallwatch_pass_rate_ci_low", "pass_ci_low", "ratio",
          "Lower bound of the 95% interval of the pass rate (window_metrics.pass_ci_low)."),
    Gauge("recallwatch_pass_rate_ci_high", "pass_ci_high", "ratio",
          "Upper bound of the 95% interval of the pass rate (window_metrics.pass_ci_high)."),
    Gauge("recallwatch_full_coverage_rate", "full_coverage_rate", "ratio",
          "Share of scored requests whose top k held everything needed "
          "(window_metrics.full_coverage_rate)."),
    Gauge("recallwatch_full_coverage_rate_ci_low", "fc_ci_low", "ratio",
          "Lower bound of the 95% interval of the full-coverage rate (window_metrics.fc_ci_low)."),
    Gauge("recallwatch_full_coverage_rate_ci_high", "fc_ci_high", "ratio",
          "Upper bound of the 95% interval of the full-coverage rate "
          "(window_metrics.fc_ci_high)."),
    Gauge("recallwatch_mean_precision", "mean_precision", "ratio",
          "Mean precision@k of the window's scored requests (window_metrics.mean_precision)."),
    Gauge("recallwatch_pass_mark", "pass_mark", "ratio",
          "The recall at or above which a request passes (window_metrics.pass_mark)."),
    Gauge("recallwatch_scored_requests", "n", "",
          "Scored requests in the window, the n behind every mean and rate (window_metrics.n)."),
    Gauge("recallwatch_excluded_requests", "n_excluded", "",
          "Requests in the window not scored, so not in any mean (window_metrics.n_excluded)."),
    Gauge("recallwatch_window_start_timestamp", "window_start", "seconds",
          "Start of the window the values describe, Unix time (window_metrics.window_start)."),
    Gauge("recallwatch_window_end_timestamp", "window_end", "seconds",
          "End of the window the values describe (exclusive), Unix time "
          "(window_metrics.window_end)."),
)
DRIFT_STATE = "recallwatch_drift_state"
DRIFT_STATE_HELP = ("Drift of the metric in the window against its baseline (drift_events): -1 "
                    "while a drop episode is open, 1 while a rise episode is open, 0 when none "
                    "is.")


@dataclass(frozen=True)
class LatestWindows:
    """The rows to export: one per slice x route x k, as sql/metrics_latest.sql returns them."""

    grain: str
    gold_version: str
    rows: tuple[dict, ...]


def latest_windows(con, *, grain: str = "day", gold_version: str | None = None) -> LatestWindows:
    """The latest window of every slice x route x k of `grain` and the gold-set version (default:
    the newest loaded that window_metrics holds). A warehouse without such metrics is a
    RecallwatchError that says what to run."""
    found = queries("metrics_latest")
    grains = [g for (g,) in con.execute(found["grains"]).fetchall()]
    if not grains:
        raise RecallwatchError(
            "the warehouse has no window metrics yet: run `recallwatch run` (or `recallwatch "
            "score` then `recallwatch aggregate`) first.")
    if grain not in grains:
        raise RecallwatchError(
            f"the warehouse has no window metrics by {grain} (it holds {', '.join(grains)}): "
            f"choose --grain {grains[0]}, or aggregate with `recallwatch aggregate --window "
            f"{grain}`.")
    versions = [v for (v,) in con.execute(found["gold_versions"], {"grain": grain}).fetchall()]
    if gold_version is None:
        gold_version = versions[0]
    elif gold_version not in versions:
        raise RecallwatchError(
            f"the window metrics by {grain} hold no gold version {gold_version!r}; choose "
            f"--gold-version among {', '.join(map(printable, versions))}.")
    result = con.sql(found["latest_windows"], params={"grain": grain,
                                                       "gold_version": gold_version})
    columns = result.columns
    rows = tuple(dict(zip(columns, row, strict=True)) for row in result.fetchall())
    return LatestWindows(grain, gold_version, rows)


class LatestWindowCollector:
    """A prometheus_client collector over LatestWindows: one gauge family per exported figure,
    one sample per slice x route x k (x drift metric for the drift state)."""

    def __init__(self, latest: LatestWindows):
        self.latest = latest

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for gauge in GAUGES:
            family = GaugeMetricFamily(gauge.name, gauge.help, labels=LABELS, unit=gauge.unit)
            for row in self.latest.rows:
                value = _number(row[gauge.column])
                if value is not None:
                    family.add_metric(_labels(row), value)
            yield family
        family = GaugeMetricFamily(DRIFT_STATE, DRIFT_STATE_HELP, labels=(*LABELS, "metric"))
        for row in self.latest.rows:
            for metric in DRIFT_METRICS:
                value = _number(row[f"drift_{metric}"])   # columns of sql/metrics_latest.sql
                if value is not None:
                    family.add_metric((*_labels(row), metric), value)
        yield family


def _labels(row: dict) -> tuple[str, ...]:
    return tuple(str(row[name]) for name in LABELS)


def _number(value) -> float | None:
    """A sample value; None (and NaN, which the interval functions give an undefined group)
    means the window has no such figure."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC).timestamp()   # stored as naive UTC
    number = float(value)
    return None if math.isnan(number) else number


def exposition(latest: LatestWindows, fmt: str = DEFAULT_FORMAT) -> bytes:
    """The text exposition of `latest` in `fmt` (prometheus or openmetrics), from a registry of
    its own so nothing else of this process (its default collectors) gets in."""
    if fmt not in FORMATS:
        raise RecallwatchError(f"--format {fmt!r} must be one of {', '.join(FORMATS)}.")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LatestWindowCollector(latest))
    if fmt == "openmetrics":
        from prometheus_client.openmetrics.exposition import generate_latest
    else:
        from prometheus_client.exposition import generate_latest
    return generate_latest(registry)


def write_atomically(path: str | os.PathLike, data: bytes) -> Path:
    """Replace `path` with `data` by writing a temporary file beside it and renaming it, so a
    reader (the textfile collector scraping mid-write) sees the old file or the new one, never
    half of one. The temporary name is hidden and does not end in .prom, which the collector
    would read."""
    target = Path(path)
    if target.is_dir() or str(path).endswith(("/", os.sep)):   # m.prom/ names a directory
        raise RecallwatchError(f"--out {target} is a directory: name the file to write, e.g. "
                               f"{target / 'recallwatch.prom'}.")
    try:
        # 0644: the collector runs as another user
        with written_whole(target, 0o644) as written, open(written, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise RecallwatchError(f"cannot write {target} ({exc.strerror or exc}); choose another "
                               "--out path.") from None
    return target
