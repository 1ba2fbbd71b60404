"""The data-quality gate of one interval [start, end): before an interval's log files are loaded,
they are read the way ingest reads them (pipeline.ingest.logs stages each file on an in-memory
DuckDB connection, never the warehouse), turned into one row per record (sql/quality_records.sql)
and validated with Great Expectations as a pandas DataFrame. Blocking checks (files readable,
records parse, request_id present and unique, timestamps readable and inside the interval,
ranks >= 1, index_version present, a retrieved list present, k >= 1 where logged, and every
record one ingest loads) stop the interval: `gate` raises QualityGateFailed with one line
naming each failed check, its count and an example, and the caller loads nothing.
Warnings (empty retrievals, retrieved-list length, golden join keys; after loading, the share
matched to a golden and the share quarantined, `check_loaded`) never block. Every check is a
row of `quality_checks`, replaced per interval and stage by `record`, so checking twice changes
nothing. Great Expectations is imported on first use (it takes seconds) with its logging held
at WARNING and its progress bars off; this module never reads the clock."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from pipeline.errors import RecallwatchError
from pipeline.formats import PROBLEM_COLUMN, is_parquet
from pipeline.ingest.files import DEFAULT_MAX_RECORD_BYTES, LOG_SUFFIXES, holds_files
from pipeline.sources import ReadOptions, deliveries, scheme
from pipeline.warehouse import connect, queries, run_script, transaction

# The stages of quality_checks: the log files before loading, the warehouse after it.
FILES, LOADED = "files", "loaded"

# Warning thresholds (a warning never blocks an interval).
MAX_EMPTY_SHARE = 0.05          # of parsed records whose retrieved list is empty
MAX_RETRIEVED_LENGTH = 1000     # chunks logged for one request, over all steps
MIN_MATCHED_SHARE = 0.5         # of looked-up requests that matched a golden
MAX_QUARANTINED_SHARE = 0.01    # of the records read from the interval's files

# The columns that identify an offending record in an example.
EXAMPLE_COLUMNS = ["place", "request_id", "logged_timestamp", "problem"]


class QualityGateFailed(RecallwatchError):
    """A blocking check failed; the message is one line, `report` holds every check."""

    def __init__(self, report: QualityReport):
        super().__init__(report.reason())
        self.report = report


@dataclass(frozen=True)
class Check:
    """One check of one interval: `observed` is what was found ('3 duplicates', '0.020'),
    `example` one offending record, `detail` one line for people."""
    name: str
    blocking: bool
    success: bool
    observed: str
    detail: str
    example: str | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "blocking": self.blocking, "success": self.success,
                "observed": self.observed, "example": self.example, "detail": self.detail}


@dataclass(frozen=True)
class QualityReport:
    """The checks of one interval and stage; checked_at stamps their rows (default: the
    interval's end, since logic reads no clock)."""
    start: datetime
    end: datetime
    checks: tuple[Check, ...]
    stage: str = FILES
    checked_at: datetime | None = None

    @property
    def passed(self) -> bool:
        """No blocking check failed (warnings do not count)."""
        return not self.failures

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.blocking and not c.success)

    @property
    def stamp(self) -> datetime:
        return self.checked_at or self.end

    def reason(self) -> str:
        """The one line QualityGateFailed carries, e.g. "quality gate failed for
        2026-11-01..2026-11-02: request_id unique (3 duplicates, e.g. r-17)"."""
        parts = [f"{c.name} ({c.observed}{f', e.g. {c.example}' if c.example else ''})"
                 for c in self.failures]
        return f"quality gate failed for {interval_text(self.start, self.end)}: " + "; ".join(
            parts)

    def as_dict(self) -> dict:
        """Plain JSON-able values (an Airflow XCom)."""
        return {"start": self.start.isoformat(), "end": self.end.isoformat(),
                "stage": self.stage, "passed": self.passed,
                "checked_at": self.stamp.isoformat(),
                "checks": [c.as_dict() for c in self.checks]}


def interval_text(start: datetime, end: datetime) -> str:
    """'2026-11-01..2026-11-02' for whole days, else the date-times."""
    if start.time() == time(0) and end.time() == time(0):
        return f"{start:%Y-%m-%d}..{end:%Y-%m-%d}"
    return f"{start:%Y-%m-%dT%H:%M:%S}..{end:%Y-%m-%dT%H:%M:%S}"


def _check_interval(start: datetime | None, end: datetime | None) -> None:
    if start is None or end is None or end <= start:
        raise RecallwatchError(
            f"the quality checks need an interval [start, end) with end after start; got "
            f"[{start}, {end}).")


# ------------------------------------------------------------------------- the log files

def validate_files(paths: list[str], start: datetime, end: datetime, *,
                   checked_at: datetime | None = None,
                   max_record_bytes: int | None = None,
                   options: ReadOptions | None = None,
                   kept_limits: dict[str, int] | None = None) -> QualityReport:
    """Check the log files of [start, end) (JSONL[.gz] or Parquet; files, directories or
    globs, as ingest takes them) before they are loaded, lines longer than max_record_bytes
    (default 8 MiB; `kept_limits`: a delivery's own, that ingest keeps for it) unreadable. No
    files is one warning, not a failure. A record is judged as logged by the named checks,
    and by ingest's own rules in "records load"."""
    _check_interval(start, end)
    max_record_bytes = max_record_bytes or DEFAULT_MAX_RECORD_BYTES
    options = options or ReadOptions(start=start, end=end)
    files = _log_deliveries(paths, options)
    if not files:
        check = Check("log files", False, False, "0 files",
                      f"no log files for {interval_text(start, end)}: nothing to check or load")
        return QualityReport(start, end, (check,), FILES, checked_at)
    frame = _records_frame(files, max_record_bytes, options, kept_limits or {})
    outcomes = _validate(frame, start, end)
    checks = [Check("log files", False, True, _plural(len(files), "file"),
                    f"{_plural(len(files), 'file')}, {_plural(len(frame), 'record')}")]
    checks += [rule.describe(outcomes[rule.name], frame, start, end) for rule in RULES]
    return QualityReport(start, end, tuple(checks), FILES, checked_at)


def _log_deliveries(paths: list[str], options: ReadOptions):
    """What ingest would read of the interval. Directories holding no log file (an empty day
    partition) are nothing; a path that names nothing is an error, as it is for ingest. A
    table's rows without a timestamp belong to no interval: ingest quarantines them, and they
    do not count against every interval's check."""
    if not paths:
        return []
    dirs = [p for p in paths if scheme(p) is None and Path(p).is_dir()]
    if len(dirs) == len(paths) and not any(holds_files(d, LOG_SUFFIXES) for d in dirs):
        return []
    return [d for d in deliveries(paths, LOG_SUFFIXES, options)
            if not getattr(d, "undated", False)]


def _records_frame(found, max_record_bytes: int, options: ReadOptions,
                   kept_limits: dict[str, int]):
    """One pandas row per record of the deliveries (the columns of sql/quality_frame.sql),
    each staged and judged as ingest stages and judges it."""
    from pipeline.ingest import fields
    from pipeline.ingest.logs import native_delivery, stage_log_file

    with connect(":memory:") as con:
        run_script(con, "quality_frame")
        for number, delivery in enumerate(found):
            name = "/".join(delivery.source.rstrip("/").split("/")[-2:])
            limit = kept_limits.get(delivery.source, max_record_bytes)
            # the staged records are views over the file: judged while it is still there (a
            # converted trace or RAGAS file, a fetched object, goes when its block ends)
            with delivery.fetch() as fetched, ExitStack() as staged:
                problem = "cannot be read as " + ("Parquet" if is_parquet(fetched)
                                                  else "JSON Lines")
                try:
                    try:
                        path, line_column, records = staged.enter_context(
                            native_delivery(delivery, fetched, options, limit))
                    except RecallwatchError as exc:
                        # its format refuses it (none matches, a RAGAS log without its
                        # timestamp column, ...): the sentence ingest refuses it with
                        problem = str(exc).removeprefix(f"{fetched}: ").rstrip(".")
                        raise
                    stage_log_file(con, path, limit, line_column=line_column,
                                   shown_as=delivery.source, json_records=records)
                    # a table's records are its rows; a converted file's, the input's
                    rows = records or is_parquet(fetched)
                except duckdb.OutOfMemoryException:
                    raise  # not the file's fault
                except (RecallwatchError, duckdb.Error):
                    # a file that cannot be read at all is one record that does not parse,
                    # and stops the interval: ingest refuses the file, it quarantines nothing
                    con.execute(
                        "INSERT INTO quality_records (file_no, line, place, file_read, parsed, "
                        "problem) VALUES ($file_no, 0, $place, false, false, $problem)",
                        {"file_no": number, "place": name, "problem": problem})
                    continue
                parameters = fields.validate_parameters()
                run_script(con, "validate_logs", parameters)
                run_script(con, "quality_records", {
                    "file_no": number, "place": f"{name} {'row' if rows else 'line'}",
                    "first_year": parameters["first_year"],
                    "last_year": parameters["last_year"]})
                if line_column and not records and PROBLEM_COLUMN in pq.read_schema(path).names:
                    run_script(con, "quality_unconverted", {"file_no": number,
                                                            "path": str(path)})
        return con.sql(queries("quality_checks")["records_frame"]).df()


def _great_expectations():
    """Great Expectations, imported on first use with its import-time logging (INFO records,
    a dump of a class dictionary) held at WARNING."""
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    import great_expectations as gx

    logging.getLogger("great_expectations.data_context.types.base").setLevel(logging.WARNING)
    return gx


def _validate(frame, start: datetime, end: datetime) -> dict[str, _Outcome]:
    """Validate the frame with one suite of the expectations of RULES on an ephemeral context;
    the outcome of each rule by name."""
    gx = _great_expectations()
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.expectations.row_conditions import Column

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (context.data_sources.add_pandas("logs").add_dataframe_asset("records")
             .add_batch_definition_whole_dataframe("interval")
             .get_batch(batch_parameters={"dataframe": frame}))
    suite = gx.ExpectationSuite(name="recallwatch_logs")
    parsed = Column("parsed") == True  # noqa: E712 (a GX row condition, not a comparison)
    for rule in RULES:
        expectation = rule.expect(gx.expectations, parsed, start, end)
        expectation.meta = {"check": rule.name}
        suite.add_expectation(expectation)
    result = batch.validate(suite, result_format={
        "result_format": "SUMMARY", "unexpected_index_column_names": EXAMPLE_COLUMNS,
        "partial_unexpected_count": 1})
    outcomes = {}
    for r in result.results:
        info = r.exception_info or {}
        if info.get("raised_exception"):
            raise RuntimeError(f"Great Expectations could not evaluate "
                               f"{r.expectation_config.meta['check']}: "
                               f"{info.get('exception_message')}")
        found = r.result or {}
        examples = found.get("partial_unexpected_index_list") or [{}]
        judged = int(found.get("element_count") or 0) - int(found.get("missing_count") or 0)
        outcomes[r.expectation_config.meta["check"]] = _Outcome(
            bool(r.success), int(found.get("unexpected_count") or 0), judged,
            {k: _value(v) for k, v in examples[0].items()})
    return outcomes


def _value(value):
    """A value of a pandas row as plain Python: NaN/NaT/NA as None."""
    try:
        if value is None or (not isinstance(value, str) and bool(value != value)):
            return None
    except (TypeError, ValueError):  # a list compares elementwise
        return value
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class _Outcome:
    """What one expectation found: success, unexpected rows, rows judged (not null, and
    meeting the row condition), the first unexpected row's EXAMPLE_COLUMNS and judged
    column."""
    success: bool
    unexpected: int
    judged: int
    first: dict


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else words or word + 's'}"


def _who(row: dict) -> str:
    """An offending record by its request_id, else where it is."""
    return row.get("request_id") or row.get("place") or "?"


def _instant(value) -> str:
    return f"{value:%Y-%m-%dT%H:%M:%S}" if value is not None else "?"


@dataclass(frozen=True)
class _Rule:
    """One check: its expectation (built from gx.expectations, the row condition "the record
    parsed", and the interval) and how its outcome reads (observed, example, detail)."""
    name: str
    blocking: bool
    expect: Callable
    read: Callable[[_Outcome, object, datetime, datetime], tuple[str, str | None, str]]

    def describe(self, outcome: _Outcome, frame, start: datetime, end: datetime) -> Check:
        observed, example, detail = self.read(outcome, frame, start, end)
        if self.blocking and outcome.success and outcome.unexpected:
            detail += (f" (within the {BAD_RECORD_TOLERANCE:.0%} tolerance: ingest quarantines "
                       "them with their reason)")
        return Check(self.name, self.blocking, outcome.success, observed, detail,
                     example if not outcome.success else None)


def _files_readable(o, frame, start, end):
    if not o.unexpected:
        return "0 unreadable", None, "every file can be read"
    example = f"{o.first.get('place')}: {o.first.get('problem')}"
    return (f"{o.unexpected:,} unreadable", example,
            f"{_plural(o.unexpected, 'file')} cannot be read at all, e.g. {example} (ingest "
            "refuses such a file: fix or move it)")


def _records_parse(o, frame, start, end):
    if not o.unexpected:
        return "0 unreadable", None, f"all {len(frame):,} records read as JSON objects"
    row = o.first
    example = f"{row.get('place')}: {row.get('problem')}"
    return (f"{o.unexpected:,} unreadable", example,
            f"{o.unexpected:,} of {len(frame):,} records cannot be read, e.g. {example}")


def _missing(field: str):
    """`field` with its article: 'a request_id'."""
    def read(o, frame, start, end):
        if not o.unexpected:
            return "0 missing", None, f"every record has {field}"
        example = o.first.get("place") if field.endswith("request_id") else _who(o.first)
        return (f"{o.unexpected:,} missing", example,
                f"{_plural(o.unexpected, 'record')} without {field}, e.g. {example}")
    return read


def _request_id_unique(o, frame, start, end):
    keys = frame["distinct_request_id"].dropna()
    repeats = int(frame["request_id"].notna().sum()) - len(keys)
    copies = (f"; {_plural(repeats, 'identical re-delivery', 'identical re-deliveries')} "
              "(loaded once)" if repeats else "")
    if not o.unexpected:
        return "0 duplicates", None, f"{len(keys):,} distinct request_id values{copies}"
    values = int(keys[keys.duplicated()].nunique())
    example = o.first.get("request_id")
    return (_plural(values, "duplicate"), example,
            f"{_plural(values, 'duplicate request_id value')} ({o.unexpected:,} records with "
            f"different contents), e.g. {example}")


def _timestamp_readable(o, frame, start, end):
    if not o.unexpected:
        return "0 unreadable", None, "every record has a readable ISO-8601 timestamp"
    row = o.first
    logged = row.get("logged_timestamp")
    example = f"{_who(row)} ({'missing' if logged is None else repr(logged[:40])})"
    return (f"{o.unexpected:,} unreadable", example,
            f"{_plural(o.unexpected, 'record')} without a readable timestamp, e.g. {example}")


def _in_interval(o, frame, start, end):
    window = f"[{_instant(start)}, {_instant(end)})"
    if not o.unexpected:
        return "0 outside", None, f"every timestamp lies in {window}"
    example = f"{_who(o.first)} at {_instant(o.first.get('timestamp'))}"
    return (f"{o.unexpected:,} outside", example,
            f"{_plural(o.unexpected, 'record')} timed outside {window}, e.g. {example}")


def _at_least_one(column: str, what: str):
    def read(o, frame, start, end):
        if not o.unexpected:
            return "0 below 1", None, f"every {what} is at least 1"
        example = f"{_who(o.first)} ({column.removeprefix('min_')} {o.first.get(column):g})"
        return (f"{o.unexpected:,} below 1", example,
                f"{_plural(o.unexpected, 'record')} with a {what} below 1, e.g. {example}")
    return read


def _empty_retrievals(o, frame, start, end):
    if not o.judged:
        return "n/a", None, "no record logged a retrieved list"
    share = o.unexpected / o.judged
    text = (f"{o.unexpected:,} of {o.judged:,} requests retrieved nothing ({share:.1%}; "
            f"a warning above {MAX_EMPTY_SHARE:.0%})")
    example = o.first.get("request_id")
    return f"{share:.3f}", example, text + (f", e.g. {example}" if not o.success else "")


def _retrieved_length(o, frame, start, end):
    lengths = frame["n_retrieved"].dropna()
    if lengths.empty:
        return "n/a", None, "no record logged a retrieved list"
    observed = f"{int(lengths.min())}..{int(lengths.max())}"
    if o.success:
        return observed, None, f"{observed} chunks per request"
    example = _who(o.first)
    return (observed, example,
            f"{_plural(o.unexpected, 'request')} logged more than {MAX_RETRIEVED_LENGTH} "
            f"chunks, e.g. {example} ({int(o.first.get('n_retrieved'))})")


def _records_load(o, frame, start, end):
    if not o.unexpected:
        return ("0 quarantined", None,
                "ingest would quarantine no record for a reason the checks above do not name")
    example = f"{o.first.get('place')}: {o.first.get('load_problem')}"
    return (f"{o.unexpected:,} quarantined", example,
            f"ingest would quarantine {o.unexpected:,} of {len(frame):,} records for a reason "
            f"the checks above do not name, e.g. {example}")


def _gold_key(o, frame, start, end):
    if not o.unexpected:
        return "0 without", None, "every record has a gold_id or a query to join a golden by"
    example = _who(o.first)
    return (f"{o.unexpected:,} without", example,
            f"{_plural(o.unexpected, 'record')} with neither gold_id nor query, e.g. {example}")


# A blocking check tolerates up to 1 % of an interval's records failing it: ingest quarantines
# each of those with its reason, and a whole interval is held back only when something is
# systematically wrong. Timestamps outside the interval are never tolerated: such records would
# land in another day's windows; nor is a file that cannot be read: ingest refuses it whole.
BAD_RECORD_TOLERANCE = 0.01
TOLERATED = 1 - BAD_RECORD_TOLERANCE

# The checks of the log files, blocking first, in the order a record meets them.
RULES = (
    _Rule("files readable", True,   # never tolerated: ingest refuses the file, record by none
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeInSet(
              column="file_read", value_set=[True]),
          _files_readable),
    _Rule("records parse", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeInSet(
              column="parsed", value_set=[True], mostly=TOLERATED),
          _records_parse),
    _Rule("request_id present", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToNotBeNull(
              column="request_id", row_condition=parsed, mostly=TOLERATED),
          _missing("a request_id")),
    _Rule("request_id unique", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeUnique(
              column="distinct_request_id", mostly=TOLERATED),
          _request_id_unique),
    _Rule("timestamp readable", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToNotBeNull(
              column="timestamp", row_condition=parsed, mostly=TOLERATED),
          _timestamp_readable),
    _Rule("timestamps in interval", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeBetween(
              column="timestamp", min_value=start, max_value=end, strict_max=True),
          _in_interval),
    _Rule("ranks >= 1", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeBetween(
              column="min_rank", min_value=1, mostly=TOLERATED),
          _at_least_one("min_rank", "rank")),
    _Rule("index_version present", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToNotBeNull(
              column="index_version", row_condition=parsed, mostly=TOLERATED),
          _missing("an index_version")),
    # a list of chunks (retrieved, or retrieval_steps), as ingest requires: one logged as text
    # (a database column of JSON kept as text) would have every record quarantined
    _Rule("retrieved present", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToNotBeNull(
              column="n_retrieved", row_condition=parsed, mostly=TOLERATED),
          _missing("a retrieved list")),
    _Rule("k >= 1", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeBetween(
              column="k", min_value=1, mostly=TOLERATED),
          _at_least_one("k", "logged k")),
    # whatever else ingest quarantines a record for (a missing query, a fractional k or rank,
    # a null chunk_id, ...): a green gate before every record is quarantined is no gate
    _Rule("records load", True,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeNull(
              column="load_problem", row_condition=parsed, mostly=TOLERATED),
          _records_load),
    _Rule("empty retrievals", False,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeBetween(
              column="n_retrieved", min_value=1, mostly=1 - MAX_EMPTY_SHARE),
          _empty_retrievals),
    _Rule("retrieved-list length", False,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeBetween(
              column="n_retrieved", min_value=0, max_value=MAX_RETRIEVED_LENGTH),
          _retrieved_length),
    _Rule("golden join key", False,
          lambda E, parsed, start, end: E.ExpectColumnValuesToBeInSet(
              column="has_gold_key", value_set=[True], row_condition=parsed),
          _gold_key),
)


# ------------------------------------------------------------------------- after loading

def check_loaded(con, start: datetime, end: datetime, *, paths: list[str] | None = None,
                 options: ReadOptions | None = None,
                 checked_at: datetime | None = None) -> QualityReport:
    """Warnings about [start, end) once its logs are loaded and scored, read from the
    warehouse: the share of looked-up requests that matched a golden, and the share of the
    records read from the interval's log files that are in quarantine. The interval's files
    are `paths` when given (as ingest was given them), else the files that delivered its
    requests and those under its days' `dt=YYYY-MM-DD` partitions; a file spanning several
    intervals counts whole in each. `options` say how `paths` were read (a table source's
    table, its format); default: as given."""
    from pipeline.state import days_of

    _check_interval(start, end)
    named = queries("quality_checks")
    window = {"start": start, "end": end}
    ((requests, looked_up, matched, unmatched),) = con.execute(
        named["golden_matches"], window).fetchall()
    if paths:
        sources = [d.source for d in _log_deliveries(
            paths, options or ReadOptions(start=start, end=end))]
    else:
        partitions = [f"dt={day:%Y-%m-%d}" for day in days_of(start, end)]
        sources = [row[0] for row in con.execute(
            named["interval_log_files"], {**window, "partitions": partitions}).fetchall()]
    ((files, n_read, n_quarantined, top_reason),) = con.execute(
        named["quarantine_share"], {"sources": sources}).fetchall()
    checks = (_golden_matches(requests, looked_up, matched, unmatched),
              _quarantined(files, n_read, n_quarantined, top_reason))
    return QualityReport(start, end, checks, LOADED, checked_at)


def _golden_matches(requests: int, looked_up: int, matched: int,
                    unmatched: str | None) -> Check:
    name = "matched to a golden"
    if not requests:
        return Check(name, False, True, "n/a", "no requests loaded for the interval")
    if not looked_up:
        return Check(name, False, False, "n/a",
                     f"none of the {requests:,} requests has been looked up in a gold set yet "
                     "(load one and score)")
    share = matched / looked_up
    ok = share >= MIN_MATCHED_SHARE
    detail = (f"{matched:,} of {looked_up:,} looked-up requests matched a golden ({share:.1%}; "
              f"a warning below {MIN_MATCHED_SHARE:.0%})")
    example = None if ok or unmatched is None else unmatched
    return Check(name, False, ok, f"{share:.3f}",
                 detail + (f", e.g. {example} matched none" if example else ""), example)


def _quarantined(files: int, n_read: int, n_quarantined: int, top_reason: str | None) -> Check:
    name = "quarantined share"
    if not n_read:
        return Check(name, False, True, "n/a", "no log records read for the interval")
    share = n_quarantined / n_read
    ok = share <= MAX_QUARANTINED_SHARE
    detail = (f"{n_quarantined:,} of {n_read:,} records read from {_plural(files, 'file')} are "
              f"quarantined ({share:.1%}; a warning above {MAX_QUARANTINED_SHARE:.0%})")
    if top_reason:
        detail += f", most often: {top_reason}"
    return Check(name, False, ok, f"{share:.3f}", detail, None if ok else top_reason)


# ------------------------------------------------------------------------- record and gate

def record(con, report: QualityReport, *, now: datetime | None = None) -> None:
    """Replace the interval's rows of the report's stage in quality_checks, in one
    transaction; `now` (else the report's checked_at, else the interval's end) stamps them."""
    checks = [c.as_dict() for c in report.checks]
    with transaction(con):
        run_script(con, "record_quality_checks", {
            "start": report.start, "end": report.end, "stage": report.stage,
            "checked_at": now or report.stamp, "checks": checks})


def gate(report: QualityReport) -> None:
    """Raise QualityGateFailed (one line) when a blocking check failed; else nothing."""
    if not report.passed:
        raise QualityGateFailed(report)
