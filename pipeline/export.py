"""Export a warehouse table to CSV, Parquet or JSON Lines, chosen by the file's extension."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from pipeline.atomic import written_whole
from pipeline.errors import RecallwatchError
from pipeline.warehouse import public_table

FORMATS = (".csv", ".parquet", ".jsonl")


def export_table(con, table: str, path: str | Path) -> int:
    """Write every row of `table` to `path`, sorted by all its columns (the same rows give the
    same file, whatever order they were stored in); returns the row count."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise RecallwatchError(
            f"{target}: cannot tell the format; name the file .csv, .parquet or .jsonl."
        )
    rel = con.sql(f"SELECT * FROM {public_table(table)} ORDER BY ALL")
    if target.is_dir() or str(path).endswith(("/", os.sep)):
        raise RecallwatchError(f"{path} is a directory: name the file to write.")
    # a reader (or a kill mid-write) never finds half a table under its name
    try:
        with written_whole(target) as written:
            if suffix == ".csv":
                rel.to_csv(str(written))
            elif suffix == ".parquet":
                rel.to_parquet(str(written))
            else:   # written by DuckDB as it reads, within the memory limit
                literal = "'" + str(written).replace("'", "''") + "'"
                con.execute(f"COPY ({rel.sql_query()}) TO {literal} (FORMAT json)")
    except (OSError, duckdb.IOException) as exc:
        raise RecallwatchError(f"cannot write {target} ({exc}); choose another path.") from None
    return con.sql(f"SELECT count(*) FROM {public_table(table)}").fetchall()[0][0]
