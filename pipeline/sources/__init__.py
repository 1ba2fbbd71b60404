"""Sources: where request logs are read from. Anywhere a log path is accepted (the CLI, `run`,
the DAGs' configuration) it may be a local file, directory or glob, an `s3://bucket/prefix/`
URI (pipeline/sources/s3.py) or a `postgresql://` URI with a table (pipeline/sources/postgres.py).

A source resolves into deliveries: the units ingest loads in one transaction each and keeps
in `ingest_files` (a local file, an S3 object, one day of a PostgreSQL table). A delivery has
the name that `ingest_files` and `quarantine` record, a content identity that is cheap to
learn where the source allows it (a file's hash, an object's ETag, a query's checksum), so an
unchanged delivery is skipped before anything is fetched, and `fetch()`, which gives its
content as a local file. Its format (recallwatch's own log records, OpenInference spans, a
RAGAS dataset) is then read by pipeline/formats, which turns any other format into the
native shape; everything after that (validation, quarantine, loading) is the same for every
source and format."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pipeline.errors import RecallwatchError


@dataclass(frozen=True)
class ReadOptions:
    """How to read logs, beyond where they are. `fmt`: native | openinference | ragas, None to
    detect from the columns. `table` and `columns` (field -> column where the names differ)
    are for table sources. `start`/`end`: the interval wanted; a source that can (hive
    partitions, a table's timestamp column) reads only that, others read everything given."""

    fmt: str | None = None
    table: str | None = None
    columns: tuple[tuple[str, str], ...] = ()
    start: datetime | None = None
    end: datetime | None = None

    def fingerprint(self) -> str:
        """What of these options changes which records a delivery loads (so a change re-reads
        it); the interval only chooses deliveries and is not part of it."""
        parts = [f"format={self.fmt or 'detect'}"]
        if self.columns:
            parts.append("columns=" + ",".join(f"{k}:{v}" for k, v in self.columns))
        return ";".join(parts)


class Delivery(Protocol):
    source: str   # recorded in ingest_files.source and quarantine.source
    # Optional `json_records = True`: fetch() gives native JSON records with their lines (a
    # table's keys) as Parquet `line`, `record`, staged like JSONL lines, not by format.
    # Optional `undated = True`: records of no day (a table's rows without a timestamp), read
    # whatever the interval; an interval's quality check leaves them to ingest's quarantine.

    def digest(self) -> str: ...

    def fetch(self) -> AbstractContextManager[Path]: ...


@dataclass(frozen=True)
class LocalFile:
    """A file on this machine: its path is its name, its SHA-256 its identity."""

    path: Path

    @property
    def source(self) -> str:
        return str(self.path)

    def digest(self) -> str:
        from pipeline.ingest.files import file_hash

        return file_hash(self.path)

    def fetch(self) -> AbstractContextManager[Path]:
        return nullcontext(self.path)


def scheme(given: str) -> str | None:
    """The URI scheme of a given source (s3, postgresql), None for a local path."""
    head, sep, _ = given.partition("://")
    return head.lower() if sep and head[:1].isalpha() and head.isalnum() else None


def deliveries(given: list[str], suffixes: tuple[str, ...],
               options: ReadOptions | None = None) -> list[Delivery]:
    """The deliveries of the given sources, in the order given, each once."""
    options = options or ReadOptions()
    found: list[Delivery] = []
    local: list[str] = []

    def flush() -> None:
        if local:
            from pipeline.ingest.files import expand_paths

            found.extend(LocalFile(p) for p in expand_paths(local, suffixes))
            local.clear()

    for item in given:
        kind = scheme(item)
        if kind is None:
            local.append(item)
            continue
        flush()
        if kind == "s3":
            from pipeline.sources.s3 import s3_deliveries

            found.extend(s3_deliveries(item, suffixes, options))
        elif kind in ("postgresql", "postgres"):
            from pipeline.sources.postgres import postgres_deliveries

            found.extend(postgres_deliveries(item, options))
        else:
            raise RecallwatchError(
                f"{item}: unknown source scheme {kind}://; give a local path, s3://BUCKET/PREFIX "
                "or postgresql://USER@HOST:PORT/DB with --table.")
    flush()
    if options.table and not any(scheme(g) in ("postgresql", "postgres") for g in given):
        raise RecallwatchError("--table names a table of a postgresql:// source; none was given.")
    return list({d.source: d for d in found}.values())



def read_options(*, fmt: str | None = None, table: str | None = None,
                 columns: str | None = None, start: datetime | None = None,
                 end: datetime | None = None) -> ReadOptions:
    """ReadOptions from the CLI's --format/--table/--columns (or, when not given, the
    environment's RECALLWATCH_LOG_FORMAT / RECALLWATCH_LOG_TABLE / RECALLWATCH_LOG_COLUMNS, as a
    scheduled deployment sets them) and the interval. `columns` is FIELD=COLUMN[,...]."""
    from pipeline.formats import get_format
    from pipeline.state import check_window

    check_window(start, end)   # an interval that holds nothing reads nothing: say so
    fmt = fmt or os.environ.get("RECALLWATCH_LOG_FORMAT") or None
    table = table or os.environ.get("RECALLWATCH_LOG_TABLE") or None
    text = columns if columns is not None else os.environ.get("RECALLWATCH_LOG_COLUMNS", "")
    if fmt:
        get_format(fmt)   # an unknown name is one error, before anything is read
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, column = item.partition("=")
        if not sep or not name.strip() or not column.strip():
            raise RecallwatchError(
                f"--columns takes FIELD=COLUMN[,FIELD=COLUMN...], e.g. "
                f"request_id=id,timestamp=created_at; got {item!r}.")
        pairs.append((name.strip(), column.strip()))
    return ReadOptions(fmt=fmt, table=table, columns=tuple(pairs), start=start, end=end)
