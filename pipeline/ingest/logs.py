"""Request logs: load JSON Lines (optionally gzipped) and Parquet files into `requests`, one
transaction per file. Both formats are staged into one shape, `stage_requests`, built from the
field rows of fields.py; sql/validate_logs.sql then judges every record and sql/load_logs.sql
loads the good ones and quarantines the rest, so a record gets the same outcome whichever
format it came in. JSONL lines are read here, line by line, so that undecodable bytes and huge
lines are caught with their line number before SQL sees them."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import state
from pipeline.errors import RecallwatchError
from pipeline.formats import is_parquet, native_file
from pipeline.ingest import fields
from pipeline.ingest.files import (
    DEFAULT_MAX_RECORD_BYTES,
    LOG_SUFFIXES,
    RAW_LIMIT,
    FileResult,
    IngestSummary,
    count_quarantined,
    previous_ingest,
    read_json_lines,
    record_file,
    unchanged,
    unreadable,
)
from pipeline.progress import Progress
from pipeline.sources import Delivery, ReadOptions, deliveries
from pipeline.warehouse import quote_identifier, run_script, transaction

# Lines handed to DuckDB at a time: large enough to amortise each insert, small enough to keep
# a big file's text out of Python memory.
_BATCH_LINES = 50_000


def ingest_logs(con, paths: list[str], *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                progress: Progress | None = None,
                options: ReadOptions | None = None) -> IngestSummary:
    """Load request logs from the given sources (local JSONL[.gz]/Parquet files, directories,
    globs; s3:// prefixes; postgresql:// tables: pipeline/sources), in any known format
    (pipeline/formats), one delivery per transaction."""
    options = options or ReadOptions()
    found = deliveries(paths, LOG_SUFFIXES, options)
    by_source = {d.source: d for d in found}
    results: dict[str, FileResult] = {}
    queue, read_again = [d.source for d in found], set()
    while queue:
        source = queue.pop(0)
        if progress:
            progress(f"ingest {_short(source)}", len(results), len(found))
        results[source], rejudge = _ingest_log_delivery(con, by_source[source],
                                                        max_record_bytes, options)
        # a delivery whose copies were quarantined as conflicting with requests this one no
        # longer delivers is read again (already read in this call: now, once; else when it
        # comes up or on its next ingest)
        again = [s for s in by_source if s in rejudge and s in results and s not in read_again]
        read_again.update(again)
        queue += again
    if progress:
        progress("ingest", len(found), len(found))
    return IngestSummary(tuple(results[d.source] for d in found))


def _short(source: str) -> str:
    """The last two parts of a source's name, for progress lines."""
    return "/".join(source.rstrip("/").split("/")[-2:])


def _ingest_log_delivery(con, delivery: Delivery, max_record_bytes: int,
                         options: ReadOptions) -> tuple[FileResult, set[str]]:
    """Load one delivery in one transaction; returns its result and the other deliveries whose
    quarantined conflicting copies must be judged again."""
    source = delivery.source
    digest = delivery.digest()
    # the size limit and the format change which records load, so a change re-reads it
    options_text = f"max_record_bytes={max_record_bytes}"
    if options.fmt or options.columns:
        options_text += ";" + options.fingerprint()
    previous = previous_ingest(con, "logs", source, None)
    skipped = unchanged(previous, source, digest, options_text)
    if skipped:
        return skipped, set()
    params = {"source": source, "kind": "logs", "version": None, "raw_limit": RAW_LIMIT}
    with delivery.fetch() as fetched, native_file(fetched, options) as (path, line_column):
        with transaction(con):
            # the days this delivery brought requests to, before and after, are scored anew
            days = state.source_days(con, source) if previous else []
            if previous:
                run_script(con, "rejudge_candidates", params)
                run_script(con, "forget_source", params)
            n_read = stage_log_file(con, path, max_record_bytes, line_column=line_column,
                                    shown_as=source)
            run_script(con, "validate_logs", fields.validate_parameters())
            ((n_loaded,),) = run_script(con, "load_logs", params)
            if line_column or is_parquet(path):
                run_script(con, "fill_parquet_raw", {**params, "path": str(path),
                                                     "line_column": bool(line_column)})
            n_quarantined = count_quarantined(con, "logs", source, None)
            rejudge = ({row[0] for row in run_script(con, "rejudge_conflicts")} if previous
                       else set())
            state.invalidate(con, "ingest", days + state.source_days(con, source))
            return record_file(con, "logs", source, None, digest, options_text, n_read,
                               n_loaded, n_quarantined), rejudge


def stage_log_file(con, path: Path, max_record_bytes: int, *, line_column: str | None = None,
                   shown_as: str | None = None) -> int:
    """Stage one local log file in the native format into stage_requests / stage_rejects and
    return how many records it holds. `line_column`: a Parquet column holding each record's
    line in the input it was converted from. A file DuckDB cannot read is the file's problem,
    named as `shown_as` (the source the user gave); running out of memory is not."""
    try:
        if line_column or is_parquet(path):
            return stage_parquet(con, path, line_column=line_column)
        return stage_jsonl(con, path, max_record_bytes)
    except duckdb.OutOfMemoryException:
        raise  # not the file's fault: the CLI names the memory setting
    except duckdb.Error as exc:
        raise unreadable(shown_as or path, exc) from None


def stage_jsonl(con, path: Path, max_record_bytes: int) -> int:
    """Stage the lines of a JSONL file into stage_lines and run stage_logs_jsonl.sql; lines
    that are not UTF-8 or are over the size limit never reach SQL and join stage_rejects
    here."""
    con.execute("CREATE OR REPLACE TEMP TABLE stage_lines (line BIGINT, text VARCHAR)")
    rejects: list[tuple[int, str, str]] = []
    n_read = 0
    lines: list[int] = []
    texts: list[str] = []
    for number, text, reason, raw in read_json_lines(path, max_record_bytes):
        n_read += 1
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
    run_script(con, "stage_logs_jsonl", fields.jsonl_parameters())
    if rejects:
        batch = pa.table({
            "line": pa.array([r[0] for r in rejects], pa.int64()),
            "raw": pa.array([r[2] for r in rejects], pa.string()),
            "reason": pa.array([r[1] for r in rejects], pa.string()),
        })
        con.register("python_rejects", batch)
        con.execute("INSERT INTO stage_rejects SELECT line, raw, reason FROM python_rejects")
        con.unregister("python_rejects")
    return n_read


def _append_lines(con, lines: list[int], texts: list[str]) -> None:
    batch = pa.table({"line": pa.array(lines, pa.int64()), "text": pa.array(texts, pa.string())})
    con.register("line_batch", batch)
    con.execute("INSERT INTO stage_lines SELECT line, text FROM line_batch")
    con.unregister("line_batch")


def _is_list(arrow_type: pa.DataType | None) -> bool:
    return arrow_type is not None and (pa.types.is_list(arrow_type)
                                       or pa.types.is_large_list(arrow_type))


def _item_struct(arrow_type: pa.DataType | None, depth: int) -> pa.StructType | None:
    """The struct type of items for a list (depth 1) or list of lists (depth 2), else None."""
    for _ in range(depth):
        if not _is_list(arrow_type):
            return None
        arrow_type = arrow_type.value_type
    return arrow_type if pa.types.is_struct(arrow_type) else None


def stage_parquet(con, path: Path, *, line_column: str | None = None) -> int:
    """Stage a Parquet log file into stage_requests, the shape stage_logs_jsonl.sql gives
    JSONL. Columns are looked up in the file's schema, so a missing optional column reads as
    NULL and a column of the wrong type is a per-record reason, not a crash. A record's line
    is its row, or the value of `line_column` (a file converted from another format)."""
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise RecallwatchError(f"{path}: not a readable Parquet file ({exc}).") from None
    types = {f.name: f.type for f in schema
             if not pa.types.is_null(f.type) and f.name != line_column}
    q = quote_identifier
    bind = fields.BoundValues()
    logged, type_error = fields.parquet_request(types, bind)

    ret = q("retrieved") if "retrieved" in types else "NULL"
    steps = q("retrieval_steps") if "retrieval_steps" in types else "NULL"
    ret_struct = _item_struct(types.get("retrieved"), 1)
    steps_struct = _item_struct(types.get("retrieval_steps"), 2)
    when_steps = (bind(fields.STEPS_NOT_LISTS) if steps_struct is None
                  else f"CASE WHEN {ret} IS NOT NULL THEN {bind(fields.BOTH_LISTS)} "
                       f"WHEN list_contains(list_transform({steps}, lambda s: s IS NULL), true) "
                       f"THEN {bind(fields.STEPS_NOT_LISTS)} ELSE 'steps' END")
    when_list = "'list'" if ret_struct is not None else bind("retrieved is not a list of objects")
    shape = f"""CASE WHEN {steps} IS NOT NULL THEN {when_steps}
        WHEN {ret} IS NULL THEN {bind(fields.MISSING_LIST)}
        ELSE {when_list} END"""
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
        n_steps = f"CASE WHEN {shape} = 'steps' THEN len({steps}) ELSE 1 END::INTEGER"
    else:
        n_steps = "1"
    selects = [
        f"{q(line_column)}::BIGINT AS line" if line_column else "file_row_number + 1 AS line",
        "NULL::VARCHAR AS raw",   # filled for quarantined rows only, by fill_parquet_raw.sql
        f"{type_error} AS type_error",
        f"{logged} AS logged",
        f"{shape} AS shape",
        f"{n_steps} AS n_steps",
        " ".join(items) + " END AS items" if len(items) > 1 else "NULL AS items",
        " ".join(k_default) + " END AS k_default" if len(k_default) > 1
        else "NULL::BIGINT AS k_default",
    ]
    con.execute(
        "CREATE OR REPLACE TEMP TABLE stage_requests AS SELECT " + ",\n".join(selects)
        + f" FROM read_parquet({bind(str(path))}, file_row_number = true)",
        bind,
    )
    con.execute("CREATE OR REPLACE TEMP TABLE stage_rejects "
                "(line BIGINT, raw VARCHAR, reason VARCHAR)")
    return con.execute("SELECT count(*) FROM stage_requests").fetchall()[0][0]
