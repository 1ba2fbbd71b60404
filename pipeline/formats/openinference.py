"""OpenInference spans as request logs: traces exported from Arize Phoenix (its spans
dataframe saved as Parquet or JSON Lines: one row per span, `context.trace_id`,
`context.span_id`, `parent_id`, `span_kind`, `start_time`, `attributes.<name>`) or written by
any OpenTelemetry exporter as OTLP JSON (`resourceSpans[].scopeSpans[].spans[]`, one
ExportTraceServiceRequest per line as the collector's file exporter writes, or one document
per `.json` file). Attribute names are the OpenInference semantic conventions'
(openinference.semconv.trace), imported rather than spelled out.

A request is a trace. Its request_id is the trace id (hex); its timestamp the start of its root
span (the span without a parent in the file); its query the root span's `input.value` (the
text under `query`/`input`/`question` when that value is a JSON object), else the first
retriever's; `session.id` its session. Its RETRIEVER spans give the retrieved chunks
(`retrieval.documents.{i}.document.id` / `.score` / `.content`, in order): one RETRIEVER span
is `retrieved`, several are the steps of an agentic search (`retrieval_steps`, in start
order), scored over their union. Fields OpenInference has no attribute for come from the
`metadata` JSON attribute: `index_version`, `gold_id`, `index_size`, `k` and `turn` under
those keys (the root span's first, then the retrievers'); `--columns FIELD=ATTRIBUTE` reads a
field from another attribute instead (`metadata.<key>` for a metadata key). The other metadata
keys with their values, and each of `tag.tags` (as `<tag>=true`), become the request's tags.
The root span's `output.value` is kept as `response`.

Nothing is dropped: a trace without a RETRIEVER span (the app retrieved nothing that could be
scored) is written without a retrieval and so quarantined, and a line that is not an OTLP
export is quarantined too; the converted record's `problem` says why, and shows in the
quarantined raw record. A request's `line` is the place of its root span among the file's
spans, counted from 1 in file order: its row in a Phoenix table, and in an OTLP file its line
when each line holds one span (a simple span processor's exports); a bad line takes the next
place. So a file's read count is its traces and bad lines, not its spans. A trace is read from
one file: spans of one trace split over two files are two requests with one request_id."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)

from pipeline.errors import RecallwatchError
from pipeline.formats import (
    LINE_COLUMN,
    NATIVE_SCHEMA,
    Format,
    is_blank,
    is_parquet,
    register,
    text_id,
)
from pipeline.ingest.files import RAW_LIMIT, read_json_lines

NAME = "openinference"
RETRIEVER = OpenInferenceSpanKindValues.RETRIEVER.value
LLM = OpenInferenceSpanKindValues.LLM.value
KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
DOCUMENTS = SpanAttributes.RETRIEVAL_DOCUMENTS
METADATA = SpanAttributes.METADATA
TAGS = SpanAttributes.TAG_TAGS

# Where each native field is read from, unless --columns names another attribute.
FIELD_ATTRIBUTES = {
    "query": SpanAttributes.INPUT_VALUE,
    "session_id": SpanAttributes.SESSION_ID,
    "index_version": f"{METADATA}.index_version",
    "gold_id": f"{METADATA}.gold_id",
    "index_size": f"{METADATA}.index_size",
    "k": f"{METADATA}.k",
    "turn": f"{METADATA}.turn",
}
# The keys of a JSON `input.value` that hold the user's question (LangChain chains log
# {"input": ...} or {"question": ...}; LlamaIndex query engines {"query_str": ...}).
QUERY_KEYS = ("query", "input", "question", "query_str", "user_input")

# Phoenix's spans dataframe (px.Client().get_spans_dataframe()).
TRACE_ID_COLUMNS = ("context.trace_id", "trace_id")
SPAN_ID_COLUMNS = ("context.span_id", "span_id")
PARENT_ID_COLUMN = "parent_id"
KIND_COLUMN = "span_kind"
START_COLUMN = "start_time"
ATTRIBUTE_PREFIX = "attributes."
# Attribute columns never needed for a request: prompts, messages and vectors can be large.
SKIPPED_PREFIXES = ("attributes.llm.", "attributes.embedding.")

# OTLP JSON (lowerCamelCase per the OTLP/JSON spec; protobuf's own field names accepted too).
OTLP_KEYS = frozenset({"resourceSpans", "resource_spans"})
# An OTLP export line holds a whole batch of spans, far more than one log record: it may be
# this many times as long as a record may be (--max-record-bytes).
OTLP_LINE_RECORDS = 16

_HEX_ID = re.compile(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}")
_DOCUMENT_KEY = re.compile(re.escape(DOCUMENTS) + r"\.(\d+)\.(.+)")

_NUMBER_FIELDS = ("index_size", "k", "turn")


@dataclass
class Span:
    number: int                  # place among the file's spans, from 1
    trace_id: str | None
    span_id: str | None
    parent_id: str | None
    kind: str | None
    start: datetime | None
    attributes: dict             # attribute name -> value; `metadata` parsed into a dict
    documents: list[dict] = field(default_factory=list)   # {id, score, content} in order
    # the start as written, when it is text and no count of the epoch's nanoseconds: the
    # request's timestamp then, read and judged as a native log's
    logged_start: str | None = None

    def attribute(self, name: str):
        """An attribute's value, or a key of the `metadata` attribute as `metadata.<key>`;
        None when absent or blank."""
        value = self.attributes.get(name)
        if value is None and name.startswith(METADATA + "."):
            metadata = self.attributes.get(METADATA)
            if isinstance(metadata, dict):
                value = metadata.get(name[len(METADATA) + 1:])
        return None if isinstance(value, str) and not value.strip() else value


@dataclass
class Problem:
    number: int
    text: str
    raw: str | None = None


def recognises(names: frozenset[str]) -> bool:
    if names & OTLP_KEYS:
        return True
    return bool(names & set(TRACE_ID_COLUMNS)) and (
        KIND_COLUMN in names or f"{ATTRIBUTE_PREFIX}{KIND}" in names)


def to_native(path: Path, out: Path, options, max_record_bytes: int) -> None:
    """Write the traces of an OpenInference file as native requests (see the module); a line
    of a JSON Lines export may hold a batch of spans, up to OTLP_LINE_RECORDS times the
    record limit."""
    sources = _field_attributes(getattr(options, "columns", ()) or ())
    if is_parquet(path):
        items = list(_phoenix_parquet(path))
    else:
        items = list(_json_spans(path, OTLP_LINE_RECORDS * max_record_bytes))
    spans = [s for s in items if isinstance(s, Span)]
    rows = [_problem_row(p) for p in items if isinstance(p, Problem)]
    rows += [_problem_row(Problem(s.number, "a span without a trace id")) for s in spans
             if not s.trace_id]
    traces: dict[str, list[Span]] = {}
    for span in spans:
        if span.trace_id:
            traces.setdefault(span.trace_id, []).append(span)
    for trace_id, trace in traces.items():
        spans_once, repeated = _spans_once(trace)
        row = _request(trace_id, spans_once, sources)
        if repeated and "problem" not in row:
            row = {**{k: v for k, v in row.items()
                      if k not in ("retrieved", "retrieval_steps")}, "problem": repeated}
        rows.append(row)
    rows.sort(key=lambda row: row[LINE_COLUMN])
    pq.write_table(pa.Table.from_pylist(rows, schema=NATIVE_SCHEMA), out)


def _field_attributes(columns) -> dict[str, str]:
    sources = dict(FIELD_ATTRIBUTES)
    for name, attribute in columns:
        if name not in sources:
            raise RecallwatchError(
                f"--columns: {name} cannot be read from another attribute in OpenInference "
                f"spans; these can: {', '.join(sources)} (e.g. "
                f"index_version={METADATA}.index).")
        sources[name] = attribute
    return sources


# ------------------------------------------------------------------------------ one request

def _request(trace_id: str, trace: list[Span], sources: dict[str, str]) -> dict:
    by_start = sorted(trace, key=lambda s: (s.start is None, s.start or datetime.min, s.number))
    root = _root(trace)
    retrievers = [s for s in by_start if s.kind == RETRIEVER]
    # root first, then the retrievers: request-wide attributes are usually set on both
    looked_at = [root] + [s for s in retrievers if s is not root]

    def first(name: str):
        return next((v for s in looked_at if (v := s.attribute(name)) is not None), None)

    ids = {"gold_id": first(sources["gold_id"]),
           "index_version": first(sources["index_version"]),
           "session_id": next((v for s in [root, *by_start]
                               if (v := s.attribute(sources["session_id"])) is not None), None)}
    # an ID is text or a whole number, as in a native record: another value (7.0, true, [7])
    # is quarantined with the reason a native record gets, never stored as made-up text
    wrong = [name for name, value in ids.items()
             if text_id(value) is None and not is_blank(value)]
    row = {LINE_COLUMN: root.number, "request_id": trace_id,
           "timestamp": (root.logged_start if root.logged_start is not None
                         else _iso(root.start) if root.start else None),
           "query": _query(first(sources["query"])),
           **{name: None if name in wrong else _text(value) for name, value in ids.items()},
           "tags": _tags(looked_at, sources),
           "response": _text(root.attribute(SpanAttributes.OUTPUT_VALUE)) or _text(next(
               (s.attribute(SpanAttributes.OUTPUT_VALUE) for s in reversed(by_start)
                if s.kind == LLM and s.attribute(SpanAttributes.OUTPUT_VALUE) is not None),
               None))}
    for name in _NUMBER_FIELDS:
        row[name] = _number(first(sources[name]))
    steps = [[_item(doc, rank) for rank, doc in enumerate(s.documents, start=1)]
             for s in retrievers]
    if wrong:
        row["problem"] = f"{wrong[0]} is not a string"
    elif not steps:
        row["problem"] = "trace has no RETRIEVER span: nothing was retrieved to score"
    elif len(steps) == 1:
        row["retrieved"] = steps[0]
    else:
        row["retrieval_steps"] = steps
    return row


def _spans_once(trace: list[Span]) -> tuple[list[Span], str | None]:
    """A trace's spans with a span given again (the trace exported twice into one file) kept
    once, and the reason to quarantine the trace when a span id comes twice with other
    content (which copy holds the request cannot be told)."""
    first: dict[str, Span] = {}
    kept = []
    for span in trace:
        if span.span_id is None or span.span_id not in first:
            kept.append(span)
            if span.span_id is not None:
                first[span.span_id] = span
        elif replace(first[span.span_id], number=0) != replace(span, number=0):
            return kept, (f"span {span.span_id} is given twice with other content (spans "
                          f"{first[span.span_id].number} and {span.number})")
    return kept, None


def _root(trace: list[Span]) -> Span:
    """The span without a parent (or whose parent is not in the file), earliest first."""
    ids = {s.span_id for s in trace if s.span_id}
    roots = [s for s in trace if not s.parent_id or s.parent_id not in ids] or trace
    return min(roots, key=lambda s: (bool(s.parent_id), s.start is None,
                                     s.start or datetime.min, s.number))


def _item(doc: dict, rank: int) -> dict:
    chunk_id = doc.get("id")
    if isinstance(chunk_id, bool) or not isinstance(chunk_id, int | str):
        chunk_id = None    # quarantined by validation, naming the item
    score = doc.get("score")
    content = doc.get("content")
    return {"chunk_id": None if chunk_id is None else str(chunk_id), "rank": rank,
            "score": float(score) if isinstance(score, int | float)
            and not isinstance(score, bool) else None,
            "text": content if isinstance(content, str) else None}


def _query(value) -> str | None:
    """input.value as the user's question: the text itself, or the question inside a JSON
    object."""
    if not isinstance(value, str):
        return _text(value)
    text = value.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            for key in QUERY_KEYS:
                if isinstance(parsed.get(key), str):
                    return parsed[key]
    return value


def _tags(spans: list[Span], sources: dict[str, str]) -> list[tuple[str, str]] | None:
    """Metadata keys not read as a field, then each tag of tag.tags as `<tag>=true`; the
    first span (the root) wins a key."""
    used = {a[len(METADATA) + 1:] for a in sources.values() if a.startswith(METADATA + ".")}
    tags: dict[str, str] = {}
    for span in spans:
        metadata = span.attributes.get(METADATA)
        if isinstance(metadata, dict):
            for key, value in metadata.items():
                if key not in used and value is not None and key not in tags:
                    # as a native log stores a tag that is no string: its JSON, compact, keys
                    # in their order, characters as they are
                    tags[key] = value if isinstance(value, str) else json.dumps(
                        value, ensure_ascii=False, separators=(",", ":"))
    for span in spans:
        listed = span.attributes.get(TAGS)
        if isinstance(listed, list | tuple):
            for tag in listed:
                if isinstance(tag, str) and tag.strip() and tag not in tags:
                    tags[tag] = "true"
    return list(tags.items()) or None


def _text(value) -> str | None:
    """An attribute's value as text: strings as they are, anything else as JSON (7, true)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _number(value) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return float("nan")


def _iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _problem_row(problem: Problem) -> dict:
    return {LINE_COLUMN: problem.number, "problem": problem.text,
            "input": problem.raw[:RAW_LIMIT] if problem.raw else None}


# ------------------------------------------------------------------------- reading values

def _logged_start(value) -> str | None:
    """A start written as text other than digits, as written: the native checks read it
    (a lower-case z, an impossible day), so a trace's time is judged as a log line's."""
    if isinstance(value, str) and value.strip() and not value.strip().isdigit():
        return value
    return None


def _instant(value) -> datetime | None:
    """A span's start as a UTC datetime: a timestamp value (naive means UTC), ISO-8601 text,
    or a number since the epoch, its unit told by its size (pandas writes milliseconds to
    JSON, OTLP nanoseconds); 0, OTLP's unset start, is none."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            value = int(text)
        else:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                return None
            return _instant(parsed)
    # 0 is OTLP's unset start, not 1970-01-01
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value \
            or value == 0:
        return None
    try:   # NaN is no time, and a number beyond year 9999 none Python holds: no start
        for scale in (1e9, 1e6, 1e3):
            if abs(value) >= scale * 1e8:    # past 1973 in this unit
                seconds, rest = divmod(int(value), int(scale))
                return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
                        # truncated, as a native timestamp's digits past the microsecond
                        + timedelta(microseconds=rest * 1_000_000 // int(scale)))
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=value)
    except (OverflowError, ValueError):
        return None


def _id(value) -> str | None:
    """A trace or span id as lower-case hex: OTLP JSON writes hex, protobuf's JSON printer
    base64 (of 16 or 8 bytes)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.startswith("0x"):
        text = text[2:]
    if _HEX_ID.fullmatch(text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text
    return raw.hex() if len(raw) in (8, 16) else text


def _metadata(value):
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def _documents(value) -> list[dict]:
    """retrieval.documents of a Phoenix row: a list of {document.id, ...} (or its JSON)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, list | tuple):
        return []
    return [{"id": d.get(DocumentAttributes.DOCUMENT_ID),
             "score": d.get(DocumentAttributes.DOCUMENT_SCORE),
             "content": d.get(DocumentAttributes.DOCUMENT_CONTENT)}
            if isinstance(d, dict) else {} for d in value]


# ----------------------------------------------------------------------- Phoenix dataframe

def _phoenix_span(number: int, row: dict) -> Span:
    attributes = {name[len(ATTRIBUTE_PREFIX):]: value for name, value in row.items()
                  if name.startswith(ATTRIBUTE_PREFIX) and value is not None}
    documents = _documents(attributes.pop(DOCUMENTS, None))
    if METADATA in attributes:
        attributes[METADATA] = _metadata(attributes[METADATA])

    def column(names: tuple[str, ...]):
        return next((row[n] for n in names if row.get(n) is not None), None)

    kind = row.get(KIND_COLUMN) or attributes.get(KIND)
    return Span(number, _id(column(TRACE_ID_COLUMNS)), _id(column(SPAN_ID_COLUMNS)),
                _id(row.get(PARENT_ID_COLUMN)), kind if isinstance(kind, str) else None,
                _instant(row.get(START_COLUMN)), attributes, documents,
                _logged_start(row.get(START_COLUMN)))


def _phoenix_parquet(path: Path) -> Iterator[Span]:
    try:
        names = pq.read_schema(path).names
        wanted = [n for n in names
                  if n in (*TRACE_ID_COLUMNS, *SPAN_ID_COLUMNS, PARENT_ID_COLUMN, KIND_COLUMN,
                           START_COLUMN)
                  or (n.startswith(ATTRIBUTE_PREFIX) and not n.startswith(SKIPPED_PREFIXES))]
        table = pq.read_table(path, columns=wanted)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise RecallwatchError(f"{path}: not a readable Parquet file ({exc}).") from None
    for i, column in enumerate(table.schema):
        if pa.types.is_timestamp(column.type) and column.type.unit == "ns":
            # Python datetimes hold microseconds, as the warehouse does
            table = table.set_column(i, column.name, table.column(i).cast(
                pa.timestamp("us", column.type.tz), safe=False))
    for number, row in enumerate(table.to_pylist(), start=1):
        yield _phoenix_span(number, row)


# ------------------------------------------------------------------------------ JSON files

def _json_spans(path: Path, max_line_bytes: int) -> Iterator[Span | Problem]:
    """The spans of a JSON file: Phoenix rows or OTLP exports, one a line (a longer line is
    quarantined), or one OTLP document in the whole file."""
    number = 0
    first = True
    for line, text, reason, raw in read_json_lines(path, max_line_bytes):
        if text is None:
            number += 1
            yield Problem(number, f"line {line}: {reason}", raw)
            continue
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):   # RecursionError: nested past reading
            whole = (_json_document(path) if first and path.name.lower().endswith(".json")
                     else None)
            if whole is not None:
                yield from whole
                return
            number += 1
            yield Problem(number, f"line {line}: invalid JSON", text)
            continue
        first = False
        exports = (record if isinstance(record, list) and record
                   and all(isinstance(e, dict) and e.keys() & OTLP_KEYS for e in record)
                   else [record] if isinstance(record, dict) and record.keys() & OTLP_KEYS
                   else None)   # a line of one export, or of a list of them
        if exports is not None:
            for export in exports:
                spans = _read_export(export, number)
                if isinstance(spans, str):
                    number += 1
                    yield Problem(number, f"line {line}: {spans}", text)
                    continue
                for span in spans:
                    number = span.number
                    yield span
        elif isinstance(record, dict) and record.keys() & set(TRACE_ID_COLUMNS):
            number += 1
            yield _phoenix_span(number, record)
        elif _phoenix_rows(record):   # a spans table saved as one list (orient="records")
            for row in record:
                number += 1
                yield _phoenix_span(number, row)
        else:
            number += 1
            yield Problem(number, f"line {line}: neither an OTLP trace export (resourceSpans) "
                                  "nor a Phoenix span row (context.trace_id)", text)


def _phoenix_rows(value) -> bool:
    """Whether a JSON value is a list of Phoenix span rows (a spans dataframe saved with
    `to_json(orient="records")`)."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(row, dict) and row.keys() & set(TRACE_ID_COLUMNS) for row in value)


def _json_document(path: Path) -> list[Span] | None:
    """The spans of a file that is one OTLP JSON document (pretty-printed, or a list of
    exports); None when it is not one."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            document = json.loads(fh.read().decode("utf-8-sig"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if _phoenix_rows(document):
        return [_phoenix_span(number, row) for number, row in enumerate(document, start=1)]
    exports = document if isinstance(document, list) else [document]
    if not all(isinstance(e, dict) and e.keys() & OTLP_KEYS for e in exports):
        return None
    spans: list[Span | Problem] = []
    for export in exports:
        read = _read_export(export, len(spans))
        spans += [Problem(len(spans) + 1, read, None)] if isinstance(read, str) else read
    return spans


def _read_export(request: dict, number: int) -> list[Span] | str:
    """The spans of one export, or why it is not a well-formed one (a list where an object
    belongs, a null span): its record is quarantined with that reason."""
    try:
        return list(_otlp_spans(request, number))
    except (AttributeError, TypeError, ValueError, RecursionError) as exc:
        return f"not a well-formed OTLP trace export ({type(exc).__name__}: {exc})"


def _get(record: dict, camel: str, snake: str, default=None):
    value = record.get(camel, record.get(snake))
    return default if value is None else value


def _otlp_spans(request: dict, number: int) -> Iterator[Span]:
    """The spans of one ExportTraceServiceRequest, numbered on from `number`."""
    for resource_spans in _get(request, "resourceSpans", "resource_spans", []):
        scopes = (_get(resource_spans, "scopeSpans", "scope_spans", None)
                  or _get(resource_spans, "instrumentationLibrarySpans",
                          "instrumentation_library_spans", []))
        for scope in scopes:
            for span in scope.get("spans") or []:
                number += 1
                yield _otlp_span(number, span)


def _otlp_span(number: int, span: dict) -> Span:
    attributes: dict = {}
    documents: dict[int, dict] = {}
    for attribute in span.get("attributes") or []:
        key, value = attribute.get("key"), _any_value(attribute.get("value") or {})
        if not isinstance(key, str):
            continue
        match = _DOCUMENT_KEY.fullmatch(key)
        if match:
            part = {DocumentAttributes.DOCUMENT_ID: "id",
                    DocumentAttributes.DOCUMENT_SCORE: "score",
                    DocumentAttributes.DOCUMENT_CONTENT: "content"}.get(match.group(2))
            doc = documents.setdefault(int(match.group(1)), {})
            if part:
                doc[part] = value
        else:
            attributes[key] = value
    if METADATA in attributes:
        attributes[METADATA] = _metadata(attributes[METADATA])
    # the documents as one attribute, an array of {document.id, ...} kvlists, as Phoenix's
    # table holds them
    listed = _documents(attributes.pop(DOCUMENTS, None))
    kind = attributes.get(KIND)
    start = _get(span, "startTimeUnixNano", "start_time_unix_nano")
    return Span(number, _id(_get(span, "traceId", "trace_id")), _id(_get(span, "spanId",
                                                                           "span_id")),
                _id(_get(span, "parentSpanId", "parent_span_id")),
                kind if isinstance(kind, str) else None,
                _instant(int(start)) if str(start or "").isdigit() else None,
                attributes, [documents[i] for i in sorted(documents)] or listed,
                _logged_start(start))


def _any_value(value: dict):
    """An OTLP AnyValue as a Python value (64-bit integers are JSON strings in OTLP JSON)."""
    if "stringValue" in value or "string_value" in value:
        return _get(value, "stringValue", "string_value")
    if "intValue" in value or "int_value" in value:
        try:
            return int(_get(value, "intValue", "int_value"))
        except (TypeError, ValueError):
            return None
    if "doubleValue" in value or "double_value" in value:
        number = _get(value, "doubleValue", "double_value")
        return float(number) if isinstance(number, int | float | str) else None
    if "boolValue" in value or "bool_value" in value:
        return bool(_get(value, "boolValue", "bool_value"))
    if "arrayValue" in value or "array_value" in value:
        return [_any_value(v) for v in (_get(value, "arrayValue", "array_value")
                                        .get("values") or [])]
    if "kvlistValue" in value or "kvlist_value" in value:
        return {kv.get("key"): _any_value(kv.get("value") or {})
                for kv in (_get(value, "kvlistValue", "kvlist_value").get("values") or [])}
    return None


register(Format(
    name=NAME,
    expects=f"OTLP JSON with resourceSpans, or a Phoenix spans table with "
            f"{TRACE_ID_COLUMNS[0]}, {KIND_COLUMN}, {ATTRIBUTE_PREFIX}{DOCUMENTS}",
    recognises=recognises,
    to_native=to_native,
))
