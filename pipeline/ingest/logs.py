"""Request logs: load JSON Lines (optionally gzipped) and Parquet files into `requests`, one
transaction per file. Both formats are staged into one shape, `stage_requests`, built from the
field rows of fields.py; sql/validate_logs.sql then judges every record and sql/load_logs.sql
loads the good ones and quarantines the rest, so a record gets the same outcome whichever
format it came in. DuckDB's JSON reader parses a JSONL file once (sql/read_jsonl_records.sql),
and the few records it cannot tell everything of are staged from their lines' text; a file it
cannot number line by line goes the line way: DuckDB reads its lines (sql/read_jsonl_lines.sql),
the lines it rejects (undecodable bytes, over the size limit) are judged here from their bytes,
with their line numbers, and a file DuckDB cannot be trusted with is read here line by line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import state
from pipeline.errors import RecallwatchError
from pipeline.formats import LINE_COLUMN, PROBLEM_COLUMN, is_parquet, native_file
from pipeline.ingest import fields
from pipeline.ingest.files import (
    DEFAULT_MAX_RECORD_BYTES,
    JSONL_DELIMITER,
    LOG_SUFFIXES,
    MAX_DELIMITED,
    RAW_LIMIT,
    SCAN_BLOCK,
    FileResult,
    IngestSummary,
    LineScan,
    count_quarantined,
    json_lines_at,
    line_scan,
    previous_ingest,
    read_json_lines,
    record_file,
    unchanged,
    unreadable,
)
from pipeline.progress import Progress
from pipeline.sources import Delivery, LocalFile, ReadOptions, deliveries, scheme
from pipeline.warehouse import (
    insertion_order,
    quote_identifier,
    run_script,
    transaction,
    unordered,
)

# Lines handed to DuckDB at a time by the Python reader: large enough to amortise each insert,
# small enough to keep a big file's text out of Python memory.
_BATCH_LINES = 50_000
_BLANK = r"[ \t\n\r\x0b\f]*"   # a line of only what bytes.strip() strips is blank
# The most records of a JSONL file read from their line's text beside DuckDB's JSON reader
# (each such line is read here, in Python); a file with more goes the line way. The first
# SAMPLE records tell beforehand whether a file has that many at their rate.
MAX_EXACT = 10_000
SAMPLE = 2_000


def ingest_logs(con, paths: list[str], *, max_record_bytes: int | None = None,
                progress: Progress | None = None,
                options: ReadOptions | None = None) -> IngestSummary:
    """Load request logs from the given sources (local JSONL[.gz]/Parquet files, directories,
    globs; s3:// prefixes; postgresql:// tables: pipeline/sources), in any known format
    (pipeline/formats), one delivery per transaction. A record longer than max_record_bytes
    is quarantined; None: the limit each delivery was read with last (a raised one sticks to
    it, so that `run` does not read it again under the default), else the default."""
    options = options or ReadOptions()
    found = deliveries(paths, LOG_SUFFIXES, options)
    if any(scheme(p) in ("postgresql", "postgres") for p in paths):
        from pipeline.sources.postgres import NULL_DAY, with_undated_loaded

        found = with_undated_loaded(found, {row[0] for row in con.execute(
            "SELECT source FROM ingest_files WHERE kind = 'logs' AND ends_with(source, $tail)",
            {"tail": f"?day={NULL_DAY}"}).fetchall()})
    by_source = {d.source: d for d in found}
    results: dict[str, FileResult] = {}
    queue, read_again, outside = [d.source for d in found], set(), set()
    while queue:
        source = queue.pop(0)
        if progress:
            progress(f"ingest {_short(source)}", len(results), len(by_source))
        results[source], rejudge = _ingest_log_delivery(con, by_source[source],
                                                        max_record_bytes, options)
        # a delivery whose copies were quarantined as conflicting with requests this one no
        # longer delivers is read again, once: already read in this call, now; to come in
        # this call, when it comes up; given in no call of today (a scheduled run gives one
        # day's files), after the others, below
        again = [s for s in by_source if s in rejudge and s in results and s not in read_again]
        read_again.update(again)
        queue += again
        outside |= {s for s in rejudge if s not in by_source}
        if not queue:
            for other in sorted(outside):
                if _read_as_given(con, other, max_record_bytes, options):
                    by_source[other] = LocalFile(Path(other))
                    read_again.add(other)
                    queue.append(other)
            outside.clear()
    if progress:
        progress("ingest", len(by_source), len(by_source))
    return IngestSummary(tuple(results[source] for source in by_source))


def _options_text(max_record_bytes: int, options: ReadOptions) -> str:
    """How a delivery is read, recorded with it: the size limit and the format change which
    records load, so a change re-reads it."""
    text = f"max_record_bytes={max_record_bytes}"
    if options.fmt or options.columns:
        text += ";" + options.fingerprint()
    return text


def _read_as_given(con, source: str, max_record_bytes: int | None,
                   options: ReadOptions) -> bool:
    """Whether a delivery outside this call can be read again here as it was read before: a
    local file still there, recorded with the options of this call. Another (an s3:// object,
    a table's rows, a file read with other options) waits for its next ingest, marked to be
    read again (sql/rejudge_conflicts.sql)."""
    if scheme(source) is not None or not Path(source).is_file():
        return False
    previous = previous_ingest(con, "logs", source, None)
    return previous is not None and previous.options == _options_text(
        _record_limit(max_record_bytes, previous), options)


def _record_limit(given: int | None, previous) -> int:
    """The record size limit of a delivery: the one given; else the one it was read with last
    (recorded in its options), else the default."""
    if given is not None:
        return given
    return (_kept_limit(previous.options) if previous else None) or DEFAULT_MAX_RECORD_BYTES


def _kept_limit(options_text: str | None) -> int | None:
    found = re.match(r"max_record_bytes=(\d+)", options_text or "")
    return int(found.group(1)) if found else None


def kept_record_limits(con) -> dict[str, int]:
    """The record size limit each log delivery was read with last, by source (what the
    quality gate reads a delivery with when no limit is given, as ingest does)."""
    return {source: limit for source, options in con.execute(
                "SELECT source, options FROM ingest_files WHERE kind = 'logs'").fetchall()
            if (limit := _kept_limit(options)) is not None}


def _short(source: str) -> str:
    """The last two parts of a source's name, for progress lines."""
    return "/".join(source.rstrip("/").split("/")[-2:])


def _ingest_log_delivery(con, delivery: Delivery, max_record_bytes: int | None,
                         options: ReadOptions) -> tuple[FileResult, set[str]]:
    """Load one delivery in one transaction; returns its result and the other deliveries whose
    quarantined conflicting copies must be judged again."""
    source = delivery.source
    digest = delivery.digest()
    previous = previous_ingest(con, "logs", source, None)
    max_record_bytes = _record_limit(max_record_bytes, previous)
    options_text = _options_text(max_record_bytes, options)
    skipped = unchanged(previous, source, digest, options_text)
    if skipped:
        return skipped, set()
    params = {"source": source, "kind": "logs", "version": None, "raw_limit": RAW_LIMIT}
    with delivery.fetch() as fetched, native_delivery(delivery, fetched, options,
                                                                 max_record_bytes) as (
            path, line_column, records):
        with transaction(con):
            # the days this delivery brought requests to, before and after, are scored anew
            days = state.source_days(con, source) if previous else []
            if previous:
                run_script(con, "rejudge_candidates", params)
                run_script(con, "forget_source", params)
            n_read = stage_log_file(con, path, max_record_bytes, line_column=line_column,
                                    shown_as=source, json_records=records)
            parquet = not records and (bool(line_column) or is_parquet(path))
            try:
                n_loaded = load_staged(con, params, in_parts=parquet)
                if parquet:
                    _fill_parquet_raw(con, params, path, line_column)
            except duckdb.Error as exc:
                # a Parquet file is read as it is judged (a view): a footer that reads over
                # pages that do not (corrupt, or text that is not UTF-8) fails here, not when
                # it is staged; it is the file's problem, its transaction rolled back. DuckDB's
                # reader says so as invalid input, an I/O error or a bare Error ("Out of
                # buffer"); anything else (out of memory) is not the file's
                if not parquet or not (type(exc) is duckdb.Error or isinstance(
                        exc, (duckdb.InvalidInputException, duckdb.IOException))):
                    raise
                raise unreadable(source, exc) from None
            n_quarantined = count_quarantined(con, "logs", source, None)
            if previous:
                # scores removed as scoring removes them; a day left with none is not
                # aggregated again, so what its window metrics fed is voided here too
                voided = [day for (day,) in run_script(con, "void_changed_scores", params)]
                state.invalidate(con, "score", voided)
                state.invalidate(con, "aggregate", voided)
            rejudge = ({row[0] for row in run_script(con, "rejudge_conflicts")} if previous
                       else set())
            state.invalidate(con, "ingest", days + state.source_days(con, source))
            return record_file(con, "logs", source, None, digest, options_text, n_read,
                               n_loaded, n_quarantined), rejudge


def _fill_parquet_raw(con, params: dict, path: Path, line_column: str | None) -> None:
    """Give the file's quarantined rows their record as JSON: sql/fill_parquet_raw.sql reads
    them from the table macro parquet_raw_rows, made here from the file's schema. Its columns
    are read by position under names of our own (c1, c2, ...): a column of the file may bear
    any name the query would use (a column `r` hid the row of a reader aliased r), and DuckDB
    renames one whose name differs from an earlier one's only in case (K and k_1)."""
    schema = pq.read_schema(path)
    read_names = [row[0] for row in con.execute(
        "DESCRIBE SELECT * FROM read_parquet($path, hive_partitioning = false)",
        {"path": str(path)}).fetchall()]
    own = (list(zip(schema.names, schema.types, strict=True))
           if len(schema) == len(read_names) else [(name, None) for name in read_names])
    names = [name for name, _ in own]
    refs = [f"c{i + 1}" for i in range(len(own))]
    bind = fields.ViewValues("parquet_raw")
    row = fields.parquet_row_json(
        [(name, ref, arrow_type) for (name, arrow_type), ref in zip(own, refs, strict=True)],
        bind) + "::VARCHAR"
    if line_column:
        # a converted file: the record as its input gave it (column `input`), else the row
        line = f"{refs[names.index(line_column)]}::BIGINT"
        raw = f"coalesce({refs[names.index('input')]}, {row})" if "input" in names else row
    else:
        line, raw = "file_row_number + 1", row
    source = bind(str(path))
    bind.set_on(con)
    con.execute(f"CREATE OR REPLACE TEMP MACRO parquet_raw_rows() AS TABLE "
                f"SELECT {line} AS line, {raw} AS raw "
                f"FROM read_parquet({source}, hive_partitioning = false) AS src({', '.join(refs)})")
    run_script(con, "fill_parquet_raw", params)


def part_rows(con) -> int:
    """Rows of a Parquet file judged and loaded at a time: as many as the memory limit holds
    without spilling (a judged request of 20 chunks takes some 1.3 KiB; 2 KiB leaves room),
    never fewer than 100,000."""
    ((limit,),) = con.execute(
        "SELECT parse_formatted_bytes(current_setting('memory_limit'))").fetchall()
    return max(100_000, limit // (2 << 10))


def load_staged(con, params: dict, *, in_parts: bool) -> int:
    """Judge the staged file (sql/validate_logs.sql) and load it (sql/load_logs.sql); returns
    how many records loaded. A Parquet file (`in_parts`) longer than part_rows is judged and
    loaded a part of its rows at a time, so that the judged records of one part, never the
    whole file's, are held at once: the records whose request_id the file holds more than
    once or is already loaded (stage_candidates) are set aside and judged together last, as
    one file would judge them, so every record gets the outcome it gets in one piece."""
    validate = fields.validate_parameters()
    rows = part_rows(con)
    first, last = (con.execute("SELECT min(file_row), max(file_row) FROM stage_file").fetchall()[0]
                   if in_parts else (0, 0))
    if not in_parts or last is None or last - first < rows:
        return _judge_and_load(con, params, validate)
    run_script(con, "stage_candidates")
    loaded = 0
    for start in range(first, last + 1, rows):
        con.execute("SET VARIABLE stage_part_start = $start", {"start": start})
        con.execute("SET VARIABLE stage_part_end = $end", {"end": start + rows})
        con.execute(
            "CREATE OR REPLACE TEMP VIEW stage_requests AS SELECT * EXCLUDE (file_row) "
            "FROM stage_file WHERE file_row >= getvariable('stage_part_start') "
            "AND file_row < getvariable('stage_part_end') AND NOT coalesce("
            "logged.request_id IN (SELECT request_id FROM stage_candidates), false)")
        loaded += _judge_and_load(con, params, validate)
    if con.execute("SELECT 1 FROM stage_candidates LIMIT 1").fetchall():
        con.execute(
            "CREATE OR REPLACE TEMP VIEW stage_requests AS SELECT * EXCLUDE (file_row) "
            "FROM stage_file "
            "WHERE logged.request_id IN (SELECT request_id FROM stage_candidates)")
        loaded += _judge_and_load(con, params, validate)
    con.execute("CREATE OR REPLACE TEMP VIEW stage_requests AS "
                "SELECT * EXCLUDE (file_row) FROM stage_file")
    return loaded


def _judge_and_load(con, params: dict, validate: dict) -> int:
    run_script(con, "validate_logs", validate)
    staged = {row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary "
        "AND table_name IN ('stage_lines', 'stage_lines_file')").fetchall()}
    if "stage_lines" in staged:
        # a JSONL file's records are judged (stage_checked): they are not held while the
        # judged ones are loaded (a Parquet file's are a view, read again part by part)
        drop_staged(con, keep=("stage_lines_file",))
    # requests are written in no particular order (spread over every thread): each read of
    # them that needs an order says ORDER BY
    with unordered(con):
        run_script(con, "load_logs", params)
        # a JSONL file's text: its quarantined lines' is looked up, then it is not kept (nor
        # held while the requests are written)
        if "stage_lines_file" in staged:
            _read_quarantined_lines(con, params)
        if "stage_lines" in staged:
            run_script(con, "fill_jsonl_raw", params)
            con.execute("DROP TABLE stage_lines")
        ((n_loaded,),) = run_script(con, "load_requests", params)
    return n_loaded


@contextmanager
def native_delivery(delivery: Delivery, fetched: Path, options: ReadOptions,
                    max_record_bytes: int) -> Iterator[tuple[Path, str | None, bool]]:
    """A fetched delivery as stage_log_file reads it: (path, line column, JSON records or
    not). A table source's rows come as native JSON records with their lines
    (Delivery.json_records) and are staged as they are; any other file goes through its
    format (pipeline/formats)."""
    if getattr(delivery, "json_records", False):
        yield fetched, LINE_COLUMN, True
        return
    with native_file(fetched, options, max_record_bytes) as (path, line_column):
        yield path, line_column, False


def stage_log_file(con, path: Path, max_record_bytes: int, *, line_column: str | None = None,
                   shown_as: str | None = None, json_records: bool = False) -> int:
    """Stage one local log file in the native format into stage_requests / stage_rejects and
    return how many records it holds. `line_column`: a Parquet column holding each record's
    line in the input it was converted from. A file DuckDB cannot read is the file's problem,
    named as `shown_as` (the source the user gave); running out of memory is not.
    `json_records`: the file holds native JSON records with their lines (stage_json_records)."""
    drop_staged(con)
    con.execute("DROP TABLE IF EXISTS stage_lines")
    try:
        if json_records:
            return stage_json_records(con, path, max_record_bytes)
        if line_column or is_parquet(path):
            return stage_parquet(con, path, line_column=line_column)
        return stage_jsonl(con, path, max_record_bytes)
    except duckdb.OutOfMemoryException:
        raise  # not the file's fault: the CLI names the memory setting
    except duckdb.Error as exc:
        raise unreadable(shown_as or path, exc) from None


# What a staged file leaves: the records (a view for Parquet and for JSONL read by DuckDB's JSON
# reader, a table for JSONL read by lines) and what they are read from.
_STAGED = ("stage_requests", "stage_file", "stage_numbered", "stage_exact_requests",
           "stage_records", "stage_exact", "stage_lines_file")


def drop_staged(con, *, keep: tuple[str, ...] = ()) -> None:
    """Drop the staged records of a file (all but `keep`), views first."""
    names = [name for name in _STAGED if name not in keep]
    for kind, name in con.execute(
            "SELECT 'VIEW', view_name FROM duckdb_views() WHERE temporary "
            "AND list_contains($names, view_name) "
            "UNION ALL SELECT 'TABLE', table_name FROM duckdb_tables() WHERE temporary "
            "AND list_contains($names, table_name) ORDER BY 1 DESC, 2",
            {"names": names}).fetchall():
        con.execute(f"DROP {kind} {quote_identifier(name)}")


def stage_jsonl(con, path: Path, max_record_bytes: int) -> int:
    """Stage a JSONL file into stage_requests / stage_rejects; lines that are not UTF-8 or are
    over the size limit never reach SQL and join stage_rejects here. Returns the number of
    non-blank lines.

    Most files are parsed once by DuckDB's JSON reader (_stage_records). A file it cannot
    number line by line (blank lines) or one of many odd records goes the line way:
    DuckDB reads the lines into a table (sql/read_jsonl_lines.sql), and
    stage_logs_jsonl.sql parses them from it on every core: a view over its reader would
    number the lines on one core, and parsing in the same pass then runs on one core too
    (measured slower on 1M and 3M lines). The few lines it rejects (not UTF-8, over the
    limit, holding the delimiter byte) are read again here and judged as read_json_lines
    judges them. The whole file goes through read_json_lines instead when DuckDB cannot be
    trusted with it, as line_scan tells before DuckDB reads (a failed read would abort the
    file's transaction): a line over the limit and longer than SCAN_BLOCK (DuckDB holds such
    a line whole, several times over, and drops one longer than its read buffer without a
    word), line endings its strict reader refuses (CRLF and LF mixed, a bare CR), many lines
    holding the delimiter byte; or, after it read, lines that do not add up to the count of
    line_scan."""
    scan = line_scan(path)
    staged = _stage_records(con, path, max_record_bytes, scan)
    if staged is None:
        rejects = stage_json_lines(con, path, max_record_bytes, scan)
        ((n_staged,),) = con.execute("SELECT count(*) FROM stage_lines").fetchall()
        run_script(con, "stage_logs_jsonl", fields.jsonl_parameters())
    else:
        n_staged, rejects = staged
    if rejects:
        batch = pa.table({
            "line": pa.array([r[0] for r in rejects], pa.int64()),
            "raw": pa.array([r[2] for r in rejects], pa.string()),
            "reason": pa.array([r[1] for r in rejects], pa.string()),
        })
        con.register("python_rejects", batch)
        con.execute("INSERT INTO stage_rejects SELECT line, raw, reason FROM python_rejects")
        con.unregister("python_rejects")
    return n_staged + len(rejects)


def stage_json_lines(con, path: Path, max_record_bytes: int,
                     scan: LineScan | None = None) -> list[tuple[int, str, str]]:
    """Fill stage_lines(line, text) with the non-blank lines of a JSON Lines file, numbered as
    in the file: by DuckDB where it can be trusted with the file, else line by line. Returns
    the (line, reason, raw) of the lines that cannot be staged (not UTF-8, over the limit)."""
    scan = scan or line_scan(path)
    rejects = _read_lines_in_sql(con, path, max_record_bytes, scan)
    return rejects if rejects is not None else _read_lines_in_python(con, path,
                                                                     max_record_bytes)


def _stage_records(con, path: Path, max_record_bytes: int, scan: LineScan,
                   ) -> tuple[int, list[tuple[int, str, str]]] | None:
    """Stage a JSONL file from one parse by DuckDB's JSON reader (sql/read_jsonl_records.sql):
    each record's fields come as JSON texts, typed and staged as stage_logs_jsonl.sql stages a
    line, and the few records that parse cannot tell everything of (stage_exact) are read
    from their lines' text and staged by stage_logs_jsonl.sql itself. Returns (lines staged,
    lines rejected), or None, staging nothing, when the file must go the line way: a line
    over the size limit could be among its lines (the line scan measures only lines longer
    than SCAN_BLOCK), its line endings are mixed, the reader did not return one row per line
    (blank lines), or more than MAX_EXACT records need their text (as its first SAMPLE records
    tell before the whole file is read, or the whole file after). A quarantined record's text
    is read from the file after the load (_read_quarantined_lines)."""
    if (not scan.lines or max_record_bytes < SCAN_BLOCK or not scan.one_line_ending
            or any(size > max_record_bytes for _, size in scan.long_lines)):
        return None
    jsonl = fields.jsonl_parameters()
    read = {"path": str(path), "columns": fields.jsonl_record_columns(),
            "max_object_size": max_record_bytes + SCAN_BLOCK, "leaf_items": jsonl["leaf_items"]}
    ((sampled, odd),) = run_script(con, "sample_jsonl_records", {**read, "sample": SAMPLE})
    if odd * scan.lines > MAX_EXACT * sampled:   # as many in the whole file: too many
        return None
    # rowid numbers the rows in the order they were read only when that order is kept
    with insertion_order(con, keep=True):
        ((n_rows, n_exact),) = run_script(con, "read_jsonl_records", read)
    if n_rows != scan.lines or n_exact > MAX_EXACT:
        _drop_records(con)
        return None
    con.execute("CREATE OR REPLACE TEMP TABLE stage_lines (line BIGINT, text VARCHAR)")
    exact = [row[0] for row in con.execute("SELECT line FROM stage_exact ORDER BY line")
             .fetchall()]
    rejects = _stage_lines_at(con, path, exact, max_record_bytes)
    ((n_exact_staged,),) = con.execute("SELECT count(*) FROM stage_lines").fetchall()
    run_script(con, "stage_logs_jsonl", jsonl)
    con.execute("ALTER TABLE stage_requests RENAME TO stage_exact_requests")
    # a view: the conversions run as validate_logs.sql reads it, never written to a table
    bind = fields.ViewValues("stage_records")
    types, logged = fields.jsonl_record_request()
    rules = (bind(jsonl["request_rules"]), bind(jsonl["item_rules"]), bind(jsonl["item_allowed"]))
    bind.set_on(con)
    con.execute(f"""
        CREATE TEMP VIEW stage_requests AS
        SELECT * FROM stage_exact_requests
        UNION ALL BY NAME
        SELECT line, NULL::VARCHAR AS raw,
               first_type_error({types}, {rules[0]}) AS type_error,
               {logged} AS logged,
               'list' AS shape,
               1::INTEGER AS n_steps,
               list_transform(retrieved, lambda x, i:
                   leaf_item(x, 1, i, {rules[1]}, {rules[2]})) AS items,
               len(retrieved) AS k_default,
               NULL::VARCHAR AS json_error
        FROM stage_numbered
        WHERE line NOT IN (SELECT line FROM stage_exact)""")
    # the file a quarantined record's text is read from after the load
    con.execute("CREATE OR REPLACE TEMP TABLE stage_lines_file AS "
                "SELECT $path AS path, $limit AS max_record_bytes",
                {"path": str(path), "limit": max_record_bytes})
    return n_rows - n_exact + n_exact_staged, rejects


def _drop_records(con) -> None:
    con.execute("DROP VIEW stage_numbered")
    con.execute("DROP TABLE stage_exact")
    con.execute("DROP TABLE stage_records")


def _stage_lines_at(con, path: Path, numbers: list[int],
                    max_record_bytes: int) -> list[tuple[int, str, str]]:
    """Append the given lines' text to stage_lines; returns the (line, reason, raw) of those
    that cannot be staged. A blank line is neither."""
    return _append_judged(con, json_lines_at(path, numbers, max_record_bytes))


def _append_judged(con, judged: Iterator[tuple[int, str | None, str | None, str | None]],
                   ) -> list[tuple[int, str, str]]:
    """Append the lines read_json_lines (or json_lines_at) judged stageable to stage_lines, a
    batch at a time; returns the (line, reason, raw) of the others."""
    rejects, lines, texts = [], [], []
    for number, text, reason, raw in judged:
        if text is None:
            rejects.append((number, reason, raw))
            continue
        lines.append(number)
        texts.append(text)
        if len(lines) >= _BATCH_LINES:
            _append_lines(con, lines, texts)
            lines, texts = [], []
    if lines:
        _append_lines(con, lines, texts)
    return rejects


def _read_quarantined_lines(con, params: dict) -> None:
    """After a load staged by _stage_records, append to stage_lines the text of every
    quarantined record of the file that is not there yet, for fill_jsonl_raw.sql."""
    found = con.execute("SELECT path, max_record_bytes FROM stage_lines_file").fetchall()
    con.execute("DROP TABLE stage_lines_file")
    missing = [row[0] for row in con.execute(
        "SELECT line FROM quarantine WHERE kind = $kind AND source = $source AND raw IS NULL "
        "AND line NOT IN (SELECT line FROM stage_lines) ORDER BY line",
        {"kind": params["kind"], "source": params["source"]}).fetchall()]
    if missing:
        (path, max_record_bytes), = found
        _stage_lines_at(con, Path(path), missing, max_record_bytes)


def _read_lines_in_sql(con, path: Path, max_record_bytes: int, scan: LineScan,
                       ) -> list[tuple[int, str, str]] | None:
    """Fill stage_lines by DuckDB; returns the (line, reason, raw) of the lines that cannot be
    staged, or None when the Python reader must read this file."""
    if (any(size > max_record_bytes for _, size in scan.long_lines)
            or len(scan.delimited) > MAX_DELIMITED or not scan.one_line_ending):
        return None
    ((n_lines,),) = run_script(con, "read_jsonl_lines", {
        "path": str(path), "delimiter": JSONL_DELIMITER.decode(), "blank": _BLANK,
        # DuckDB counts a line without its newline (one or two bytes) against the limit
        "max_line_size": max(max_record_bytes - 2, 1)})
    rejected = [row[0] for row in con.execute(
        "SELECT DISTINCT line FROM stage_line_errors ORDER BY line").fetchall()]
    if n_lines + len(rejected) != scan.lines:
        return None
    if scan.delimited:   # returned cut short (or as blank): judged from their bytes instead
        _drop_lines(con, scan.delimited)
    return _stage_lines_at(con, path, rejected + list(scan.delimited), max_record_bytes)


def _drop_lines(con, numbers: tuple[int, ...]) -> None:
    con.register("dropped_lines", pa.table({"line": pa.array(numbers, pa.int64())}))
    con.execute("DELETE FROM stage_lines WHERE line IN (SELECT line FROM dropped_lines)")
    con.unregister("dropped_lines")


def _read_lines_in_python(con, path: Path, max_record_bytes: int) -> list[tuple[int, str, str]]:
    """Fill stage_lines line by line with read_json_lines; returns the lines it rejected."""
    con.execute("CREATE OR REPLACE TEMP TABLE stage_lines (line BIGINT, text VARCHAR)")
    return _append_judged(con, read_json_lines(path, max_record_bytes))


def stage_json_records(con, path: Path, max_record_bytes: int) -> int:
    """Stage a JSON records file, a Parquet file of `line` (BIGINT) and `record` (VARCHAR: one
    native log record as a JSON object), as a table source gives its rows
    (pipeline/sources/postgres.py): each record is staged as a JSONL line with that line, by
    stage_logs_jsonl.sql, so it is judged exactly as in a file; a record over the size limit
    joins stage_rejects."""
    params = {"path": str(path), "limit": max_record_bytes}
    con.execute("CREATE OR REPLACE TEMP TABLE stage_lines AS SELECT line::BIGINT AS line, "
                "record AS text FROM read_parquet($path, hive_partitioning = false) "
                "WHERE record IS NOT NULL AND strlen(record) <= $limit", params)
    run_script(con, "stage_logs_jsonl", fields.jsonl_parameters())
    large = con.execute("SELECT line::BIGINT, strlen(record), left(record, $raw) "
                        "FROM read_parquet($path, hive_partitioning = false) "
                        "WHERE strlen(record) > $limit",
                        {**params, "raw": RAW_LIMIT}).fetchall()
    for line, size, raw in large:
        con.execute("INSERT INTO stage_rejects VALUES ($line, $raw, $reason)", {
            "line": line, "raw": raw,
            "reason": f"record too large: {size} bytes (limit {max_record_bytes}; "
                      "raise it with --max-record-bytes)"})
    return con.execute("SELECT count(*) FROM read_parquet($path, hive_partitioning = false)",
                       {"path": str(path)}).fetchall()[0][0]


def _append_lines(con, lines: list[int], texts: list[str]) -> None:
    batch = pa.table({"line": pa.array(lines, pa.int64()), "text": pa.array(texts, pa.string())})
    con.register("line_batch", batch)
    con.execute("INSERT INTO stage_lines SELECT line, text FROM line_batch")
    con.unregister("line_batch")


def _item_struct(arrow_type: pa.DataType | None, depth: int) -> pa.StructType | None:
    """The struct type of items for a list (depth 1) or list of lists (depth 2), else None."""
    for _ in range(depth):
        if not fields.is_list(arrow_type):
            return None
        arrow_type = arrow_type.value_type
    return arrow_type if pa.types.is_struct(arrow_type) else None


def _list_shape(types: dict[str, pa.DataType], ret: str, bind) -> str:
    """The shape of a Parquet record's `retrieved`, or the reason JSON Lines gives it: a list of
    items that are no objects is judged by its first item (an empty one is a list; pyarrow
    types a column of empty lists list<null>)."""
    arrow_type = types.get("retrieved")
    if _item_struct(arrow_type, 1) is not None:
        return "'list'"
    if not fields.is_list(arrow_type):
        return bind("retrieved is not a list")
    not_objects = bind("retrieved item 1 is not an object")
    return f"CASE WHEN len({ret}) = 0 THEN 'list' ELSE {not_objects} END"


def _steps_shape(types: dict[str, pa.DataType], steps: str, ret: str, bind) -> str:
    """The shape of a Parquet record's non-null `retrieval_steps`, or the reason JSON Lines
    gives it, in the order sql/stage_logs_jsonl.sql judges them."""
    arrow_type = types.get("retrieval_steps")
    if not fields.is_list(arrow_type):
        return bind("retrieval_steps is not a list")
    cases = [f"WHEN {ret} IS NOT NULL THEN {bind(fields.BOTH_LISTS)}"]
    if not fields.is_list(arrow_type.value_type):   # steps that are no lists, or no step at all
        cases.append(f"WHEN len({steps}) > 0 THEN {bind(fields.STEPS_NOT_LISTS)}")
    else:
        cases.append(f"WHEN list_contains(list_transform({steps}, lambda s: s IS NULL), true) "
                     f"THEN {bind(fields.STEPS_NOT_LISTS)}")
        if _item_struct(arrow_type, 2) is None:   # items that are no objects: the first one
            nonempty = f"list_transform({steps}, lambda s: len(s) > 0)"
            cases.append(f"WHEN list_contains({nonempty}, true) THEN 'retrieval step ' || "
                         f"list_position({nonempty}, true) || ' item 1 is not an object'")
    return f"CASE {' '.join(cases)} ELSE 'steps' END"


def stage_parquet(con, path: Path, *, line_column: str | None = None) -> int:
    """Stage a Parquet log file as the view stage_requests, the shape stage_logs_jsonl.sql
    gives JSONL, over the view stage_file (the same with each row's number, file_row, by which
    load_staged reads a big file in parts). Columns are looked up in the file's schema, so a
    missing optional column reads as NULL and a column of the wrong type is a per-record
    reason, not a crash. A record's line is its row, or the value of `line_column` (a file
    converted from another format)."""
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise RecallwatchError(f"{path}: not a readable Parquet file ({exc}).") from None
    converted_problem = bool(line_column) and PROBLEM_COLUMN in schema.names
    types = {f.name: f.type for f in schema if not pa.types.is_null(f.type)
             and f.name != line_column and not (converted_problem and f.name == PROBLEM_COLUMN)}
    # DuckDB reads a column whose name differs from an earlier one's only in case as name_1:
    # each column by the name DuckDB gives it, in the file's order
    read_names = [row[0] for row in con.execute(
        "DESCRIBE SELECT * FROM read_parquet($path, hive_partitioning = false)",
        {"path": str(path)}).fetchall()]
    columns = (dict(zip(schema.names, read_names, strict=True))
               if len(read_names) == len(schema.names)
               else {name: name for name in schema.names})

    def q(name: str) -> str:
        return quote_identifier(columns.get(name, name))

    # a view: the file is read as validate_logs.sql and load_logs.sql read the view, never
    # copied into a staging table first
    bind = fields.ViewValues("stage_requests")
    logged, type_error = fields.parquet_request(types, columns, bind)

    ret = q("retrieved") if "retrieved" in types else "NULL"
    steps = q("retrieval_steps") if "retrieval_steps" in types else "NULL"
    ret_struct = _item_struct(types.get("retrieved"), 1)
    steps_struct = _item_struct(types.get("retrieval_steps"), 2)
    shape = f"""CASE WHEN {steps} IS NOT NULL THEN {_steps_shape(types, steps, ret, bind)}
        WHEN {ret} IS NULL THEN {bind(fields.MISSING_LIST)}
        ELSE {_list_shape(types, ret, bind)} END"""
    items, k_default = ["CASE"], ["CASE"]
    if ret_struct is not None:
        items.append(f"WHEN {shape} = 'list' THEN list_transform({ret}, "
                     f"lambda x, i: {fields.parquet_item(ret_struct, '1', bind)})")
        k_default.append(f"WHEN {shape} = 'list' THEN len({ret})")
    if steps_struct is not None:
        items.append(f"WHEN {shape} = 'steps' THEN flatten(list_transform({steps}, "
                     f"lambda s, si: list_transform(s, "
                     f"lambda x, i: {fields.parquet_item(steps_struct, 'si', bind)})))")
        k_default.append(f"WHEN {shape} = 'steps' THEN "
                         f"list_max(list_transform({steps}, lambda s: len(s)))")
    if fields.is_list(types.get("retrieval_steps")):
        n_steps = f"CASE WHEN {shape} = 'steps' THEN len({steps}) ELSE 1 END::INTEGER"
    else:
        n_steps = "1"
    selects = [
        f"{q(line_column)}::BIGINT AS line" if line_column else "file_row_number + 1 AS line",
        "NULL::VARCHAR AS raw",   # filled for quarantined rows only, by fill_parquet_raw.sql
        # a file converted from another format may say why a record could not be converted
        (f"coalesce({q(PROBLEM_COLUMN)}, {type_error}) AS type_error"
         if converted_problem else f"{type_error} AS type_error"),
        f"{logged} AS logged",
        f"{shape} AS shape",
        f"{n_steps} AS n_steps",
        " ".join(items) + " END AS items" if len(items) > 1 else "NULL AS items",
        " ".join(k_default) + " END AS k_default" if len(k_default) > 1
        else "NULL::BIGINT AS k_default",
    ]
    # the file's own row (from 0) besides the record's line: parts of a big file are read by
    # it, and the reader skips the row groups outside a part (load_staged)
    selects.append("file_row_number AS file_row")
    statement = ("CREATE OR REPLACE TEMP VIEW stage_file AS SELECT " + ",\n".join(selects)
                 + f" FROM read_parquet({bind(str(path))}, file_row_number = true, "
                   "hive_partitioning = false)")
    bind.set_on(con)
    con.execute(statement)
    con.execute("CREATE OR REPLACE TEMP VIEW stage_requests AS "
                "SELECT * EXCLUDE (file_row) FROM stage_file")
    con.execute("CREATE OR REPLACE TEMP TABLE stage_rejects "
                "(line BIGINT, raw VARCHAR, reason VARCHAR)")
    return con.execute("SELECT count(*) FROM read_parquet($path, hive_partitioning = false)",
                       {"path": str(path)}).fetchall()[0][0]
