"""Index manifests: load the chunks of one index version (chunk_id plus content_hash or text)
into `index_chunks`, so a miss can be explained and gold IDs carried across a rebuild. A
manifest is a snapshot: loading a version again replaces it. The file is staged by DuckDB's
own readers (a JSON Lines manifest line by line, as log lines are) and judged by
sql/load_index.sql, which quarantines bad rows."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline.errors import RecallwatchError
from pipeline.ingest.fields import BoundValues
from pipeline.ingest.files import (
    BARE_CR,
    DEFAULT_MAX_RECORD_BYTES,
    RAW_LIMIT,
    TABLE_SUFFIXES,
    UNCLOSED_QUOTE,
    FileResult,
    count_quarantined,
    file_hash,
    previous_ingest,
    quarantine_rows,
    record_file,
    refuse_repeated_columns,
    single_file,
    spaced_csv_header,
    unchanged,
)
from pipeline.ingest.logs import stage_json_lines
from pipeline.warehouse import quote_identifier, run_script, transaction

_MANIFEST_COLUMNS = ("index_version", "chunk_id", "content_hash", "text")

# How a manifest is read, recorded with it: a file loaded under earlier rules is read again
# when it is next given, though unchanged. 2: only valid rows can be conflicting duplicates
# (before, a valid chunk could be set aside with a row refused for another reason); 3: a text
# or content_hash of tabs or line breaks is blank, as one of spaces was (before, a rebuild
# carried a gold chunk by it); 4: a CSV whose first rows quote nothing is still read with
# quotes (before, a value quoted further down kept its quotes, or split its row at a comma).
_READING_RULES = "rules=4"


def ingest_index(con, path: str, version: str) -> FileResult:
    """Load the manifest of one index version (chunk_id plus content_hash or text). A manifest
    is a snapshot: loading a version again replaces it."""
    if not version or not version.strip():
        raise RecallwatchError("--version must name the index version (e.g. idx-2026-10-28).")
    file = single_file(path, TABLE_SUFFIXES)
    source, digest = str(file), file_hash(file)
    # unchanged only if this very file is what the version holds now
    skipped = unchanged(previous_ingest(con, "index", source, version), source, digest,
                        _READING_RULES)
    if skipped:
        return skipped
    if _is_json_lines(file):
        with transaction(con):
            rejects = _stage_manifest_lines(con, file, version)
            return _load_staged(con, file, version, digest, rejects)
    reader, reading = _duckdb_reader(con, file)
    try:
        columns = {row[0]: row[1] for row in con.execute(
            f"DESCRIBE SELECT * FROM {reader}", reading).fetchall()}
    except duckdb.Error as exc:
        raise _unreadable(file, exc) from None
    _check_columns(file, columns)
    picked, type_error, bind = _picked(columns)
    # a CSV's first line is its header, so data rows are numbered from 2 as in gold sets
    first_line = 2 if file.name.lower().endswith(".csv") else 1
    with transaction(con):
        try:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE stage_index AS "
                f"SELECT row_number() OVER () + $offset AS line, {picked}, "
                f"{type_error} AS type_error, NULL::VARCHAR AS raw FROM {reader}",
                {**reading, "offset": first_line - 1, **bind})
        except duckdb.OutOfMemoryException:
            raise  # not the file's fault: the CLI names the memory setting
        except duckdb.Error as exc:
            raise _unreadable(file, exc) from None
        if first_line == 2:
            _number_csv_lines(con, file)
        return _load_staged(con, file, version, digest, [])


_CSV_ERROR_LINE = re.compile(r"CSV Error on Line: (\d+)")
_CSV_FIELD_COUNT = re.compile(r"Expected Number of Columns: (\d+) Found: (\d+)")


def _unreadable(file: Path, exc: duckdb.Error) -> RecallwatchError:
    """One sentence for a manifest DuckDB cannot read. Its CSV reader explains a bad row in
    twenty lines (the row, fixes, every option): it is said here as a gold CSV's is, by its
    line (past the first rows the sniffer reads; before them, _check_columns says it)."""
    text = str(exc)
    line = _CSV_ERROR_LINE.search(text)
    counts = _CSV_FIELD_COUNT.search(text)
    if line and "Invalid unicode" in text:
        return RecallwatchError(f"{file}: not valid UTF-8 (line {line.group(1)}); save the "
                                "index manifest as UTF-8.")
    if line and counts:
        return _other_field_count(file, line.group(1), int(counts.group(2)), counts.group(1))
    if line and "unterminated quote" in text:
        return RecallwatchError(f"{file}: line {line.group(1)} {UNCLOSED_QUOTE}")
    return RecallwatchError(f"{file}: cannot read the index manifest "
                            f"({' '.join(text.split())}).")


def _number_csv_lines(con, file: Path) -> None:
    """Number a CSV manifest's rows by the line each starts on when that is not its row + 1:
    a quoted field holding a line break spans lines, and DuckDB skips blank lines. The file is
    read again here, with the dialect DuckDB detected, only when it holds a quote or a blank
    line; if the two readers do not agree on the rows, the row numbers stay."""
    if not _may_span_lines(file):
        return
    ((delimiter, quote, escape),) = con.execute(
        "SELECT Delimiter, Quote, Escape FROM sniff_csv($path)", {"path": str(file)}).fetchall()
    # sniff_csv says "(empty)" for none (then the file is read with '"', _csv_quote); an
    # escape that is the quote is the doubled quote
    quote = _csv_quote(quote)
    escape = escape if escape and escape not in ("(empty)", quote) else None
    starts: list[int] = []
    with open(file, encoding="utf-8-sig", errors="replace", newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter or ",", quotechar=quote,
                            quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
                            escapechar=escape, doublequote=True, strict=False)
        end = 0
        for row in reader:
            if row and end > 0:   # the header (first) and blank lines are no rows
                starts.append(end + 1)
            end = reader.line_num
    ((n_rows,),) = con.execute("SELECT count(*) FROM stage_index").fetchall()
    if len(starts) != n_rows:
        return
    con.register("csv_line_starts", pa.table({
        "row": pa.array(range(2, n_rows + 2), pa.int64()), "start": pa.array(starts, pa.int64())}))
    con.execute("UPDATE stage_index SET line = s.start FROM csv_line_starts s "
                "WHERE stage_index.line = s.row")
    con.unregister("csv_line_starts")


def _may_span_lines(file: Path) -> bool:
    """Whether a CSV file holds a quote or a blank line, either of which can part a row's
    number from its line's."""
    tail = b""
    with open(file, "rb") as fh:
        while block := fh.read(1 << 20):
            text = tail + block
            if b'"' in text or b"\n\n" in text or b"\n\r\n" in text:
                return True
            tail = text[-2:]
    return False


def _stage_manifest_lines(con, file: Path, version: str) -> list[tuple[int, str, str]]:
    """Stage a JSON Lines manifest line by line, as a log file's lines are: a line that is not
    JSON, not an object, not UTF-8 or over the size limit is quarantined with its line and
    reason, and every row is read for every column (DuckDB's own reader would take the columns
    from a sample of the first rows, and a key first given later would be lost). Values are
    read as JSON and judged by _manifest_value, so a UUID- or date-looking ID stays text."""
    rejects = stage_json_lines(con, file, DEFAULT_MAX_RECORD_BYTES)
    con.execute("""
        CREATE OR REPLACE TEMP TABLE stage_index_lines AS
        SELECT line, text AS line_text, CASE WHEN json_valid(text) AND json_type(text) = 'OBJECT'
                                THEN text::JSON END AS record,
               CASE WHEN NOT json_valid(text) AND contains(rtrim(text, chr(13)), chr(13))
                        THEN $bare_cr
                    WHEN NOT json_valid(text) THEN 'invalid JSON'
                    WHEN json_type(text) <> 'OBJECT' THEN 'record is not a JSON object'
               END AS line_error
        FROM stage_lines""", {"bare_cr": BARE_CR})
    con.execute("DROP TABLE stage_lines")
    present = con.execute(
        "SELECT " + ", ".join(
            f"count(*) FILTER (json_exists(record, $p{i}))"
            for i, _ in enumerate(_MANIFEST_COLUMNS)) + " FROM stage_index_lines",
        {f"p{i}": _json_path(c) for i, c in enumerate(_MANIFEST_COLUMNS)}).fetchall()[0]
    columns = {c: "JSON" for c, n in zip(_MANIFEST_COLUMNS, present, strict=True) if n}
    if any(present) or not rejects and not _has_rows(con):
        _check_columns(file, columns)
    picked, type_error, bind = _picked(columns)
    fields = ", ".join(
        f"json_extract(record, {bind(_json_path(c))}) AS {quote_identifier(c)}"
        for c in columns)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE stage_index AS "
        f"SELECT line, {picked}, coalesce(line_error, {type_error}) AS type_error, "
        "CASE WHEN line_error IS NOT NULL THEN left(line_text, $raw_limit) END AS raw "
        f"FROM (SELECT line, line_error, line_text{', ' + fields if fields else ''} "
        "FROM stage_index_lines)", {"raw_limit": RAW_LIMIT, **bind})
    con.execute("DROP TABLE stage_index_lines")
    return rejects


def _has_rows(con) -> bool:
    return con.execute("SELECT count(*) > 0 FROM stage_index_lines").fetchall()[0][0]


def _json_path(column: str) -> str:
    return f'$."{column}"'


def _check_columns(file: Path, columns: dict) -> None:
    header = _csv_header(file)
    refuse_repeated_columns(file, header)
    if "chunk_id" not in columns:
        if "chunk_id" in header:
            # DuckDB's sniffer, given rows of other lengths than the header's, takes another
            # delimiter or another line for the header
            raise _row_of_other_length(file, len(header))
        raise RecallwatchError(f"{file}: an index manifest needs a chunk_id column.")
    if not {"content_hash", "text"} & set(columns):
        raise RecallwatchError(f"{file}: an index manifest needs content_hash or text.")


def _row_of_other_length(file: Path, fields: int) -> RecallwatchError:
    """One sentence naming the first row of a CSV manifest that DuckDB's sniffer could not
    fit to its header (a row of another length, a quote never closed), found by reading the
    file again with '"' as its quote; the file's whole refusal when no row is to blame."""
    with open(file, encoding="utf-8-sig", errors="replace", newline="") as fh:
        reader = csv.reader(fh, strict=True)
        end = 0
        try:
            next(reader, None)
            end = reader.line_num
            for row in reader:
                start, end = end + 1, reader.line_num
                if row and len(row) != fields:
                    return _other_field_count(file, start, len(row), fields)
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                return RecallwatchError(f"{file}: line {end + 1} {UNCLOSED_QUOTE}")
            return RecallwatchError(f"{file}: line {end + 1} cannot be read as CSV ({exc}); "
                                    "quote a value that holds a comma or a quote.")
    return RecallwatchError(
        f"{file}: not every row has the {fields} fields the header names, so its columns "
        "cannot be told apart; quote a value that holds a comma.")


def _other_field_count(file: Path, line, found: int, named) -> RecallwatchError:
    return RecallwatchError(
        f"{file}: line {line} has {found} field{'' if found == 1 else 's'} where the header "
        f"names {named}; quote a value that holds a comma.")


def _csv_header(file: Path) -> list[str]:
    """The names on a CSV file's first line (none for another format or an unreadable one)."""
    if not file.name.lower().endswith(".csv"):
        return []
    try:
        with open(file, encoding="utf-8-sig", newline="") as fh:
            return [name.strip() for name in next(csv.reader(fh), [])]
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def _picked(columns: dict) -> tuple[str, str, BoundValues]:
    """The manifest's columns as text (absent ones NULL) and the CASE giving a row's type
    error, by the type each column was read as."""
    picked, errors, bind = [], [], BoundValues()
    for column in _MANIFEST_COLUMNS:
        value, error = _manifest_value(column, columns.get(column), bind)
        picked.append(value)
        if error:
            errors.append(error)
    type_error = f"CASE {' '.join(errors)} END" if errors else "NULL::VARCHAR"
    return ", ".join(picked), type_error, bind


def _load_staged(con, file: Path, version: str, digest: str,
                 rejects: list[tuple[int, str, str]]) -> FileResult:
    source = str(file)
    run_script(con, "load_index", {"source": source, "version": version, "raw_limit": RAW_LIMIT})
    quarantine_rows(con, "index", source, version, rejects)
    n_read = con.execute("SELECT count(*) FROM stage_index").fetchall()[0][0] + len(rejects)
    n_bad = count_quarantined(con, "index", source, version)
    if n_read == n_bad:
        # a manifest is a snapshot that replaces the version's: an empty one would wipe it
        # (and every not_in_index diagnosis) without a word. Raised inside the caller's
        # transaction, so the manifest loaded before stays.
        first = con.execute(
            "SELECT line, reason FROM quarantine WHERE kind = 'index' AND source = $source "
            "AND version = $version ORDER BY line LIMIT 1",
            {"source": source, "version": version}).fetchall()
        example = f" (line {first[0][0]}: {first[0][1]})" if first else ""
        raise RecallwatchError(
            f"{source}: no chunk could be loaded from {n_read} records{example}; nothing was "
            f"loaded as index version {version!r}.")
    return record_file(con, "index", source, version, digest, _READING_RULES, n_read,
                       n_read - n_bad, n_bad)


ID_COLUMNS = ("chunk_id", "index_version")


def _manifest_value(column: str, sql_type: str | None,
                    bind: BoundValues) -> tuple[str, str | None]:
    """(the column as text, a CASE branch giving its reason when a value is not text) by the
    type DuckDB read it as. IDs (`chunk_id`, and `index_version` as in a log) may be whole
    numbers, of any size (7 and "7" are one ID); a list, an object, a float or a bool is no
    ID, and JSON text is taken without its quotes."""
    q = quote_identifier(column)
    if sql_type is None:
        return f"NULL::VARCHAR AS {q}", None
    reason = f"{column} is not a string"
    if sql_type == "JSON":
        allowed = bind(["VARCHAR", "BIGINT", "UBIGINT", "NULL"] if column in ID_COLUMNS
                       else ["VARCHAR", "NULL"])
        # an integer beyond 64 bits is read as a double with its text kept: its digits
        typed = (f"CASE WHEN json_type({q}) = 'DOUBLE' AND regexp_full_match({q}::VARCHAR, "
                 f"'-?[0-9]+') THEN 'BIGINT' ELSE json_type({q}) END")
        bad = f"NOT list_contains({allowed}, {typed})"
        return (f"CASE WHEN NOT ({bad}) THEN json_extract_string({q}, '$') END AS {q}",
                f"WHEN {bad} THEN {bind(reason)}")
    # a decimal(p, 0), as Spark and database exports write a whole number, casts without a point
    whole_number = sql_type in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                                "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT") \
        or re.fullmatch(r"DECIMAL\(\d+,\s*0\)", sql_type) is not None
    if sql_type in ("VARCHAR", "UUID") or (column in ID_COLUMNS and whole_number):
        return f"CAST({q} AS VARCHAR) AS {q}", None
    return f"NULL::VARCHAR AS {q}", f"WHEN {q} IS NOT NULL THEN {bind(reason)}"


def _is_json_lines(file: Path) -> bool:
    return not file.name.lower().endswith((".parquet", ".csv"))


def _csv_quote(sniffed: str | None) -> str:
    """The quote a CSV manifest is read with: the one DuckDB's sniffer found, else '"'. The
    sniffer reads the first 20,480 rows only, and a writer (csv, pandas) quotes a value only
    when it holds a comma, a quote or a line break: read without a quote, such a value further
    down kept its quotes (another content: a rebuild carried nothing by it) or split its row."""
    return sniffed if sniffed and sniffed != "(empty)" else '"'


def _duckdb_reader(con, file: Path) -> tuple[str, dict]:
    """The table function reading a Parquet or CSV manifest, and its bound values."""
    source = str(file)
    if file.name.lower().endswith(".parquet"):
        return "read_parquet($path, hive_partitioning = false)", {"path": source}
    try:
        ((sniffed,),) = con.execute("SELECT Quote FROM sniff_csv($path)",
                                    {"path": source}).fetchall()
    except duckdb.Error:
        sniffed = None   # read_csv says why
    bound = {"path": source, "quote": _csv_quote(sniffed)}
    options = "header = true, all_varchar = true, quote = $quote, hive_partitioning = false"
    if spaced_csv_header(file):
        # written "chunk_id, text" (a space after each comma): its values are read without
        # the space, as a gold CSV's are; DuckDB keeps it on a value that is not quoted
        return f"(SELECT ltrim(COLUMNS(*), ' ') FROM read_csv($path, {options}))", bound
    return f"read_csv($path, {options})", bound
