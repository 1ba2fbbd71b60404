"""Input files and their bookkeeping, shared by every kind of input (logs, gold sets, index
manifests): expanding paths, hashing content, reading JSON Lines with their line numbers, and
recording per file in `ingest_files` what was read, loaded and quarantined, so that a file whose
content and options are unchanged is skipped and every file's counts reconcile
(read = loaded + quarantined) before its transaction commits."""

from __future__ import annotations

import glob
import gzip
import hashlib
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import RecallwatchError

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
# The most of a bad record that quarantine keeps: enough to see what went wrong, bounded so a
# huge line cannot bloat the warehouse. SQL files receive it as $raw_limit.
RAW_LIMIT = 65536
LOG_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".parquet")
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


def single_file(path: str, suffixes: tuple[str, ...]) -> Path:
    """The one file a gold set or manifest is loaded from."""
    files = expand_paths([path], suffixes)
    if len(files) != 1:
        raise RecallwatchError(f"{path}: expected one file, found {len(files)}.")
    return files[0]


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")


UTF8_BOM = b"\xef\xbb\xbf"
SKIP_CHUNK = 1 << 20   # bytes read at a time past an oversized line


def read_json_lines(
    path: Path, max_record_bytes: int,
) -> Iterator[tuple[int, str | None, str | None, str | None]]:
    """Yield (line number, text, reason, raw) for each non-blank line. A line that is not UTF-8
    or is longer than the limit has text None and a reason; its raw bytes are kept, decoded
    with replacement characters and truncated. Memory stays bounded by the limit: a longer
    line is skipped in bounded chunks, never read whole."""
    try:
        with _open_binary(path) as fh:
            number = 0
            # the first read leaves room for a byte-order mark, which does not count
            while data := fh.readline(max_record_bytes + 1 + (len(UTF8_BOM) if not number
                                                              else 0)):
                number += 1
                if number == 1 and data.startswith(UTF8_BOM):
                    data = data[len(UTF8_BOM):]  # editors on Windows start files with one
                if len(data) > max_record_bytes:
                    raw = data[:RAW_LIMIT].rstrip(b"\r\n").decode("utf-8", errors="replace")
                    size = len(data) + _skip_rest_of_line(fh, data)
                    yield number, None, (
                        f"record too large: {size} bytes (limit {max_record_bytes}; "
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
        raise unreadable(path, exc) from None


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
