"""Input files and their bookkeeping, shared by every kind of input (logs, gold sets, index
manifests): expanding paths, hashing content, reading JSON Lines with their line numbers, and
recording per file in `ingest_files` what was read, loaded and quarantined, so that a file whose
content and options are unchanged is skipped and every file's counts reconcile
(read = loaded + quarantined) before its transaction commits."""

from __future__ import annotations

import csv
import glob
import gzip
import hashlib
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import RecallwatchError

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
# Python's csv module refuses a field over 128 KiB, which a passage or a retrieved context
# can pass; a CSV field may be as large as a record.
csv.field_size_limit(max(csv.field_size_limit(), DEFAULT_MAX_RECORD_BYTES))
# The most of a bad record that quarantine keeps: enough to see what went wrong, bounded so a
# huge line cannot bloat the warehouse. SQL files receive it as $raw_limit.
RAW_LIMIT = 65536
# Why a JSON Lines line is not a record: it does not parse, and a carriage return within it (a
# file whose records end in \r alone is one line) says why. SQL files receive it as $bare_cr.
INVALID_JSON = "invalid JSON"
BARE_CR = (r"invalid JSON: the line holds a carriage return (\r) before its end, as when "
           r"records end in \r alone; JSON Lines records end in \n (or \r\n)")


def invalid_json_reason(text: str) -> str:
    """The reason of a line of JSON Lines that does not parse."""
    return BARE_CR if "\r" in text.rstrip("\r") else INVALID_JSON


# .json: OTLP JSON trace exports (pipeline/formats/openinference.py)
# .json: OpenInference/OTLP trace files; .csv: RAGAS datasets (pipeline/formats)
LOG_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json", ".parquet", ".csv")
TABLE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".csv", ".parquet")  # gold sets, manifests


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


@dataclass(frozen=True)
class PreviousIngest:
    """What `ingest_files` recorded the last time a file was ingested."""
    content_hash: str
    options: str
    n_read: int
    n_loaded: int
    n_quarantined: int


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
            elif not p.is_file():
                # a pipe or a device would be read forever (or hang the content hash)
                raise RecallwatchError(
                    f"{p}: not a regular file (a pipe, socket or device); give a file or a "
                    "directory of files.")
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


def holds_files(path: str | Path, suffixes: tuple[str, ...]) -> bool:
    """Whether `path` is a file of `suffixes`, or a directory with one somewhere under it (an
    empty day partition, or one holding only a `_SUCCESS` marker, holds none)."""
    p = Path(path)
    files = p.rglob("*") if p.is_dir() else [p]
    return any(f.is_file() and f.name.lower().endswith(suffixes) for f in files)


# What a CSV file's line opening a quoted value CSV cannot close is told (index manifests, gold
# sets and RAGAS logs alike): every line after it would be read as part of that value.
UNCLOSED_QUOTE = ("opens a quoted value that is never closed, so every line after it would be "
                  'read as part of that value; close the quote (a quote inside a quoted value '
                  'is written twice: "").')


def spaced_csv_header(path: Path) -> bool:
    """Whether a CSV file's header is written with a space after each comma (`gold_id,
    question`): its values then come with that space too, and are read without it."""
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        header = next(csv.reader(fh), [])
    return any(name[:1].isspace() for name in header)


def refuse_repeated_columns(path: Path, names: list[str]) -> None:
    """One error for a CSV header that names a column twice: a reader keeps one of the two
    values (csv the last, DuckDB the first as it renames the other) and loses the other."""
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise RecallwatchError(
            f"{path}: the header names the column {twice[0]!r} twice; name each column once "
            "(nothing was loaded).")


def csv_field_count_reason(row: dict, names: int) -> str | None:
    """Why a CSV row cannot be read by the header's names: more values than names (csv puts
    the rest under the key None: an unquoted comma shifts nothing it could tell) or fewer
    (the last names get None), so no value is taken for another column's."""
    extra = row.get(None)
    if extra:
        return (f"{names + len(extra)} fields where the header names {names}: quote a value "
                "that holds a comma")
    given = sum(1 for key, value in row.items() if key is not None and value is not None)
    if given < names:
        return f"{given} fields where the header names {names}"
    return None


def single_file(path: str, suffixes: tuple[str, ...]) -> Path:
    """The one file a gold set or manifest is loaded from."""
    files = expand_paths([path], suffixes)
    if len(files) != 1:
        raise RecallwatchError(f"{path}: expected one file, found {len(files)}.")
    return files[0]


def file_hash(path: Path) -> str:
    """The file's SHA-256. The same pass counts the lines of an uncompressed JSON Lines file
    for `line_scan`, which the JSONL staging asks for next (reading a big file twice costs)."""
    digest = hashlib.sha256()
    lines = _LineCounter() if path.name.lower().endswith((".jsonl", ".ndjson")) else None
    # hashlib lets go of the GIL while it hashes a block, so the next block's lines are counted
    # on the other core meanwhile
    with open(path, "rb") as fh, ThreadPoolExecutor(max_workers=1) as hasher:
        pending = None
        for block in iter(lambda: fh.read(SCAN_BLOCK), b""):
            if pending:
                pending.result()
            pending = hasher.submit(digest.update, block)
            if lines:
                lines.add(block)
        if pending:
            pending.result()
    if lines:
        _remember_scan(path, lines.result())
    return digest.hexdigest()


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


UTF8_BOM = b"\xef\xbb\xbf"
SKIP_CHUNK = 1 << 20   # bytes read at a time past an oversized line
# Bytes read at a time when lines are only counted: a line longer than this spans two blocks,
# so its length is known exactly; shorter lines are only counted.
SCAN_BLOCK = 1 << 20
# The byte DuckDB splits a JSON Lines file on to read each line as one CSV column
# (pipeline/ingest/logs.py). Valid JSON never holds it raw (a control character is escaped in a
# string), but an invalid line may, and DuckDB then returns the line cut or rejects it; the
# line scan names such lines so they are judged from their bytes.
JSONL_DELIMITER = b"\x01"
# More lines holding it than this, and the file is no JSON Lines worth naming them in: the
# JSONL staging reads it line by line instead.
MAX_DELIMITED = 10_000


@dataclass(frozen=True)
class LineScan:
    """What one fast pass over a JSON Lines file's bytes knows: how many lines it has (blank
    ones included, a last line without a newline included) and the length in bytes of each
    line longer than SCAN_BLOCK (newline included, a leading byte-order mark not)."""
    lines: int
    long_lines: tuple[tuple[int, int], ...]   # (line number, bytes)
    delimited: tuple[int, ...]                # lines holding JSONL_DELIMITER
    # every line ends the same way (LF, or CR LF) and no other carriage return occurs
    one_line_ending: bool = True


_NEWLINE = ord("\n")


class _LineCounter:
    """Counts lines block by block: bytes.count runs at memory speed, and only a line that
    crosses a block boundary is measured."""

    def __init__(self) -> None:
        self.newlines = 0
        self.run = 0          # bytes of the current line seen so far
        self.first = b""      # the file's first bytes, for a byte-order mark
        self.long: list[tuple[int, int]] = []
        self.delimited: list[int] = []
        self.crs = self.crlfs = 0
        self.ends_in_cr = False

    def add(self, block: bytes) -> None:
        if len(self.first) < len(UTF8_BOM):
            self.first += block[:len(UTF8_BOM)]
        at, line, counted = block.find(JSONL_DELIMITER), self.newlines + 1, 0
        while at >= 0 and len(self.delimited) <= MAX_DELIMITED:
            line += block.count(b"\n", counted, at)
            counted = at
            if not self.delimited or self.delimited[-1] != line:
                self.delimited.append(line)
            at = block.find(JSONL_DELIMITER, at + 1)
        # `in` and numpy look for one byte at memory speed, bytes.count at a third of it
        crs = block.count(b"\r") if b"\r" in block else 0
        self.crs += crs
        self.crlfs += (crs and block.count(b"\r\n")) + (self.ends_in_cr and block.startswith(b"\n"))
        self.ends_in_cr = block.endswith(b"\r")
        count = int(np.count_nonzero(np.frombuffer(block, np.uint8) == _NEWLINE))
        if count:
            length = self.run + block.index(b"\n") + 1
            if length > SCAN_BLOCK:
                bom = len(UTF8_BOM) if not self.newlines and self.first.startswith(UTF8_BOM) else 0
                self.long.append((self.newlines + 1, length - bom))
            self.run = len(block) - block.rindex(b"\n") - 1
        else:
            self.run += len(block)
        self.newlines += count

    def result(self) -> LineScan:
        lines = self.newlines + (1 if self.run else 0)
        if self.run > SCAN_BLOCK:   # a long last line without a newline
            bom = len(UTF8_BOM) if not self.newlines and self.first.startswith(UTF8_BOM) else 0
            self.long.append((lines, self.run - bom))
        return LineScan(lines, tuple(self.long), tuple(self.delimited),
                        self.crs == 0 or self.crs == self.crlfs == self.newlines)


_scans: dict[tuple[str, int, int], LineScan] = {}


def _scan_key(path: Path) -> tuple[str, int, int]:
    stat = os.stat(path)
    return str(path), stat.st_size, stat.st_mtime_ns


def _remember_scan(path: Path, scan: LineScan) -> None:
    _scans.clear()   # only the file being ingested is asked for
    _scans[_scan_key(path)] = scan


def line_scan(path: Path) -> LineScan:
    """The LineScan of a JSON Lines file (gzipped or not): the one file_hash just made of
    this file, unchanged since, or a new pass."""
    known = _scans.get(_scan_key(path))
    if known:
        return known
    lines = _LineCounter()
    try:
        with _open_binary(path) as fh:
            for block in iter(lambda: fh.read(SCAN_BLOCK), b""):
                lines.add(block)
    except (OSError, EOFError, zlib.error) as exc:
        raise unreadable(path, exc) from None
    return lines.result()


def read_json_lines(
    path: Path, max_record_bytes: int, *, limit_flag: str | None = "--max-record-bytes",
) -> Iterator[tuple[int, str | None, str | None, str | None]]:
    """Yield (line number, text, reason, raw) for each non-blank line. A line that is not UTF-8
    or is longer than the limit has text None and a reason (naming `limit_flag`, the option
    that raises the limit, where the command has one); its raw bytes are kept, decoded with
    replacement characters and truncated. Memory stays bounded by the limit: a longer line is
    skipped in bounded chunks, never read whole."""
    try:
        with _open_binary(path) as fh:
            number = 0
            # the first read leaves room for a byte-order mark, which does not count
            while data := fh.readline(max_record_bytes + 1 + (len(UTF8_BOM) if not number
                                                              else 0)):
                number += 1
                judged = _judge_line(fh, number, data, max_record_bytes, limit_flag)
                if judged:
                    yield judged
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise unreadable(path, exc) from None


def json_lines_at(
    path: Path, numbers: list[int], max_record_bytes: int,
) -> Iterator[tuple[int, str | None, str | None, str | None]]:
    """What read_json_lines yields for the given lines only (a blank one yields nothing). The
    file is passed over twice: once counting newlines block by block to find where each line
    starts, once seeking to those places (forward only, so a gzipped file is not re-read)."""
    wanted = sorted(set(numbers))
    if not wanted:
        return
    try:
        with _open_binary(path) as fh:
            starts = _line_starts(fh, wanted)
            fh.seek(0)
            for number, start in starts:
                fh.seek(start)
                data = fh.readline(max_record_bytes + 1 + (len(UTF8_BOM) if number == 1 else 0))
                judged = _judge_line(fh, number, data, max_record_bytes)
                if judged:
                    yield judged
    except (OSError, EOFError, zlib.error) as exc:
        raise unreadable(path, exc) from None


def _line_starts(fh, wanted: list[int]) -> list[tuple[int, int]]:
    """(line number, byte offset of its start) of each wanted line (ascending) that exists."""
    starts: list[tuple[int, int]] = []
    targets = iter(wanted)
    target = next(targets)
    line, offset = 1, 0    # the line that starts at `offset` into the current block
    block_start = 0
    while target is not None:
        block = fh.read(SCAN_BLOCK)
        if not block:
            break
        while target is not None:
            if line == target:
                starts.append((target, block_start + offset))
                target = next(targets, None)
                continue
            need = target - line
            if block.count(b"\n", offset) < need:
                line += block.count(b"\n", offset)
                offset = 0
                break
            for _ in range(need):
                offset = block.index(b"\n", offset) + 1
            line = target
            if offset == len(block):   # the line starts in the next block
                offset = 0
                break
        block_start += len(block)
    return starts


def _judge_line(fh, number: int, data: bytes, max_record_bytes: int,
                limit_flag: str | None = "--max-record-bytes",
                ) -> tuple[int, str | None, str | None, str | None] | None:
    """The (line number, text, reason, raw) of line `number`, whose first bytes `data` were
    read from `fh` (at most the limit and one byte more); None for a blank line."""
    if number == 1 and data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]  # editors on Windows start files with one
    if len(data) > max_record_bytes:
        raw = data[:RAW_LIMIT].rstrip(b"\r\n").decode("utf-8", errors="replace")
        size = len(data) + _skip_rest_of_line(fh, data)
        advice = f"; raise it with {limit_flag}" if limit_flag else ""
        return number, None, (
            f"record too large: {size} bytes (limit {max_record_bytes}{advice})"), raw
    if not data.strip():
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raw = data[:RAW_LIMIT].rstrip(b"\r\n").decode("utf-8", errors="replace")
        return number, None, f"not valid UTF-8 (byte {exc.start})", raw
    return number, text.rstrip("\r\n"), None, None


def _skip_rest_of_line(fh, head: bytes) -> int:
    """Read past the rest of a line whose first bytes were `head`, in bounded chunks; returns
    how many more bytes the line had."""
    skipped = 0
    while not head.endswith(b"\n"):
        head = fh.readline(SKIP_CHUNK)
        if not head:
            break
        skipped += len(head)
    return skipped


def unreadable(path: Path, exc: Exception) -> RecallwatchError:
    return RecallwatchError(
        f"{path}: cannot read this file ({exc}); nothing from it was loaded. Fix or move it "
        "and run again (the files before it were loaded)."
    )


def previous_ingest(con, kind: str, source: str, version: str | None) -> PreviousIngest | None:
    rows = con.execute(
        "SELECT content_hash, options, n_read, n_loaded, n_quarantined FROM ingest_files "
        "WHERE kind = $kind AND source = $source AND version IS NOT DISTINCT FROM $version",
        {"kind": kind, "source": source, "version": version}).fetchall()
    return PreviousIngest(*rows[0]) if rows else None


def unchanged(previous: PreviousIngest | None, source: str, digest: str,
              options: str) -> FileResult | None:
    """The skipped result when the file and its options are what was ingested last time."""
    if previous and previous.content_hash == digest and previous.options == options:
        return FileResult(source, previous.n_read, previous.n_loaded, previous.n_quarantined,
                          skipped=True)
    return None


def record_file(con, kind: str, source: str, version: str | None, digest: str, options: str,
                n_read: int, n_loaded: int, n_quarantined: int) -> FileResult:
    """Record one ingested file, inside its transaction: counts that do not reconcile fail it
    (and roll back everything it loaded) rather than lose a record silently."""
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


def count_quarantined(con, kind: str, source: str, version: str | None) -> int:
    return con.execute(
        "SELECT count(*) FROM quarantine WHERE kind = $kind AND source = $source "
        "AND version IS NOT DISTINCT FROM $version",
        {"kind": kind, "source": source, "version": version}).fetchall()[0][0]


def quarantine_rows(con, kind: str, source: str, version: str | None,
                    rows: list[tuple[int, str, str]]) -> None:
    """Quarantine (line, reason, raw) rows found in Python; raw is truncated to RAW_LIMIT."""
    if not rows:
        return
    con.executemany(
        "INSERT INTO quarantine (kind, version, source, line, reason, raw) "
        "VALUES ($kind, $version, $source, $line, $reason, $raw)",
        [{"kind": kind, "version": version, "source": source, "line": line, "reason": reason,
          "raw": raw[:RAW_LIMIT]} for line, reason, raw in rows])
