"""The configuration of a run: which cutoffs, pass mark, gold set, grains and routes it uses.

`resolve` builds it once where the library is entered (the CLI, `run`, a DAG task): the
settings in force in the warehouse, overridden by what the caller gave, checked, with the gold
set resolved to a loaded version. Steps take the resolved `Config` and never look settings up
themselves. What is in force changes only by `put_in_force` (the CLI's options that say so and
`recallwatch config`), never as a side effect of scoring or aggregating one window; windows built
with other settings are then found stale by pipeline.state and rebuilt by `run`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from pipeline.errors import RecallwatchError
from pipeline.routes import DEFAULT_ROUTE, known_routes
from pipeline.warehouse import transaction

DEFAULT_CUTOFFS = (1, 3, 5, 10, 20, 50, 100)
DEFAULT_PASS_MARK = 0.7
DEFAULT_GRAINS = ("day",)
DEFAULT_ALPHA = 0.05   # intervals are 1 - alpha; not yet a setting (window_metrics assumes it)
MAX_CUTOFF = 1_000_000
GRAINS = {"day": timedelta(days=1), "hour": timedelta(hours=1)}


@dataclass(frozen=True)
class Config:
    """What a step is built with. `gold_version` None means no gold set is loaded yet."""

    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS
    pass_mark: float = DEFAULT_PASS_MARK
    gold_version: str | None = None
    grains: tuple[str, ...] = DEFAULT_GRAINS   # every grain kept current by `run`
    routes: tuple[str, ...] = (DEFAULT_ROUTE,)

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
    )


def resolve(con, *, cutoffs: tuple[int, ...] | None = None, pass_mark: float | None = None,
            gold_version: str | None = None, grains: tuple[str, ...] | None = None,
            routes: tuple[str, ...] | None = None) -> Config:
    """The settings in force overridden by those given (None keeps what is in force), checked.
    A given gold version must be loaded. Nothing is saved: see put_in_force."""
    given = {"cutoffs": tuple(sorted(set(cutoffs))) if cutoffs is not None else None,
             "pass_mark": pass_mark, "gold_version": gold_version,
             "grains": tuple(grains) if grains is not None else None,
             "routes": tuple(routes) if routes is not None else None}
    config = replace(in_force(con), **{k: v for k, v in given.items() if v is not None})
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
    """Make the cutoffs, pass mark and grains of `config` the ones later runs use. Windows
    built with other settings become stale (pipeline.state) and `run` rebuilds them."""
    check(config)
    values = {"cutoffs": config.cutoffs_text, "pass_mark": str(config.pass_mark),
              "grains": ",".join(sorted(set(config.grains)))}
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
