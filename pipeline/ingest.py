"""Ingest: read logs, gold sets and index manifests into the warehouse without losing a record.

Every input record ends either loaded or in `quarantine` with its source, line and one reason,
and per file `read = loaded + quarantined` is checked before the file's transaction commits.
A file is ingested in one transaction; a file whose content hash and options are unchanged is
skipped, and a file whose content changed replaces what it loaded before (a request it shared
with another file stays), so ingesting twice changes nothing.
JSON Lines (optionally gzipped) are read line by line here so that undecodable bytes and huge
lines are caught with their line number; the rest of the checks run in SQL (sql/*_logs.sql),
shared by JSONL and Parquet."""

from __future__ import annotations

import csv
import glob
import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import RecallwatchError
from pipeline.warehouse import normalize_text, quote_identifier, run_script, transaction

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
RAW_LIMIT = 65536
_BATCH_LINES = 50_000
LOG_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".parquet")
TABLE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".csv", ".parquet")  # gold sets, manifests

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class FileResult:
    source: str
    read: int
    loaded: int
    quarantined: int
    skipped: bool = False   # content unchanged since it was last ingested


@dataclass(frozen=True)
class IngestSummary:
    files: tuple[FileResult, ...]

    @property
    def read(self) -> int:
        return sum(f.read for f in self.files if not f.skipped)

    @property
    def loaded(self) -> int:
        return sum(f.loaded for f in self.files if not f.skipped)

    @property
    def quarantined(self) -> int:
        return sum(f.quarantined for f in self.files if not f.skipped)


# ---------------------------------------------------------------------------------- files

def expand_paths(paths: list[str], suffixes: tuple[str, ...]) -> list[Path]:
    """Files, directories (searched recursively, e.g. hive partitions dt=.../) and globs, in a
    stable order. A path that names nothing is an error, not an empty run."""
    found: list[Path] = []
    for given in paths:
        matches = sorted(glob.glob(given, recursive=True)) if glob.has_magic(given) else [given]
        if not matches or not all(os.path.exists(m) for m in matches):
            raise RecallwatchError(f"no such file or directory: {given}")
        for match in matches:
            p = Path(match)
            if p.is_dir():
                found.extend(sorted(f for f in p.rglob("*")
                                    if f.is_file() and f.name.lower().endswith(suffixes)))
            elif p.name.lower().endswith(suffixes):
                found.append(p)
            else:
                raise RecallwatchError(
                    f"{p}: unsupported file type; expected one of {', '.join(suffixes)}."
                )
    unique = list(dict.fromkeys(f.resolve() for f in found))
    if not unique:
        raise RecallwatchError(
            f"no input files found in {', '.join(paths)} (looked for {', '.join(suffixes)})."
        )
    return unique


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


def read_json_lines(
    path: Path, max_record_bytes: int,
) -> Iterator[tuple[int, str | None, str | None, str | None]]:
    """Yield (line number, text, reason, raw) for each non-blank line. A line that is not UTF-8
    or is longer than the limit has text None and a reason; its raw bytes are kept, decoded
    with replacement characters and truncated."""
    try:
        with _open_binary(path) as fh:
            for number, data in enumerate(fh, start=1):
                if len(data) > max_record_bytes:
                    raw = data[:RAW_LIMIT].rstrip(b"\r\n").decode("utf-8", errors="replace")
                    yield number, None, (
                        f"record too large: {len(data)} bytes (limit {max_record_bytes}; "
                        "raise it with --max-record-bytes)"
                    ), raw
                    continue
                if not data.strip():
                    continue
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raw = data[:RAW_LIMIT].decode("utf-8", errors="replace")
                    yield number, None, f"not valid UTF-8 (byte {exc.start})", raw
                    continue
                yield number, text.rstrip("\r\n"), None, None
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise RecallwatchError(
            f"{path}: cannot read this file ({exc}); nothing from it was loaded. Fix or move it "
            "and run again (the files before it were loaded)."
        ) from None


def _previous(con, kind: str, source: str, version: str | None):
    """(content_hash, options, n_read, n_loaded, n_quarantined) of the last ingest, or None."""
    rows = con.execute(
        "SELECT content_hash, options, n_read, n_loaded, n_quarantined FROM ingest_files "
        "WHERE kind = $kind AND source = $source AND version IS NOT DISTINCT FROM $version",
        {"kind": kind, "source": source, "version": version}).fetchall()
    return rows[0] if rows else None


def _unchanged(previous, source: str, digest: str, options: str) -> FileResult | None:
    if previous and previous[0] == digest and previous[1] == options:
        _, _, n_read, n_loaded, n_quarantined = previous
        return FileResult(source, n_read, n_loaded, n_quarantined, skipped=True)
    return None


def _record_file(con, kind: str, source: str, version: str | None, digest: str, options: str,
                 n_read: int, n_loaded: int, n_quarantined: int) -> FileResult:
    if n_read != n_loaded + n_quarantined:
        raise RuntimeError(f"{source}: read {n_read} != loaded {n_loaded} + quarantined "
                           f"{n_quarantined}; nothing from this file was kept")
    con.execute(
        "INSERT INTO ingest_files (kind, source, version, content_hash, options, n_read, "
        "n_loaded, n_quarantined) VALUES ($kind, $source, $version, $hash, $options, $read, "
        "$loaded, $quarantined)",
        {"kind": kind, "source": source, "version": version, "hash": digest, "options": options,
         "read": n_read, "loaded": n_loaded, "quarantined": n_quarantined})
    return FileResult(source, n_read, n_loaded, n_quarantined)


def _quarantined(con, kind: str, source: str, version: str | None) -> int:
    return con.execute(
        "SELECT count(*) FROM quarantine WHERE kind = $kind AND source = $source "
        "AND version IS NOT DISTINCT FROM $version",
        {"kind": kind, "source": source, "version": version}).fetchall()[0][0]


# ---------------------------------------------------------------------------------- logs

def ingest_logs(con, paths: list[str], *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                progress: Progress | None = None) -> IngestSummary:
    """Load request logs (JSONL[.gz] or Parquet; files, directories, globs)."""
    files = expand_paths(paths, LOG_SUFFIXES)
    results = []
    for done, path in enumerate(files):
        if progress:
            progress(f"ingest {path.parent.name}/{path.name}", done, len(files))
        results.append(_ingest_log_file(con, path, max_record_bytes))
    if progress:
        progress("ingest", len(files), len(files))
    return IngestSummary(tuple(results))


def _ingest_log_file(con, path: Path, max_record_bytes: int) -> FileResult:
    source = str(path)
    digest = file_hash(path)
    # the size limit changes which lines load, so a new limit re-reads the file
    options = f"max_record_bytes={max_record_bytes}"
    previous = _previous(con, "logs", source, None)
    unchanged = _unchanged(previous, source, digest, options)
    if unchanged:
        return unchanged
    params = {"source": source, "kind": "logs", "version": None}
    with transaction(con):
        if previous:
            run_script(con, "forget_source", params)
        try:
            if path.name.lower().endswith(".parquet"):
                n_read = _stage_parquet(con, path)
            else:
                n_read = _stage_jsonl(con, path, max_record_bytes)
        except duckdb.Error as exc:
            raise RecallwatchError(
                f"{path}: cannot read this file ({exc}); nothing from it was loaded. Fix or "
                "move it and run again (the files before it were loaded)."
            ) from None
        run_script(con, "validate_logs")
        run_script(con, "load_logs", params)
        if path.name.lower().endswith(".parquet"):
            run_script(con, "fill_parquet_raw", {"source": source, "path": source})
        n_quarantined = _quarantined(con, "logs", source, None)
        (n_loaded,) = con.execute(
            "SELECT count(*) FROM stage_outcome WHERE reason IS NULL").fetchall()[0]
        return _record_file(con, "logs", source, None, digest, options, n_read, n_loaded,
                            n_quarantined)


def _stage_jsonl(con, path: Path, max_record_bytes: int) -> int:
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
    run_script(con, "stage_logs_jsonl")
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


_LOG_SCALARS = {
    "request_id": "request_id", "timestamp": "ts_text", "query": "query", "gold_id": "gold_id",
    "index_version": "index_version", "index_size": "index_size_text", "k": "k_text",
    "session_id": "session_id", "turn": "turn_text",
}


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


def _item_expression(struct: pa.StructType, step: str) -> str:
    """SQL for one Parquet item `x` at position `i` as the staging struct (json_item's twin)."""
    q = quote_identifier
    fields = {struct.field(i).name: struct.field(i).type for i in range(struct.num_fields)}
    numeric = {name: t is not None and (pa.types.is_integer(t) or pa.types.is_floating(t))
               for name, t in fields.items()}

    def number(name: str) -> str:
        if name not in fields:
            return "NULL::DOUBLE"
        return f"try_cast(x.{q(name)} AS DOUBLE)"

    errors = []
    if "chunk_id" in fields and pa.types.is_nested(fields["chunk_id"]):
        errors.append("WHEN x.\"chunk_id\" IS NOT NULL THEN 'has a chunk_id that is not a string'")
    for name, what in (("rank", "a rank that is not an integer"),
                       ("score", "a score that is not a number")):
        if name in fields and not numeric[name]:
            errors.append(f"WHEN x.{q(name)} IS NOT NULL AND {number(name)} IS NULL "
                          f"THEN 'has {what}'")
    chunk = ("NULL::VARCHAR" if "chunk_id" not in fields or pa.types.is_nested(fields["chunk_id"])
             else f"CAST(x.{q('chunk_id')} AS VARCHAR)")
    text = f"CAST(x.{q('text')} AS VARCHAR)" if "text" in fields else "NULL::VARCHAR"
    error = ("CASE " + " ".join(errors) + " END") if errors else "NULL::VARCHAR"
    return (f"{{'step': ({step})::INTEGER, 'position': i::INTEGER, 'chunk_id': {chunk}, "
            f"'rank_num': {number('rank')}, 'score': {number('score')}, 'text': {text}, "
            f"'item_error': {error}}}")


def _stage_parquet(con, path: Path) -> int:
    """Stage a Parquet log file into stage_requests, the shape stage_logs_jsonl.sql gives
    JSONL. Columns are looked up in the file's schema, so a missing optional column reads as
    NULL and a column of the wrong type is a per-record reason, not a crash."""
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise RecallwatchError(f"{path}: not a readable Parquet file ({exc}).") from None
    types = {f.name: f.type for f in schema}
    q = quote_identifier

    def present(name: str) -> bool:
        return name in types and not pa.types.is_null(types[name])

    selects = ["file_row_number + 1 AS line", "NULL::VARCHAR AS raw"]
    type_errors = []
    for field, staged in _LOG_SCALARS.items():
        if not present(field):
            selects.append(f"NULL::VARCHAR AS {staged}")
        elif pa.types.is_nested(types[field]):
            selects.append(f"NULL::VARCHAR AS {staged}")
            type_errors.append(f"WHEN {q(field)} IS NOT NULL THEN '{field} is not a scalar'")
        else:
            selects.append(f"CAST({q(field)} AS VARCHAR) AS {staged}")
    if present("tags") and (pa.types.is_struct(types["tags"]) or pa.types.is_map(types["tags"])):
        selects.append(f"to_json({q('tags')}) AS tags_json")
    else:
        selects.append("NULL::JSON AS tags_json")
        if present("tags"):
            type_errors.append(f"WHEN {q('tags')} IS NOT NULL THEN 'tags is not an object'")
    type_error = ("CASE " + " ".join(type_errors) + " END") if type_errors else "NULL::VARCHAR"
    selects.append(f"{type_error} AS type_error")

    ret = q("retrieved") if present("retrieved") else "NULL"
    steps = q("retrieval_steps") if present("retrieval_steps") else "NULL"
    ret_struct = _item_struct(types.get("retrieved"), 1)
    steps_struct = _item_struct(types.get("retrieval_steps"), 2)
    both = "'both retrieved and retrieval_steps are set: log one of them'"
    when_steps = ("'retrieval_steps is not a list of lists'" if steps_struct is None
                  else f"CASE WHEN {ret} IS NOT NULL THEN {both} ELSE 'steps' END")
    when_list = "'list'" if ret_struct is not None else "'retrieved is not a list of objects'"
    shape = f"""CASE WHEN {steps} IS NOT NULL THEN {when_steps}
        WHEN {ret} IS NULL THEN 'missing or null required field: retrieved (or retrieval_steps)'
        ELSE {when_list} END"""
    selects.append(f"{shape} AS shape")
    items, k_default = ["CASE"], ["CASE"]
    if ret_struct is not None:
        items.append(f"WHEN {shape} = 'list' THEN list_transform({ret}, "
                     f"lambda x, i: {_item_expression(ret_struct, '1')})")
        k_default.append(f"WHEN {shape} = 'list' THEN len({ret})")
    if steps_struct is not None:
        items.append(f"WHEN {shape} = 'steps' THEN flatten(list_transform({steps}, "
                     f"lambda s, si: list_transform(s, "
                     f"lambda x, i: {_item_expression(steps_struct, 'si')})))")
        k_default.append(f"WHEN {shape} = 'steps' THEN "
                         f"list_max(list_transform({steps}, lambda s: len(s)))")
        selects.append(f"CASE WHEN {shape} = 'steps' THEN len({steps}) ELSE 1 END::INTEGER "
                       "AS n_steps")
    else:
        selects.append("1 AS n_steps")
    selects.append(" ".join(items) + " END AS items" if len(items) > 1 else "NULL AS items")
    selects.append(" ".join(k_default) + " END AS k_default" if len(k_default) > 1
                   else "NULL::BIGINT AS k_default")

    con.execute(
        "CREATE OR REPLACE TEMP TABLE stage_requests AS SELECT " + ",\n".join(selects)
        + " FROM read_parquet($path, file_row_number = true)",
        {"path": str(path)},
    )
    con.execute("CREATE OR REPLACE TEMP TABLE stage_rejects "
                "(line BIGINT, raw VARCHAR, reason VARCHAR)")
    return con.execute("SELECT count(*) FROM stage_requests").fetchall()[0][0]


# ---------------------------------------------------------------------------------- gold

_GOLD_LISTS = ("gold_chunk_ids", "gold_passages", "claims")


def _gold_records(path: Path) -> Iterator[tuple[int, dict | None, str | None, str]]:
    """Yield (line, record or None, reason, raw) for each gold record of a JSONL/CSV/Parquet
    file."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:
            raise RecallwatchError(f"{path}: not a readable Parquet file ({exc}).") from None
        for number, row in enumerate(rows, start=1):
            yield number, row, None, json.dumps(row, default=str)[:RAW_LIMIT]
    elif name.endswith(".csv"):
        try:
            with open(path, encoding="utf-8-sig", newline="") as fh:
                reader = csv.DictReader(fh)
                rows = [(reader.line_num, row) for row in reader]
        except UnicodeDecodeError as exc:
            raise RecallwatchError(
                f"{path}: not valid UTF-8 (byte {exc.start}); save the gold set as UTF-8."
            ) from None
        for number, row in rows:
            yield number, row, None, json.dumps(row)[:RAW_LIMIT]
    else:
        for number, text, reason, raw in read_json_lines(path, DEFAULT_MAX_RECORD_BYTES):
            if text is None:
                yield number, None, reason, raw
                continue
            try:
                record = json.loads(text)
            except ValueError:
                yield number, None, "invalid JSON", text[:RAW_LIMIT]
                continue
            if not isinstance(record, dict):
                yield number, None, "record is not a JSON object", text[:RAW_LIMIT]
                continue
            yield number, record, None, text[:RAW_LIMIT]


def _as_id(value) -> str | None:
    """An ID as the string it compares as (7 and "7" are one ID); the text is kept exactly as
    logged, so gold and log IDs meet unchanged. Blank or non-scalar is no ID."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | str):
        return None
    text = str(value)
    return text if text.strip() else None


def _as_list(value, field: str) -> tuple[list[str] | None, str | None]:
    """A list field of a golden: a JSON list, a JSON-encoded list (CSV), or '|'-separated
    text (CSV). IDs compare as strings."""
    if value is None or value == "":
        return [], None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                return None, f"{field} is not valid JSON"
        else:
            return [part.strip() for part in text.split("|") if part.strip()], None
    if not isinstance(value, list | tuple):
        return None, f"{field} is not a list"
    items = []
    for item in value:
        as_text = _as_id(item) if field == "gold_chunk_ids" else (
            item if isinstance(item, str) else None)
        if as_text is None:
            return None, f"{field} has an empty or non-string item"
        items.append(as_text)
    return items, None


def _check_golden(record: dict) -> tuple[dict | None, str | None]:
    gold_id = _as_id(record.get("gold_id"))
    if gold_id is None:
        return None, "missing or null required field: gold_id"
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        return None, "missing or null required field: question"
    reference = record.get("reference")
    if reference is not None and not isinstance(reference, str):
        return None, "reference is not a string"
    row = {"gold_id": gold_id, "question": question, "question_norm": normalize_text(question),
           "reference": reference or None}
    for field in _GOLD_LISTS:
        items, reason = _as_list(record.get(field), field)
        if reason:
            return None, reason
        # order kept, duplicates dropped: every gold item weighs the same, once
        row[field] = list(dict.fromkeys(items))
    return row, None


def ingest_gold(con, path: str, version: str) -> FileResult:
    """Load one gold-set version. A version is immutable: loading the same content again is a
    no-op, loading different content under a loaded version is an error."""
    if not version or not version.strip():
        raise RecallwatchError("--version must name the gold-set version (e.g. gold-2026-11).")
    (file,) = _single_file(path, TABLE_SUFFIXES)
    source, digest = str(file), file_hash(file)
    loaded = con.execute("SELECT content_hash, source FROM gold_versions WHERE gold_version = $v",
                         {"v": version}).fetchall()
    if loaded:
        if loaded[0][0] == digest:  # the same gold set, maybe from a copy of the file
            first = _previous(con, "gold", loaded[0][1], version)
            return FileResult(source, *(first[2:] if first else (0, 0, 0)), skipped=True)
        raise RecallwatchError(
            f"gold version {version!r} is already loaded from {loaded[0][1]} with different "
            "content; load the new gold set under a new --version."
        )

    good: dict[str, tuple[int, dict, str]] = {}
    bad: list[tuple[int, str, str]] = []
    n_read = 0
    for line, record, reason, raw in _gold_records(file):
        n_read += 1
        if record is not None:
            row, reason = _check_golden(record)
        if reason:
            bad.append((line, reason, raw))
            continue
        if row["gold_id"] in good:
            first_line, first_row, first_raw = good[row["gold_id"]]
            if first_row != row:
                bad.append((line, f"conflicting duplicate gold_id {row['gold_id']} "
                                  f"(first at line {first_line})", raw))
            continue  # an identical repeat is the same golden
        good[row["gold_id"]] = (line, row, raw)

    rows = [r for _, r, _ in good.values()]
    table = pa.table({
        "gold_version": pa.array([version] * len(rows), pa.string()),
        "gold_id": pa.array([r["gold_id"] for r in rows], pa.string()),
        "question": pa.array([r["question"] for r in rows], pa.string()),
        "question_norm": pa.array([r["question_norm"] for r in rows], pa.string()),
        "reference": pa.array([r["reference"] for r in rows], pa.string()),
        **{f: pa.array([r[f] for r in rows], pa.list_(pa.string())) for f in _GOLD_LISTS},
    })
    with transaction(con):
        run_script(con, "forget_source", {"source": source, "kind": "gold", "version": version})
        con.register("gold_batch", table)
        con.execute("INSERT INTO goldens SELECT * FROM gold_batch")
        con.unregister("gold_batch")
        _quarantine_rows(con, "gold", source, version, bad)
        con.execute(
            "INSERT INTO gold_versions SELECT $v, coalesce(max(seq), 0) + 1, $s, $h, $n "
            "FROM gold_versions", {"v": version, "s": source, "h": digest, "n": len(rows)})
        return _record_file(con, "gold", source, version, digest, "", n_read,
                            n_read - len(bad), len(bad))


def _single_file(path: str, suffixes: tuple[str, ...]) -> list[Path]:
    files = expand_paths([path], suffixes)
    if len(files) != 1:
        raise RecallwatchError(f"{path}: expected one file, found {len(files)}.")
    return files


def _quarantine_rows(con, kind: str, source: str, version: str | None,
                     rows: list[tuple[int, str, str]]) -> None:
    if not rows:
        return
    con.executemany(
        "INSERT INTO quarantine (kind, version, source, line, reason, raw) "
        "VALUES ($kind, $version, $source, $line, $reason, $raw)",
        [{"kind": kind, "version": version, "source": source, "line": line, "reason": reason,
          "raw": raw} for line, reason, raw in rows])


# ---------------------------------------------------------------------------------- index

def ingest_index(con, path: str, version: str) -> FileResult:
    """Load the manifest of one index version (chunk_id plus content_hash or text). A manifest
    is a snapshot: loading a version again replaces it."""
    if not version or not version.strip():
        raise RecallwatchError("--version must name the index version (e.g. idx-2026-10-28).")
    (file,) = _single_file(path, TABLE_SUFFIXES)
    source, digest = str(file), file_hash(file)
    # unchanged only if this very file is what the version holds now
    unchanged = _unchanged(_previous(con, "index", source, version), source, digest, "")
    if unchanged:
        return unchanged
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
    pick = {c: (f"CAST({q(c)} AS VARCHAR)" if c in columns else "NULL::VARCHAR")
            for c in ("index_version", "chunk_id", "content_hash", "text")}
    with transaction(con):
        try:
            con.execute(
                "CREATE OR REPLACE TEMP TABLE stage_index AS SELECT row_number() OVER () AS line,"
                f" {pick['index_version']} AS index_version, {pick['chunk_id']} AS chunk_id, "
                f"{pick['content_hash']} AS content_hash, {pick['text']} AS text FROM {reader}",
                {"path": source})
        except duckdb.Error as exc:
            raise RecallwatchError(f"{file}: cannot read the index manifest ({exc}).") from None
        run_script(con, "load_index", {"source": source, "version": version})
        n_read = con.execute("SELECT count(*) FROM stage_index").fetchall()[0][0]
        n_bad = _quarantined(con, "index", source, version)
        return _record_file(con, "index", source, version, digest, "", n_read,
                            n_read - n_bad, n_bad)


def _duckdb_reader(file: Path) -> str:
    name = file.name.lower()
    if name.endswith(".parquet"):
        return "read_parquet($path)"
    if name.endswith(".csv"):
        return "read_csv($path, header = true, all_varchar = true)"
    return "read_json($path, format = 'newline_delimited')"


