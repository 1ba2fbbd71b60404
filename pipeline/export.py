"""Export a warehouse table to CSV, Parquet or JSON Lines, chosen by the file's extension."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import duckdb

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
    # written beside the file and moved onto it whole, so a reader (or a kill mid-write) never
    # finds half a table under its name; a link or no regular file (/dev/stdout) is written in
    # place, as pipeline.contract.write_scores does
    in_place = target.is_symlink() or (target.exists() and not target.is_file())
    written = target if in_place else target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".csv":
            rel.to_csv(str(written))
        elif suffix == ".parquet":
            rel.to_parquet(str(written))
        else:   # written by DuckDB as it reads, within the memory limit
            literal = "'" + str(written).replace("'", "''") + "'"
            con.execute(f"COPY ({rel.sql_query()}) TO {literal} (FORMAT json)")
        if not in_place:
            os.replace(written, target)
    except BaseException as exc:   # Ctrl-C too: no half table is left beside the file
        if not in_place:
            with contextlib.suppress(OSError):
                written.unlink()
        if isinstance(exc, (OSError, duckdb.IOException)):
            raise RecallwatchError(f"cannot write {target} ({exc}); choose another path."
                                   ) from None
        raise
    return con.sql(f"SELECT count(*) FROM {public_table(table)}").fetchall()[0][0]
