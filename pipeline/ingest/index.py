"""Index manifests: load the chunks of one index version (chunk_id plus content_hash or text)
into `index_chunks`, so a miss can be explained and gold IDs carried across a rebuild. A
manifest is a snapshot: loading a version again replaces it. The file is staged by DuckDB's
own readers and judged by sql/load_index.sql, which quarantines bad rows."""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipeline.errors import RecallwatchError
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
        columns = {row[0] for row in con.execute(
            f"DESCRIBE SELECT * FROM {reader}", {"path": source}).fetchall()}
    except duckdb.Error as exc:
        raise RecallwatchError(f"{file}: cannot read the index manifest ({exc}).") from None
    if "chunk_id" not in columns:
        raise RecallwatchError(f"{file}: an index manifest needs a chunk_id column.")
    if not {"content_hash", "text"} & columns:
        raise RecallwatchError(f"{file}: an index manifest needs content_hash or text.")
    q = quote_identifier
    picked = ", ".join(f"CAST({q(c)} AS VARCHAR) AS {q(c)}" if c in columns
                       else f"NULL::VARCHAR AS {q(c)}" for c in _MANIFEST_COLUMNS)
    with transaction(con):
        try:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE stage_index AS "
                f"SELECT row_number() OVER () AS line, {picked} FROM {reader}",
                {"path": source})
        except duckdb.Error as exc:
            raise RecallwatchError(f"{file}: cannot read the index manifest ({exc}).") from None
        run_script(con, "load_index",
                   {"source": source, "version": version, "raw_limit": RAW_LIMIT})
        n_read = con.execute("SELECT count(*) FROM stage_index").fetchall()[0][0]
        n_bad = count_quarantined(con, "index", source, version)
        return record_file(con, "index", source, version, digest, "", n_read,
                           n_read - n_bad, n_bad)


def _duckdb_reader(file: Path) -> str:
    name = file.name.lower()
    if name.endswith(".parquet"):
        return "read_parquet($path)"
    if name.endswith(".csv"):
        return "read_csv($path, header = true, all_varchar = true)"
    return "read_json($path, format = 'newline_delimited')"
