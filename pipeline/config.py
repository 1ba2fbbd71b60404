"""The configuration of a run: which cutoffs, pass mark, gold set, grains and routes it uses,
and how drift is judged (mode, margin, baselines) and alerted.

`resolve` builds it once where the library is entered (the CLI, `run`, a DAG task): the
settings in force in the warehouse, overridden by what the caller gave, checked, with the gold
set resolved to a loaded version. Steps take the resolved `Config` and never look settings up
themselves. What is in force changes only by `put_in_force` (the CLI's options that say so and
`recallwatch config`), never as a side effect of scoring or aggregating one window; windows built
with other settings are then found stale by pipeline.state and rebuilt by `run`."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import date, timedelta

from pipeline.errors import RecallwatchError
from pipeline.routes import DEFAULT_ROUTE, known_routes
from pipeline.warehouse import transaction

DEFAULT_CUTOFFS = (1, 3, 5, 10, 20, 50, 100)
DEFAULT_PASS_MARK = 0.7
DEFAULT_GRAINS = ("day",)
DEFAULT_ALPHA = 0.05   # intervals are 1 - alpha; not yet a setting (window_metrics assumes it)
MAX_CUTOFF = 1_000_000
GRAINS = {"day": timedelta(days=1), "hour": timedelta(hours=1)}

DRIFT_MODES = ("anytime", "fixed")
DRIFT_METRICS = ("mean_recall", "pass_rate", "full_coverage_rate")
DEFAULT_DRIFT_MARGIN = 0.05     # delta: a drop counts only when its interval lies below -delta
DEFAULT_DETECTABLE_DROP = 0.10  # a window that cannot see a drop this large is `insufficient`
DEFAULT_BASELINE = "first:7"
DEFAULT_ALERT_METRICS = ("mean_recall",)


@dataclass(frozen=True)
class Baseline:
    """What a window is compared with, per slice (see `parse_baseline` for the spellings).

    - first: the first `windows` windows of each index version, frozen; the baseline restarts
      when the index version changes, and on each day a person re-baselined (`restarts`, in
      order): the first windows from the latest such day on the window's own day or before.
    - trailing: the `windows` windows before the window (same index version), skipping windows
      of an open episode.
    - dates: the windows in [since, until), pinned.
    - index: the windows served only by index `version`, pinned."""

    kind: str
    windows: int | None = None
    since: date | None = None
    until: date | None = None
    version: str | None = None
    restarts: tuple[date, ...] = ()

    @property
    def text(self) -> str:
        if self.kind == "first":
            return f"first:{self.windows}" + "".join(f"@{day}" for day in self.restarts)
        if self.kind == "trailing":
            return f"trailing:{self.windows}"
        if self.kind == "dates":
            return f"dates:{self.since}..{self.until}"
        return f"index:{self.version}"


def parse_baseline(text: str) -> Baseline:
    """'first:7', 'first:7@2026-11-12' (re-baselined that day; more days: 'first:7@D1@D2'),
    'trailing:14', 'dates:2026-11-01..2026-11-08' or 'index:idx-v1' -> Baseline, or one clear
    error."""
    kind, _, rest = text.partition(":")
    try:
        if kind == "first":
            count, *days = rest.split("@")
            baseline = Baseline("first", int(count), restarts=tuple(
                sorted({date.fromisoformat(day) for day in days})))
        elif kind == "trailing":
            baseline = Baseline("trailing", int(rest))
        elif kind == "dates":
            since, _, until = rest.partition("..")
            baseline = Baseline("dates", since=date.fromisoformat(since),
                                until=date.fromisoformat(until))
            if baseline.until <= baseline.since:
                raise ValueError
        elif kind == "index" and rest:
            baseline = Baseline("index", version=rest)
        else:
            raise ValueError
    except ValueError:
        raise RecallwatchError(
            f"baseline {text!r} must be first:N, first:N@YYYY-MM-DD[@YYYY-MM-DD...], trailing:N, "
            "dates:YYYY-MM-DD..YYYY-MM-DD (end after start) or index:VERSION.") from None
    if baseline.windows is not None and not 1 <= baseline.windows <= 10_000:
        raise RecallwatchError(f"baseline {text!r}: the number of windows must be 1 to 10000.")
    return baseline


@dataclass(frozen=True)
class Config:
    """What a step is built with. `gold_version` None means no gold set is loaded yet."""

    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS
    pass_mark: float = DEFAULT_PASS_MARK
    gold_version: str | None = None
    grains: tuple[str, ...] = DEFAULT_GRAINS   # every grain kept current by `run`
    routes: tuple[str, ...] = (DEFAULT_ROUTE,)
    drift_mode: str = "anytime"
    drift_margin: float = DEFAULT_DRIFT_MARGIN
    detectable_drop: float = DEFAULT_DETECTABLE_DROP
    # (slice, baseline) pairs; slice '*' is every slice without one of its own
    baselines: tuple[tuple[str, Baseline], ...] = (("*", parse_baseline(DEFAULT_BASELINE)),)
    alert_k: int | None = None   # None: 10 when it is a cutoff, else the cutoff nearest 10
    alert_metrics: tuple[str, ...] = DEFAULT_ALERT_METRICS

    def baseline_for(self, slice_: str) -> Baseline:
        own = dict(self.baselines)
        return own.get(slice_, own.get("*", parse_baseline(DEFAULT_BASELINE)))

    @property
    def alert_cutoff(self) -> int:
        if self.alert_k is not None:
            return self.alert_k
        return min(self.cutoffs, key=lambda c: (abs(c - 10), c))

    @property
    def baselines_text(self) -> str:
        return json.dumps({name: b.text for name, b in self.baselines}, sort_keys=True)

    @property
    def cutoffs_text(self) -> str:
        return ",".join(map(str, self.cutoffs))


def parse_cutoffs(text: str) -> tuple[int, ...]:
    """'1,3,5' -> (1, 3, 5): positive integers, sorted, duplicates dropped."""
    parts = [part.strip() for part in text.split(",")]
    if any(not part for part in parts):
        raise RecallwatchError(
            f"--cutoffs {text!r} has an empty item; give comma-separated positive integers, "
            "e.g. 1,3,5,10.")
    try:
        values = sorted({int(part) for part in parts})
    except ValueError:
        raise RecallwatchError(
            f"--cutoffs {text!r} must be comma-separated positive integers, e.g. 1,3,5,10."
        ) from None
    if not values or values[0] < 1 or values[-1] > MAX_CUTOFF:
        raise RecallwatchError(
            f"--cutoffs {text!r} must be integers from 1 to {MAX_CUTOFF}, e.g. 1,3,5,10.")
    return tuple(values)


def check(config: Config) -> Config:
    """The configuration itself, or one clear error naming the setting at fault."""
    if not config.cutoffs or any(not 1 <= c <= MAX_CUTOFF for c in config.cutoffs):
        raise RecallwatchError(
            f"cutoffs {config.cutoffs_text!r} must be integers from 1 to {MAX_CUTOFF}.")
    if not 0.0 <= config.pass_mark <= 1.0:
        raise RecallwatchError(f"--pass-mark {config.pass_mark} must lie in [0, 1].")
    for grain in config.grains:
        if grain not in GRAINS:
            raise RecallwatchError(
                f"grain {grain!r} (--window, --grains) must be one of {', '.join(GRAINS)}.")
    if "day" not in config.grains:
        raise RecallwatchError(
            f"--grains {','.join(config.grains)!r} must include day: the report and the summary "
            "read daily windows (use day or day,hour).")
    if config.drift_mode not in DRIFT_MODES:
        raise RecallwatchError(
            f"--drift-mode {config.drift_mode!r} must be one of {', '.join(DRIFT_MODES)}.")
    if not 0.0 <= config.drift_margin < 1.0:
        raise RecallwatchError(f"--margin {config.drift_margin} must lie in [0, 1).")
    if not config.drift_margin < config.detectable_drop <= 1.0:
        raise RecallwatchError(
            f"--detectable-drop {config.detectable_drop} must lie above the margin "
            f"({config.drift_margin}) and at most 1.")
    if config.alert_k is not None and config.alert_k not in config.cutoffs:
        raise RecallwatchError(
            f"--alert-k {config.alert_k} must be one of the cutoffs {config.cutoffs_text}.")
    for metric in config.alert_metrics:
        if metric not in DRIFT_METRICS:
            raise RecallwatchError(
                f"alert metric {metric!r} must be one of {', '.join(DRIFT_METRICS)}.")
    for route in config.routes:
        if route not in known_routes():
            raise RecallwatchError(
                f"route {route!r} is not available; choose one of {', '.join(known_routes())}.")
    return config


def in_force(con) -> Config:
    """The settings in force in the warehouse (the defaults where none was set), with the
    newest loaded gold set."""
    stored = dict(con.execute("SELECT name, value FROM settings").fetchall())
    return Config(
        cutoffs=tuple(int(c) for c in stored["cutoffs"].split(","))
        if stored.get("cutoffs") else DEFAULT_CUTOFFS,
        pass_mark=float(stored.get("pass_mark", DEFAULT_PASS_MARK)),
        gold_version=newest_gold_version(con),
        grains=tuple(stored["grains"].split(",")) if stored.get("grains") else DEFAULT_GRAINS,
        routes=tuple(stored["routes"].split(",")) if stored.get("routes") else (DEFAULT_ROUTE,),
        drift_mode=stored.get("drift_mode", "anytime"),
        drift_margin=float(stored.get("drift_margin", DEFAULT_DRIFT_MARGIN)),
        detectable_drop=float(stored.get("detectable_drop", DEFAULT_DETECTABLE_DROP)),
        baselines=tuple((name, parse_baseline(text)) for name, text in
                        json.loads(stored["baselines"]).items())
        if stored.get("baselines") else Config.baselines,
        alert_k=int(stored["alert_k"]) if stored.get("alert_k") else None,
        alert_metrics=tuple(stored["alert_metrics"].split(","))
        if stored.get("alert_metrics") else DEFAULT_ALERT_METRICS,
    )


# `resolve(alert_k=AUTO_ALERT_K)` (the CLI's `--alert-k auto`): no alert k of one's own again
AUTO_ALERT_K = 0


def resolve(con, *, cutoffs: tuple[int, ...] | None = None, pass_mark: float | None = None,
            gold_version: str | None = None, grains: tuple[str, ...] | None = None,
            routes: tuple[str, ...] | None = None, drift_mode: str | None = None,
            drift_margin: float | None = None, detectable_drop: float | None = None,
            baselines: dict[str, str] | None = None, alert_k: int | None = None,
            alert_metrics: tuple[str, ...] | None = None) -> Config:
    """The settings in force overridden by those given (None keeps what is in force), checked.
    A given gold version must be loaded. `baselines` maps slices ('*' for the default) to
    baseline spellings and is merged over those in force. Nothing is saved: see put_in_force."""
    current = in_force(con)
    merged_baselines = None
    if baselines is not None:
        merged = dict(current.baselines)
        merged.update({name: parse_baseline(text) for name, text in baselines.items()})
        merged_baselines = tuple(sorted(merged.items()))
    given = {"cutoffs": tuple(sorted(set(cutoffs))) if cutoffs is not None else None,
             # -0 is 0 (it was stored and shown as -0.0)
             "pass_mark": pass_mark + 0.0 if pass_mark is not None else None,
             "gold_version": gold_version,
             # a name given twice is kept once
             "grains": tuple(dict.fromkeys(grains)) if grains is not None else None,
             "routes": tuple(dict.fromkeys(routes)) if routes is not None else None,
             "drift_mode": drift_mode, "drift_margin": drift_margin,
             "detectable_drop": detectable_drop, "baselines": merged_baselines,
             "alert_k": alert_k,
             "alert_metrics": (tuple(dict.fromkeys(alert_metrics)) if alert_metrics is not None
                               else None)}
    config = replace(current, **{k: v for k, v in given.items() if v is not None})
    if alert_k == AUTO_ALERT_K:   # back to the default, which follows the cutoffs
        config = replace(config, alert_k=None)
    if gold_version is not None:
        known = con.execute("SELECT 1 FROM gold_versions WHERE gold_version = $v",
                            {"v": gold_version}).fetchall()
        if not known:
            raise RecallwatchError(f"gold version {gold_version!r} is not loaded.")
    return check(config)


def given_or_resolved(con, config: Config | None, settings: dict) -> Config:
    """The configuration a step was given, checked; else the settings in force overridden by
    `settings` (resolve). Giving both is a caller's mistake."""
    if config is not None and settings:
        raise TypeError(f"give a Config or settings ({', '.join(settings)}), not both")
    return check(config) if config is not None else resolve(con, **settings)


def put_in_force(con, config: Config) -> None:
    """Make the cutoffs, pass mark, grains, routes and drift and alert settings of `config`
    the ones later runs use. Windows built with other settings become stale (pipeline.state)
    and `run` rebuilds them."""
    check(config)
    values = {"cutoffs": config.cutoffs_text, "pass_mark": str(config.pass_mark),
              "grains": ",".join(sorted(set(config.grains))),
              "routes": ",".join(dict.fromkeys(config.routes)),
              "drift_mode": config.drift_mode, "drift_margin": str(config.drift_margin),
              "detectable_drop": str(config.detectable_drop),
              "baselines": config.baselines_text,
              "alert_k": "" if config.alert_k is None else str(config.alert_k),
              "alert_metrics": ",".join(config.alert_metrics)}
    with transaction(con):
        for name, value in values.items():
            con.execute("DELETE FROM settings WHERE name = $name", {"name": name})
            con.execute("INSERT INTO settings VALUES ($name, $value)",
                        {"name": name, "value": value})


def newest_gold_version(con) -> str | None:
    """The gold set loaded last, the default of every step; None when none is loaded."""
    rows = con.execute(
        "SELECT gold_version FROM gold_versions ORDER BY seq DESC LIMIT 1").fetchall()
    return rows[0][0] if rows else None


def require_gold(config: Config) -> str:
    if config.gold_version is None:
        raise RecallwatchError(
            "no gold set is loaded: run `recallwatch ingest gold PATH --version V` first.")
    return config.gold_version
