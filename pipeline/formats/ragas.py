"""RAGAS evaluation datasets (EvaluationDataset saved as JSON Lines, CSV or Parquet: one
single-turn sample a row, with `user_input`, `retrieved_contexts`, `retrieved_context_ids`,
`reference`, `reference_contexts`, `reference_context_ids`, `response`) as a gold set and as
request logs, so that one file can be both and its requests join their goldens.

As a gold set (pipeline/ingest/gold.py turns each sample into a golden): question =
user_input, gold_chunk_ids = reference_context_ids, gold_passages = reference_contexts,
reference = reference. The gold_id is the sample's `gold_id`, `id` or `sample_id` column, else
`ragas-` and the first 16 hex digits of the SHA-256 of user_input, so two samples asking the
same question are one golden (a second one with other references is quarantined as a
conflicting duplicate).

As logs (the format `ragas`): query = user_input, retrieved = retrieved_context_ids in order,
each with its text from retrieved_contexts; a sample with texts but no IDs names each chunk by
its content (`sha256:` and 16 hex digits), which the passages route can score but no gold ID
matches. gold_id is the sample's id column, so the same file joins itself; without one the
request joins its golden by its query text (the same file's too, or a native gold set's
question). request_id is the
`request_id`, `id` or `sample_id` column, else `ragas-<first 12 hex digits of the file's
SHA-256>-<line>`, stable for the same content wherever it is read from. A log needs a time and
an index version, which RAGAS has no column for: the file must have `timestamp` and
`index_version` columns (or name its own with `--columns timestamp=COL,index_version=COL`),
and a file without them is refused, naming them. `session_id`, `index_size`, `k`, `turn` and
`tags` are read from columns of those names when present, and judged as a native record's
fields are (an ID written as a float is quarantined, never passed over). List columns may
be lists, JSON text, or Python list text (as pandas writes a list or a numpy array to CSV).
Multi-turn samples (user_input a list of messages) are quarantined."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import tokenize
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import RecallwatchError
from pipeline.formats import (
    LINE_COLUMN,
    NATIVE_SCHEMA,
    Format,
    first_wins,
    is_blank,
    is_parquet,
    register,
    text_id,
)

NAME = "ragas"
USER_INPUT = "user_input"
RETRIEVED_CONTEXTS = "retrieved_contexts"
RETRIEVED_CONTEXT_IDS = "retrieved_context_ids"
REFERENCE = "reference"
REFERENCE_CONTEXTS = "reference_contexts"
REFERENCE_CONTEXT_IDS = "reference_context_ids"
RESPONSE = "response"

GOLD_ID_COLUMNS = ("gold_id", "id", "sample_id")
REQUEST_ID_COLUMNS = ("request_id", "id", "sample_id")
# Native fields a log needs that a RAGAS sample does not have.
REQUIRED_FIELDS = ("timestamp", "index_version")
# Native fields read from a column of their own name (or the one --columns names).
OPTIONAL_FIELDS = ("session_id", "index_size", "k", "turn", "tags")
MULTI_TURN = f"{USER_INPUT} is not a string (multi-turn samples are not supported)"
MULTI_TURN_TEXT = (f"{USER_INPUT} is a list of messages (a multi-turn sample saved to CSV; "
                   "multi-turn samples are not supported)")


_BAD = object()   # a list column whose value is not a list


def recognises(names: frozenset[str]) -> bool:
    return USER_INPUT in names and bool(names & {RETRIEVED_CONTEXT_IDS, RETRIEVED_CONTEXTS})


def is_sample(record: dict) -> bool:
    """A gold-set record that is a RAGAS sample rather than a native golden."""
    return USER_INPUT in record and "question" not in record


def _given_id(record: dict, columns: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(the value of the first of `columns` the sample gives, the reason when that value is
    no ID): a float (pandas' 7.0 in an integer column with a missing value) is quarantined
    as in a native log, never passed over for the next column or a made-up ID."""
    for column in columns:
        value = record.get(column)
        if is_blank(value):
            continue
        as_id = text_id(value)
        return (as_id, None) if as_id is not None else (None, f"{column} is not a string")
    return None, None


def gold_id(record: dict) -> tuple[str | None, str | None]:
    """The sample's golden: its id column, else a hash of its user_input; or why its id
    column's value is no ID."""
    value, problem = _given_id(record, GOLD_ID_COLUMNS)
    if value is not None or problem:
        return value, problem
    question = record.get(USER_INPUT)
    if not isinstance(question, str):
        return None, None
    return "ragas-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:16], None


def _turns_problem(query) -> str | None:
    """Why `user_input` is not one question: a list of messages (a multi-turn sample), as
    JSON holds it or as pandas writes it to CSV (the list's repr); None for a question."""
    if query is None:
        return None
    if not isinstance(query, str):
        return MULTI_TURN
    text = query.strip()
    if not (text.startswith("[{") and text.endswith("}]")):
        return None
    turns = list_text(text)
    is_messages = isinstance(turns, list) and turns and all(
        isinstance(t, dict) and "content" in t for t in turns)
    return MULTI_TURN_TEXT if is_messages else None


def golden(record: dict) -> tuple[dict | None, str | None]:
    """A RAGAS sample as a native golden record (checked afterwards like any golden), or the
    reason it cannot be one."""
    if record.get(USER_INPUT) is None:
        return None, MULTI_TURN
    turns = _turns_problem(record.get(USER_INPUT))
    if turns:
        return None, turns
    given, problem = gold_id(record)
    if problem:
        return None, problem
    native = {"gold_id": given, "question": record[USER_INPUT],
              "reference": record.get(REFERENCE) or None}
    for field, column in (("gold_chunk_ids", REFERENCE_CONTEXT_IDS),
                          ("gold_passages", REFERENCE_CONTEXTS)):
        items = _list(record.get(column))
        if items is _BAD:
            return None, f"{column} is not a list"
        native[field] = items or []
    return native, None


def to_native(path: Path, out: Path, options, max_record_bytes: int) -> None:
    """Write the samples of a RAGAS dataset as native requests (see the module); a JSON Lines
    sample longer than max_record_bytes is quarantined."""
    from pipeline.ingest.files import RAW_LIMIT, file_hash
    from pipeline.ingest.gold import table_records

    columns = _columns(getattr(options, "columns", ()) or ())
    records = list(table_records(path, max_record_bytes))
    read = [record for _, record, _, _ in records if record]
    present = set(pq.read_schema(path).names) if is_parquet(path) else {
        key for record in read for key in record}
    missing = [f"{field} (column {columns[field]})" if columns[field] != field else field
               for field in REQUIRED_FIELDS if columns[field] not in present]
    # lines none of which could be read (each too large, say) lack no column: each is quarantined
    if (records if is_parquet(path) else read) and missing:
        raise RecallwatchError(
            f"{path}: a RAGAS dataset read as logs needs {' and '.join(missing)}, which it "
            f"lacks: add {'them' if len(missing) > 1 else 'it'} (timestamp: when the sample "
            "was answered, ISO-8601; index_version: the index it was retrieved from), or "
            "name the columns that hold them with --columns timestamp=COLUMN,"
            "index_version=COLUMN.")
    digest = file_hash(path)[:12]
    rows = []
    for line, record, reason, raw in records:
        if record is None:
            rows.append({LINE_COLUMN: line, "problem": reason,
                         "input": raw[:RAW_LIMIT] if raw else None})
        else:   # the sample as read is what quarantine shows, not its conversion
            rows.append({**_request(line, record, columns, digest),
                         "input": raw[:RAW_LIMIT] if raw else None})
    pq.write_table(pa.Table.from_pylist(rows, schema=NATIVE_SCHEMA), out)


def _columns(given) -> dict[str, str]:
    names = {field: field for field in (*REQUIRED_FIELDS, *OPTIONAL_FIELDS)}
    for field, column in given:
        if field not in names:
            raise RecallwatchError(
                f"--columns: {field} cannot be read from another column of a RAGAS dataset; "
                f"these can: {', '.join(names)}.")
        names[field] = column
    return names


def _request(line: int, record: dict, columns: dict[str, str], digest: str) -> dict:
    """One sample as a native request; `problem` holds the first reason it cannot load (its
    fields are judged in the order a native record's are)."""
    request_id, id_problem = _given_id(record, REQUEST_ID_COLUMNS)
    # without an id column the request joins its golden by its query text, so a gold set of
    # any format can serve it (the hash would match only a RAGAS gold set)
    given_gold, gold_problem = _given_id(record, GOLD_ID_COLUMNS)
    index_version, index_problem = _given_id(record, (columns["index_version"],))
    session_id, session_problem = _given_id(record, (columns["session_id"],))
    tags, tags_problem = _tags(record.get(columns["tags"]), columns["tags"])
    query = record.get(USER_INPUT)
    row = {LINE_COLUMN: line, "request_id": request_id or f"ragas-{digest}-{line}",
           "timestamp": _instant(record.get(columns["timestamp"])),
           "query": query if isinstance(query, str) else None,
           "gold_id": given_gold, "index_version": index_version, "session_id": session_id,
           "tags": tags,
           "response": record.get(RESPONSE) if isinstance(record.get(RESPONSE), str) else None}
    for field in ("index_size", "k", "turn"):
        row[field] = _number(record.get(columns[field]))
    retrieved, problem = _retrieved(record)
    row["retrieved"] = retrieved
    multi_turn = _turns_problem(query)
    row["problem"] = next((p for p in (id_problem, multi_turn, gold_problem, index_problem,
                                       session_problem, tags_problem, problem) if p), None)
    return row


def _tags(value, column: str) -> tuple[list[tuple[str, str]] | None, str | None]:
    """A tags cell as the native map's entries: an object (JSON text in CSV or JSON Lines, a
    struct or map in Parquet, which pyarrow gives as key-value pairs); any other value is
    quarantined as in a native log."""
    if is_blank(value):
        return None, None
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value, object_pairs_hook=first_wins)
        except (ValueError, RecursionError):   # RecursionError: nested past reading
            pass
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        keys = [key for key, _ in value]
        repeated = next((key for i, key in enumerate(keys) if key in keys[:i]), None)
        if repeated is not None:
            return None, f"{column} has a duplicate key: {str(repeated)[:80]}"
        value = dict(value)
    if not isinstance(value, dict):
        return None, f"{column} is not an object"
    if getattr(value, "repeated", None) is not None:   # read from JSON Lines (JsonObject)
        return None, f"{column} has a duplicate key: {str(value.repeated)[:80]}"
    # a value that is no text as DuckDB writes a JSON value as text: compact, as written
    return [(str(k), v if isinstance(v, str) else
             json.dumps(v, ensure_ascii=False, separators=(",", ":")))
            for k, v in value.items() if v is not None], None


def _retrieved(record: dict) -> tuple[list[dict] | None, str | None]:
    ids = _list(record.get(RETRIEVED_CONTEXT_IDS), ids=True)
    texts = _list(record.get(RETRIEVED_CONTEXTS))
    for column, value in ((RETRIEVED_CONTEXT_IDS, ids), (RETRIEVED_CONTEXTS, texts)):
        if value is _BAD:
            return None, f"{column} is not a list"
    if ids is None and texts is None:
        return None, f"neither {RETRIEVED_CONTEXT_IDS} nor {RETRIEVED_CONTEXTS} is set"
    if ids is not None and texts is not None and len(ids) != len(texts):
        return None, (f"{RETRIEVED_CONTEXT_IDS} and {RETRIEVED_CONTEXTS} differ in length "
                      f"({len(ids)} and {len(texts)})")
    if ids is None:
        ids = [None if not isinstance(t, str) else
               "sha256:" + hashlib.sha256(t.encode("utf-8")).hexdigest()[:16] for t in texts]
    return [{"chunk_id": chunk_id, "rank": rank,
             "text": texts[rank - 1] if texts is not None and isinstance(texts[rank - 1], str)
             else None}
            for rank, chunk_id in enumerate(ids, start=1)], None


def _list(value, *, ids: bool = False):
    """A list column's value as a list (IDs as text; None for an item that is no ID), None when
    absent or empty text, _BAD when it is something else."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        value = list_text(value.strip())
        if value is None:
            return _BAD
    if not isinstance(value, list | tuple):
        return _BAD
    return [text_id(item) for item in value] if ids else list(value)


def list_text(text: str):
    """What a cell's text holds: JSON, or, failing that, Python text as pandas writes a list
    to CSV (its repr, `python_list`); None when it is neither."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):   # RecursionError: nested past reading
        try:
            return python_list(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None


def python_list(text: str):
    """Python text of a list as pandas writes it to CSV: a list's repr (['a', 'b']), or a
    numpy array's, as a dataset pandas read from Parquet holds its lists: ['a' 'b'],
    items apart by spaces or line breaks, no commas, which ast.literal_eval would run
    together into one string ('ab')."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in _LAYOUT]
    except (tokenize.TokenError, SyntaxError):
        tokens = []
    items = tokens[1:-1]
    if (len(tokens) >= 2 and (tokens[0].string, tokens[-1].string) == ("[", "]") and items
            and all(t.type in (tokenize.STRING, tokenize.NUMBER) for t in items)):
        return [ast.literal_eval(t.string) for t in items]
    return ast.literal_eval(text)


_LAYOUT = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENDMARKER, tokenize.COMMENT)


def _instant(value) -> str | None:
    """A timestamp cell as ISO-8601 text (a naive datetime is UTC); any other value as its
    text, for validation to judge."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, date):   # a date column, as in a native Parquet log: its midnight UTC
        return value.isoformat()
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _number(value) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return float("nan")


register(Format(
    name=NAME,
    expects=f"{USER_INPUT}, {RETRIEVED_CONTEXT_IDS} or {RETRIEVED_CONTEXTS}",
    recognises=recognises,
    to_native=to_native,
))
