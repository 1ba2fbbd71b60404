"""Gold sets: load one version of a gold set (JSONL, CSV or Parquet) into `goldens`. Each
golden is checked row by row here, because its list fields arrive in three spellings (a JSON
list, a JSON-encoded list in a CSV cell, or '|'-separated text); a bad golden goes to
quarantine with its line and reason, and an identical repeat of a golden is the same golden.
A version is immutable: the same content again is a no-op, different content an error.
A RAGAS dataset is a gold set too: its samples (records with `user_input` and no `question`)
become goldens as pipeline/formats/ragas.py says."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import RecallwatchError
from pipeline.formats import first_wins, ragas, text_id
from pipeline.ingest.files import (
    DEFAULT_MAX_RECORD_BYTES,
    TABLE_SUFFIXES,
    UNCLOSED_QUOTE,
    FileResult,
    csv_field_count_reason,
    file_hash,
    invalid_json_reason,
    previous_ingest,
    quarantine_rows,
    read_json_lines,
    record_file,
    refuse_repeated_columns,
    single_file,
    spaced_csv_header,
)
from pipeline.warehouse import distinct_texts, normalize_text, run_script, transaction

_GOLD_LISTS = ("gold_chunk_ids", "gold_passages", "claims")


def ingest_gold(con, path: str, version: str, index_version: str | None = None) -> FileResult:
    """Load one gold-set version. A version is immutable: loading the same content again is a
    no-op, loading different content under a loaded version is an error. `index_version`: the
    index whose chunk IDs the gold set names (its chunks are then compared by content on every
    other index, sql/carry_named_gold.sql); None: the indexes that served before each rebuild
    (sql/carry_gold_ids.sql), or, for a loaded version, as it was loaded (a scheduled `run
    --gold` gives the same file every time). It is part of the version: naming another index
    for a loaded version is an error."""
    if not version or not version.strip():
        raise RecallwatchError("--version must name the gold-set version (e.g. gold-2026-11).")
    if index_version is not None and not index_version.strip():
        raise RecallwatchError("--index-version must name the index version whose chunk IDs "
                               "the gold set names (e.g. idx-2026-11), or be left out.")
    file = single_file(path, TABLE_SUFFIXES)
    source, digest = str(file), file_hash(file)
    loaded = con.execute("SELECT content_hash, source, index_version FROM gold_versions "
                         "WHERE gold_version = $v", {"v": version}).fetchall()
    if loaded and index_version is not None and loaded[0][2] != index_version:
        named = (f"names the chunks of index {loaded[0][2]!r}" if loaded[0][2] is not None
                 else "names the chunks of the indexes that served before each rebuild")
        raise RecallwatchError(
            f"gold version {version!r} is already loaded and {named}; load it under a new "
            "--version to compare its chunk IDs otherwise.")
    if loaded and loaded[0][0] == digest:  # the same gold set, maybe from a copy of the file
        first = previous_ingest(con, "gold", loaded[0][1], version)
        counts = (first.n_read, first.n_loaded, first.n_quarantined) if first else (0, 0, 0)
        return FileResult(source, *counts, skipped=True)

    rows, bad, n_read = _read_goldens(file)
    if loaded:
        # another file: the same goldens (re-exported, keys or rows in another order, another
        # format) are the same gold set; anything else is another version
        differ = _goldens_differing(con, version, rows)
        first = previous_ingest(con, "gold", loaded[0][1], version)
        if not differ and first is not None and first.n_quarantined == len(bad):
            return FileResult(source, n_read, n_read - len(bad), len(bad), skipped=True)
        what = (f"other goldens ({len(differ)} differ, e.g. {differ[0]!r})" if differ
                else f"{len(bad)} records quarantined where it had "
                     f"{first.n_quarantined if first else 0}")
        raise RecallwatchError(
            f"gold version {version!r} is already loaded from {loaded[0][1]}, and {source} "
            f"holds {what}; load the new gold set under a new --version."
        )
    if not rows:
        # the newest gold set is the one scoring uses: an empty one would make every request
        # no_gold_match without a word
        first = f" (line {bad[0][0]}: {bad[0][1]}" + (
            f"; {len(bad) - 1} more records quarantined)" if len(bad) > 1 else ")") if bad else ""
        raise RecallwatchError(
            f"{source}: no golden could be loaded from {n_read} records{first}; nothing was "
            f"loaded as gold version {version!r}.")
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
        quarantine_rows(con, "gold", source, version, bad)
        con.execute(
            "INSERT INTO gold_versions (gold_version, seq, source, content_hash, n_goldens, "
            "index_version) SELECT $v, coalesce(max(seq), 0) + 1, $s, $h, $n, $i "
            "FROM gold_versions",
            {"v": version, "s": source, "h": digest, "n": len(rows), "i": index_version})
        return record_file(con, "gold", source, version, digest, "", n_read,
                           n_read - len(bad), len(bad))


def _read_goldens(file: Path) -> tuple[list[dict], list[tuple[int, str, str]], int]:
    """The goldens of a gold-set file in file order, its quarantined records (line, reason,
    raw) and the number of records read. An identical repeat of a golden is the same golden;
    a later one with other content is quarantined."""
    good: dict[str, tuple[int, dict]] = {}
    bad: list[tuple[int, str, str]] = []
    n_read = 0
    for line, record, reason, raw in table_records(file):
        n_read += 1
        if record is not None and ragas.is_sample(record):
            record, reason = ragas.golden(record)
        if record is not None:
            row, reason = _check_golden(record)
        if reason:
            bad.append((line, reason, raw))
            continue
        if row["gold_id"] in good:
            first_line, first_row = good[row["gold_id"]]
            if first_row != row:
                bad.append((line, f"conflicting duplicate gold_id {row['gold_id']} "
                                  f"(first at line {first_line})", raw))
            continue  # an identical repeat is the same golden
        good[row["gold_id"]] = (line, row)
    return [row for _, row in good.values()], bad, n_read


def _goldens_differing(con, version: str, rows: list[dict]) -> list[str]:
    """The gold_ids, sorted, whose golden in `rows` is not the one loaded as `version` (or is
    only on one side)."""
    fields = ("question", "reference", *_GOLD_LISTS)
    loaded = {gold_id: values for gold_id, *values in con.execute(
        f"SELECT gold_id, {', '.join(fields)} FROM goldens WHERE gold_version = $v",
        {"v": version}).fetchall()}
    given = {row["gold_id"]: [row[f] for f in fields] for row in rows}
    return sorted(gold_id for gold_id in loaded.keys() | given.keys()
                  if loaded.get(gold_id) != given.get(gold_id))


_LINE_BREAK = re.compile(r"\r\n|\r|\n")

def table_records(path: Path, max_record_bytes: int | None = None,
                  ) -> Iterator[tuple[int, dict | None, str | None, str]]:
    """Yield (line, record or None, reason, raw) for each record of a JSONL/CSV/Parquet
    file (a gold set; a RAGAS dataset read as logs, with the log's --max-record-bytes); raw
    is the record as read, for quarantine."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:
            raise RecallwatchError(f"{path}: not a readable Parquet file ({exc}).") from None
        for number, row in enumerate(rows, start=1):
            yield number, row, None, json.dumps(row, default=str)
    elif name.endswith(".csv"):
        try:
            with open(path, encoding="utf-8-sig", newline="") as fh:
                # a file written "gold_id, question" (a space after each comma) names its
                # columns and gives its values without the spaces: " g-1" would join nothing
                reader = csv.DictReader(fh, skipinitialspace=spaced_csv_header(path))
                if reader.fieldnames:
                    reader.fieldnames = [name.strip() for name in reader.fieldnames]
                    refuse_repeated_columns(path, reader.fieldnames)
                # numbered by the line a record starts on (line_num is where it ends)
                rows, spans, end = [], [], reader.line_num
                for row in reader:
                    first, end = end + 1, reader.line_num
                    rows.append((end - _line_breaks(row), row))
                    if end > first:
                        spans.append((first, end))
            opened = _unclosed_quote(path, spans, reader.reader.dialect.skipinitialspace)
            if opened is not None:
                raise RecallwatchError(f"{path}: line {opened} {UNCLOSED_QUOTE}")
        except UnicodeDecodeError as exc:
            raise RecallwatchError(
                f"{path}: not valid UTF-8 (byte {exc.start}); save the gold set as UTF-8."
            ) from None
        except csv.Error as exc:   # a field over the record size limit, a NUL byte, ...
            raise RecallwatchError(f"{path}: not a readable CSV file (line {reader.line_num}: "
                                   f"{exc}).") from None
        for number, row in rows:
            reason = csv_field_count_reason(row, len(set(reader.fieldnames or ())))
            yield number, None if reason else row, reason, json.dumps(row)
    else:
        # a gold set has no option to raise its limit; a log has --max-record-bytes
        for number, text, reason, raw in read_json_lines(
                path, max_record_bytes or DEFAULT_MAX_RECORD_BYTES,
                limit_flag="--max-record-bytes" if max_record_bytes else None):
            if text is None:
                yield number, None, reason, raw
                continue
            try:
                record = json.loads(text, object_pairs_hook=first_wins)
            except (ValueError, RecursionError):   # RecursionError: nested past reading
                yield number, None, invalid_json_reason(text), text
                continue
            if not isinstance(record, dict):
                yield number, None, "record is not a JSON object", text
                continue
            if not _is_text(record):
                # Python reads a lone surrogate (\ud800) that no text holds; DuckDB's reader
                # refuses it in a log line, as here
                yield number, None, "invalid JSON", text
                continue
            yield number, record, None, text


def _is_text(record: dict) -> bool:
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unclosed_quote(path: Path, spans: list[tuple[int, int]],
                    skipinitialspace: bool) -> int | None:
    """The line on which a CSV record that runs over several lines (`spans`: its first and
    last line) opens a quoted value CSV cannot close, if one does. csv's lenient reader takes
    the lines after such a quote into its value, up to the file's end or the next quote
    anywhere, and the records on them vanish; read strictly, such a record is an error, while
    a quoted value that holds line breaks and closes is not."""
    if not spans:
        return None
    wanted = iter(spans)
    first, last = next(wanted)
    lines: list[str] = []
    with open(path, encoding="utf-8-sig", newline="") as fh:
        for number, line in enumerate(fh, start=1):
            if number < first:
                continue
            lines.append(line)
            if number < last:
                continue
            try:
                for _ in csv.reader(lines, strict=True, skipinitialspace=skipinitialspace):
                    pass
            except csv.Error:
                # the record's own first line: blank lines before it are skipped
                return first + next(i for i, text in enumerate(lines) if text.strip())
            lines = []
            span = next(wanted, None)
            if span is None:
                return None
            first, last = span
    return None


def _line_breaks(row: dict) -> int:
    """The line breaks inside a CSV record's quoted fields (a line's end: CRLF, CR or LF)."""
    values = [v for value in row.values()
              for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    return sum(len(_LINE_BREAK.findall(v)) for v in values)


def _blank(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _as_list(value, field: str) -> tuple[list[str] | None, str | None]:
    """A list field of a golden: a JSON list, a JSON-encoded list (CSV), a list as pandas
    writes one to CSV (its Python repr, as a RAGAS CSV holds), or '|'-separated text (CSV).
    Text starting with '[' that is none of these lists is refused, but for a passage or claim
    that does not end with ']' either: that is text ("[1] The fee ..."). IDs compare as
    strings."""
    if value is None or value == "":
        return [], None
    if isinstance(value, str):
        text = value.strip()
        parsed = ragas.list_text(text) if text.startswith("[") else None
        if parsed is None and text.startswith("[") and (
                field == "gold_chunk_ids" or text.endswith("]")):
            return None, f"{field} is not valid JSON"
        if parsed is None:
            return [part.strip() for part in text.split("|") if part.strip()], None
        value = parsed
    if not isinstance(value, list | tuple):
        return None, f"{field} is not a list"
    items = []
    for item in value:
        # a blank passage is nothing to compare, yet would count as needed (and never found):
        # refused as a blank gold chunk ID is; a blank claim is dropped (claims_from_gold.sql)
        as_text = text_id(item) if field == "gold_chunk_ids" else (
            item if isinstance(item, str) and (field == "claims" or item.strip()) else None)
        if as_text is None:
            return None, f"{field} has an empty or non-string item"
        items.append(as_text)
    return items, None


def _check_golden(record: dict) -> tuple[dict | None, str | None]:
    gold_id = text_id(record.get("gold_id"))
    if gold_id is None:
        # as in a log: a float (pandas' 7.0), a bool or a list is no ID
        return None, ("missing or null required field: gold_id" if _blank(record.get("gold_id"))
                      else "gold_id is not a string")
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        return None, ("missing or null required field: question" if _blank(question)
                      else "question is not a string")
    reference = record.get("reference")
    if reference is not None and not isinstance(reference, str):
        return None, "reference is not a string"
    row = {"gold_id": gold_id, "question": question, "question_norm": normalize_text(question),
           "reference": reference or None}
    for field in _GOLD_LISTS:
        items, reason = _as_list(record.get(field), field)
        if reason:
            return None, reason
        # order kept, duplicates dropped: every gold item weighs the same, once (a text as
        # compared, in NFC; a chunk ID as logged)
        row[field] = (list(dict.fromkeys(items)) if field == "gold_chunk_ids"
                      else distinct_texts(items))
    return row, None
