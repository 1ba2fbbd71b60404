"""Log formats: recallwatch's own records (`native`, the data contract's JSONL/Parquet) and the
formats RAG teams already export, each turned into the native shape before validation, so a
record gets the same checks, quarantine and scores whatever format it came in.

A format other than native is one module that registers a `Format`: how to recognise a file by
its columns (Parquet) or its first records' keys (JSON), the columns it expects (named in the
error for a file that matches no format), and `to_native(path, out, options,
max_record_bytes)`, which writes the file's requests to `out` as a native Parquet file with one
more column, `line`: the line (JSON) or row (Parquet) of the input that the request came from,
1-based, so that quarantine points at the input, and optionally `problem`: why a record could
not be converted (its quarantine reason). `--format` chooses a format explicitly; otherwise
the first that recognises the file is used, native first."""

from __future__ import annotations

import csv
import gzip
import json
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import RecallwatchError

NATIVE = "native"
LINE_COLUMN = "line"
# A converted file's column saying why a record could not be converted (NULL when it could):
# the record is quarantined with that reason.
PROBLEM_COLUMN = "problem"
# The first JSON records read to recognise a file's format.
SNIFF_RECORDS = 100
SNIFF_BYTES = 8 * 1024 * 1024
# How a whole-document OTLP JSON file (an export, or a list of them) longer than SNIFF_BYTES
# begins: its first key.
OTLP_OPENING = re.compile(r'\s*\[?\s*\{\s*"(resourceSpans|resource_spans)"\s*:')
# A file holding either list of retrieved chunks is in the native format; one holding a
# request_id that no other format recognises too (its records are judged one by one, so a
# file of broken native records is quarantined record by record, not refused).
NATIVE_LISTS = frozenset({"retrieved", "retrieval_steps"})
NATIVE_KEYS = NATIVE_LISTS | {"request_id"}

_ITEM = pa.struct([("chunk_id", pa.string()), ("rank", pa.int64()), ("score", pa.float64()),
                   ("text", pa.string())])
# What a converter writes: the native log fields, the input's line, why a record could not be
# converted, and the input record as read (quarantine's raw).
NATIVE_SCHEMA = pa.schema([
    (LINE_COLUMN, pa.int64()),
    ("request_id", pa.string()),
    ("timestamp", pa.string()),
    ("query", pa.string()),
    ("gold_id", pa.string()),
    ("index_version", pa.string()),
    ("session_id", pa.string()),
    # numbers as float64: validation refuses a fractional one, and a value that is not a
    # number at all is written as NaN, which it refuses with the field's own reason
    ("index_size", pa.float64()),
    ("k", pa.float64()),
    ("turn", pa.float64()),
    ("tags", pa.map_(pa.string(), pa.string())),
    ("retrieved", pa.list_(_ITEM)),
    ("retrieval_steps", pa.list_(pa.list_(_ITEM))),
    ("response", pa.string()),
    (PROBLEM_COLUMN, pa.string()),
    ("input", pa.string()),
])


@dataclass(frozen=True)
class Format:
    name: str
    expects: str                                  # e.g. "user_input, retrieved_context_ids"
    recognises: Callable[[frozenset[str]], bool]  # by the file's column / key names
    to_native: Callable[[Path, Path, object, int], None]


_FORMATS: dict[str, Format] = {}


def text_id(value) -> str | None:
    """An ID read by Python (a gold set, a converted format) as the text it compares as, as a
    log's is: text, or a whole number (7 and "7" are one ID; a decimal of scale 0, as Spark and
    database exports write one, is its integer). A float (pandas' 7.0), a decimal of another
    scale, a bool, a list or blank text is no ID: None."""
    if isinstance(value, Decimal) and value.is_finite() and value.as_tuple().exponent == 0:
        value = int(value)
    if value is None or isinstance(value, bool) or not isinstance(value, int | str):
        return None
    text = str(value)
    return text if text.strip() else None


def is_blank(value) -> bool:
    """No value: None, NaN (a missing cell as pandas writes it) or blank text."""
    return (value is None or (isinstance(value, float) and value != value)
            or (isinstance(value, str) and not value.strip()))


def register(fmt: Format) -> Format:
    _FORMATS[fmt.name] = fmt
    return fmt


def known_formats() -> tuple[str, ...]:
    _register_built_in()
    return (NATIVE, *_FORMATS)


def is_parquet(path: Path) -> bool:
    return path.name.lower().endswith(".parquet")


def is_csv(path: Path) -> bool:
    return path.name.lower().endswith(".csv")


def column_names(path: Path) -> tuple[frozenset[str], bool]:
    """The column names of a Parquet file, or the keys of the first JSON records of a JSON
    Lines file (a whole-document `.json` file: its top-level keys, or those of the objects of
    a top-level list); and whether any record
    could be read at all."""
    if is_parquet(path):
        try:
            return frozenset(pq.read_schema(path).names), True
        except Exception:  # a broken file: staging names the problem
            return frozenset(), False
    if is_csv(path):   # only other formats come as CSV (a RAGAS dataset): its header
        try:
            with open(path, encoding="utf-8-sig", newline="") as fh:
                header = next(csv.reader(fh), None)
        except (OSError, UnicodeDecodeError):
            return frozenset(), False
        return frozenset(h.strip() for h in header or ()), bool(header)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    keys: set[str] = set()
    parsed = False
    try:
        with opener(path, "rb") as fh:
            for _ in range(SNIFF_RECORDS):
                line = fh.readline(SNIFF_BYTES)
                if not line:
                    break
                try:
                    record = json.loads(line.decode("utf-8-sig"))
                except (ValueError, RecursionError):   # broken, or nested past Python's stack
                    continue
                if isinstance(record, dict):
                    parsed = True
                    keys.update(record)
            if not parsed and path.name.lower().endswith(".json"):
                # one (pretty-printed) document rather than one record a line
                fh.seek(0)
                head = fh.read(SNIFF_BYTES + 1)
                if len(head) <= SNIFF_BYTES:
                    try:
                        doc = json.loads(head.decode("utf-8-sig"))
                    except (ValueError, RecursionError):
                        doc = None
                    if isinstance(doc, dict):
                        return frozenset(doc), True
                    if isinstance(doc, list) and doc and all(isinstance(d, dict) for d in doc):
                        return frozenset().union(*doc), True   # a list of exports
                else:   # too long to parse here: an OTLP document opens with its resourceSpans
                    opening = OTLP_OPENING.match(head.decode("utf-8-sig", errors="replace"))
                    if opening:
                        return frozenset({opening.group(1)}), True
    except (OSError, EOFError, UnicodeDecodeError):
        return frozenset(), False
    return frozenset(keys), parsed


def detect(path: Path) -> str:
    """The format of a log file, from its columns. A file none recognises is refused with the
    columns each format expects; a file with no readable record is native (its lines are
    quarantined one by one)."""
    _register_built_in()
    names, parsed = column_names(path)
    csv_file = is_csv(path)   # native logs are JSON Lines or Parquet, never CSV
    if csv_file and not parsed and path.stat().st_size == 0:
        return NATIVE   # an empty file holds no record in any format: read 0, as an empty .jsonl
    if not csv_file and (not parsed or names & NATIVE_LISTS):
        return NATIVE
    for fmt in _FORMATS.values():
        if fmt.recognises(names):
            return fmt.name
    if names & NATIVE_KEYS and not csv_file:
        return NATIVE   # native records, if broken ones: each is quarantined with its reason
    expected = [f"{NATIVE} (request_id, timestamp, retrieved or retrieval_steps; "
                "JSON Lines or Parquet)"]
    expected += [f"{f.name} ({f.expects})" for f in _FORMATS.values()]
    shown = ", ".join(sorted(names)[:12]) + (", ..." if len(names) > 12 else "")
    raise RecallwatchError(
        f"{path}: matches no known log format (its columns: {shown}); expected one of: "
        f"{'; '.join(expected)}. Give --format to choose one.")


def get_format(name: str) -> Format | None:
    """The registered format by name (None for native); an unknown name is one error."""
    _register_built_in()
    if name == NATIVE:
        return None
    if name not in _FORMATS:
        raise RecallwatchError(
            f"unknown format {name!r}; choose one of {', '.join(known_formats())}.")
    return _FORMATS[name]


def _register_built_in() -> None:
    """Formats register themselves when their module is imported; import the built-in ones."""
    import importlib

    for module in _BUILT_IN:
        importlib.import_module(module)


# Modules under pipeline/formats/ that register a Format when imported.
_BUILT_IN: tuple[str, ...] = ("pipeline.formats.openinference", "pipeline.formats.ragas")


# DuckDB's name for a Parquet row's number, which ingest reads as the record's line; a column
# of the file by that name would hide it.
ROW_NUMBER = "file_row_number"


def _has_row_number(path: Path) -> bool:
    try:
        return is_parquet(path) and ROW_NUMBER in pq.read_schema(path).names
    except Exception:  # a broken file: ingest names it as one
        return False


def _without_row_number(path: Path, out: Path) -> Path:
    """A copy of a native Parquet file without its column `file_row_number` (no field
    recallwatch reads), row for row in the same order, written one row group at a time."""
    source = pq.ParquetFile(path)
    keep = [name for name in source.schema_arrow.names if name != ROW_NUMBER]
    with pq.ParquetWriter(out, source.schema_arrow.remove(
            source.schema_arrow.get_field_index(ROW_NUMBER))) as writer:
        for group in range(source.num_row_groups):
            writer.write_table(source.read_row_group(group, columns=keep))
    return out


@contextmanager
def native_file(path: Path, options, max_record_bytes: int,
                ) -> Iterator[tuple[Path, str | None]]:
    """A fetched log file in the native format, for as long as the block runs: the file itself
    (line numbers are its own), or its requests converted to a temporary native Parquet file
    whose `line` column holds each request's line in `path`. `options` is the source's
    pipeline.sources.ReadOptions (its `fmt` chooses; None detects)."""
    fmt = get_format(options.fmt or detect(path))
    if fmt is None and getattr(options, "columns", ()):
        # a mapping given and not used would load the file as if it had not been given
        shown = ",".join(f"{name}={column}" for name, column in options.columns)
        raise RecallwatchError(
            f"{path}: --columns {shown} does not apply to a log in the native format, whose "
            "fields are read under their own names; it maps the fields of a postgresql:// "
            "table and of the ragas and openinference formats (--format).")
    if fmt is None and _has_row_number(path):
        with tempfile.TemporaryDirectory(prefix="recallwatch-format-") as scratch:
            yield _without_row_number(path, Path(scratch) / "native.parquet"), None
        return
    if fmt is None:
        yield path, None
        return
    with tempfile.TemporaryDirectory(prefix="recallwatch-format-") as scratch:
        out = Path(scratch) / "native.parquet"
        fmt.to_native(path, out, options, max_record_bytes)
        yield out, LINE_COLUMN


class JsonObject(dict):
    """A JSON object as read: `repeated` names its first key given twice (None: none was)."""

    repeated: str | None = None


def first_wins(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose repeated key keeps its first value, as DuckDB's JSON reader reads
    a log line; the key is noted (JsonObject.repeated) for fields that refuse one, as tags."""
    record = JsonObject()
    for key, value in pairs:
        if key in record:
            record.repeated = record.repeated or key
        else:
            record[key] = value
    return record
