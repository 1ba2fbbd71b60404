"""Index manifests: load the chunks of one index version (chunk_id plus content_hash or text)
into `index_chunks`, so a miss can be explained and gold IDs carried across a rebuild. A
manifest is a snapshot: loading a version again replaces it. The file is staged by DuckDB's
own readers and judged by sql/load_index.sql, which quarantines bad rows."""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipeline.errors import RecallwatchError
from pipeline.ingest.fields import BoundValues
from pipeline.ingest.files import (
    RAW_LIMIT,
    TABLE_SUFFIXES,
    FileResult,
    count_quarantined,
    file_hash,
    previous_ingest,
    record_file,
    single_file,
    unchanged,
)
from pipeline.warehouse import quote_identifier, run_script, transaction

_MANIFEST_COLUMNS = ("index_version", "chunk_id", "content_hash", "text")


def ingest_index(con, path: str, version: str) -> FileResult:
    """Load the manifest of one index version (chunk_id plus content_hash or text). A manifest
    is a snapshot: loading a version again replaces it."""
    if not version or not version.strip():
        raise RecallwatchError("--version must name the index version (e.g. idx-2026-10-28).")
    file = single_file(path, TABLE_SUFFIXES)
    source, digest = str(file), file_hash(file)
    # unchanged only if this very file is what the version holds now
    skipped = unchanged(previous_ingest(con, "index", source, version), source, digest, "")
    if skipped:
        return skipped
    reader = _duckdb_reader(file)
    try:
        columns = {row[0]: row[1] for row in con.execute(
            f"DESCRIBE SELECT * FROM {reader}", {"path": source}).fetchall()}
    except duckdb.Error as exc:
        raise RecallwatchError(f"{file}: cannot read the index manifest ({exc}).") from None
    if "chunk_id" not in columns:
        raise RecallwatchError(f"{file}: an index manifest needs a chunk_id column.")
    if not {"content_hash", "text"} & set(columns):
        raise RecallwatchError(f"{file}: an index manifest needs content_hash or text.")
    extra = {}
    if reader.startswith("read_json"):
        # DuckDB would guess UUID- or date-looking IDs as UUID or DATE: read each value as
        # JSON and judge it below
        columns = {c: "JSON" for c in _MANIFEST_COLUMNS if c in columns}
        reader = "read_json($path, format = 'newline_delimited', columns = $columns)"
        extra = {"columns": columns}
    picked, errors, bind = [], [], BoundValues()
    for column in _MANIFEST_COLUMNS:
        value, error = _manifest_value(column, columns.get(column), bind)
        picked.append(value)
        if error:
            errors.append(error)
    type_error = f"CASE {' '.join(errors)} END" if errors else "NULL::VARCHAR"
    # a CSV's first line is its header, so data rows are numbered from 2 as in gold sets
    first_line = 2 if file.name.lower().endswith(".csv") else 1
    with transaction(con):
        try:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE stage_index AS "
                f"SELECT row_number() OVER () + $offset AS line, {', '.join(picked)}, "
                f"{type_error} AS type_error FROM {reader}",
                {"path": source, "offset": first_line - 1, **extra, **bind})
        except duckdb.OutOfMemoryException:
            raise  # not the file's fault: the CLI names the memory setting
        except duckdb.Error as exc:
            raise RecallwatchError(f"{file}: cannot read the index manifest ({exc}).") from None
        run_script(con, "load_index",
                   {"source": source, "version": version, "raw_limit": RAW_LIMIT})
        n_read = con.execute("SELECT count(*) FROM stage_index").fetchall()[0][0]
        n_bad = count_quarantined(con, "index", source, version)
        return record_file(con, "index", source, version, digest, "", n_read,
                           n_read - n_bad, n_bad)


def _manifest_value(column: str, sql_type: str | None,
                    bind: BoundValues) -> tuple[str, str | None]:
    """(the column as text, a CASE branch giving its reason when a value is not text) by the
    type DuckDB read it as. IDs may be whole numbers (7 and "7" are one ID); a list, an
    object, a float or a bool is no ID, and JSON text is taken without its quotes."""
    q = quote_identifier(column)
    if sql_type is None:
        return f"NULL::VARCHAR AS {q}", None
    reason = f"{column} is not a string"
    if sql_type == "JSON":
        allowed = bind(["VARCHAR", "BIGINT", "UBIGINT", "NULL"] if column == "chunk_id"
                       else ["VARCHAR", "NULL"])
        bad = f"NOT list_contains({allowed}, json_type({q}))"
        return (f"CASE WHEN NOT ({bad}) THEN json_extract_string({q}, '$') END AS {q}",
                f"WHEN {bad} THEN {bind(reason)}")
    whole_number = sql_type in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                                "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT")
    if sql_type in ("VARCHAR", "UUID") or (column == "chunk_id" and whole_number):
        return f"CAST({q} AS VARCHAR) AS {q}", None
    return f"NULL::VARCHAR AS {q}", f"WHEN {q} IS NOT NULL THEN {bind(reason)}"


def _duckdb_reader(file: Path) -> str:
    name = file.name.lower()
    if name.endswith(".parquet"):
        return "read_parquet($path)"
    if name.endswith(".csv"):
        return "read_csv($path, header = true, all_varchar = true)"
    return "read_json($path, format = 'newline_delimited')"
