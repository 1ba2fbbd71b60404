"""The fields of a log record, declared once. Each field of a request (request_id, timestamp,
...) and of a retrieved chunk (chunk_id, rank, ...) is one row below: its name, its kind (what
a value may be in JSON Lines and in Parquet, and how it is staged) and the reason a record is
quarantined when the value is of another type. Both stagings are built from these rows: JSONL
through sql/stage_logs_jsonl.sql, which receives them as parameters, and Parquet through a
SELECT generated here from the file's schema. Either way a record is staged with its fields
under their own names (`logged.<field>`, and `<field>` in each item), and sql/validate_logs.sql
judges the values. Adding a field that is checked and staged is one row here; storing it also
takes its column in schema.sql and its place in validate_logs.sql and load_logs.sql."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from pipeline.ingest.files import BARE_CR
from pipeline.warehouse import quote_identifier


def _text(arrow_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    return (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
            or pa.types.is_string_view(arrow_type))


def _integer(arrow_type: pa.DataType) -> bool:
    # Spark and database exports write whole numbers as decimal(p, 0), read as their digits
    return pa.types.is_integer(arrow_type) or (
        pa.types.is_decimal(arrow_type) and arrow_type.scale == 0 and arrow_type.precision <= 38)


def _number(arrow_type: pa.DataType) -> bool:
    # pandas writes an integer column with a missing value as float64, and a decimal may have
    # a scale (2.00); validate_logs.sql still refuses a fractional value
    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_decimal(arrow_type))


def _instant(arrow_type: pa.DataType) -> bool:
    # text, or a real timestamp/date column (pandas datetime64, Spark): read as its ISO text
    return _text(arrow_type) or pa.types.is_timestamp(arrow_type) or pa.types.is_date(
        arrow_type)


def _id(arrow_type: pa.DataType) -> bool:
    # as in JSON: text or a whole number (an integer or a decimal of scale 0); a float (7.0),
    # a fractional decimal, a bool or bytes is not an ID. A UUID column (DuckDB's COPY and
    # pa.uuid() write Parquet's UUID type) is its canonical text, as JSON Lines logs it
    return _text(arrow_type) or _integer(arrow_type) or (
        isinstance(arrow_type, pa.BaseExtensionType)
        and arrow_type.extension_name == "arrow.uuid")


def _numeric(arrow_type: pa.DataType) -> bool:
    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_decimal(arrow_type))


def _object(arrow_type: pa.DataType) -> bool:
    return pa.types.is_struct(arrow_type) or pa.types.is_map(arrow_type)


@dataclass(frozen=True)
class Kind:
    """What a value may be. `json_types` are the json_type() names allowed in JSONL (absent or
    null is always allowed: required fields are judged later). A Parquet column whose type
    passes `arrow_reads` is cast to `staged_as`; any other column is refused (each non-null
    value gets the field's reason), as JSONL refuses a value of another JSON type (a number
    logged as text, "2", is not a number in either)."""
    json_types: tuple[str, ...]
    arrow_reads: Callable[[pa.DataType], bool]
    staged_as: str                  # VARCHAR (the value as logged), DOUBLE or JSON


# IDs compare as strings, so 7 and "7" are one ID.
ID = Kind(("VARCHAR", "BIGINT", "UBIGINT"), _id, "VARCHAR")
TEXT = Kind(("VARCHAR",), _text, "VARCHAR")
# Staged as the text logged, so a rule of validate_logs.sql can quote an out-of-range value. A
# whole float (4.0) is a number too, in JSON Lines as in Parquet: pandas writes an integer
# column with a missing value that way; validate_logs.sql refuses a fractional one.
INTEGER = Kind(("BIGINT", "UBIGINT", "DOUBLE"), _number, "VARCHAR")
INSTANT = Kind(("VARCHAR",), _instant, "VARCHAR")
NUMBER = Kind(("BIGINT", "UBIGINT", "DOUBLE"), _numeric, "DOUBLE")
OBJECT = Kind(("OBJECT",), _object, "JSON")


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    reason: str       # when the value is of another kind; items prefix "retrieved item 3 "


# In the order their rules apply: a record gets the reason of its first bad field.
REQUEST_FIELDS = (
    Field("request_id", ID, "request_id is not a string"),
    Field("timestamp", INSTANT, "bad timestamp: not an ISO-8601 string"),
    Field("query", TEXT, "query is not a string"),
    Field("gold_id", ID, "gold_id is not a string"),
    Field("index_version", ID, "index_version is not a string"),
    Field("session_id", ID, "session_id is not a string"),
    Field("index_size", INTEGER, "index_size must be a non-negative integer"),
    Field("k", INTEGER, "k must be an integer of at least 1"),
    Field("turn", INTEGER, "turn must be an integer"),
    Field("tags", OBJECT, "tags is not an object"),
)
ITEM_FIELDS = (
    Field("chunk_id", ID, "has a chunk_id that is not a string"),
    Field("rank", NUMBER, "has a rank that is not an integer"),
    Field("score", NUMBER, "has a score that is not a number"),
    Field("text", TEXT, "has a text that is not a string"),
)

# A timestamp's year lies in [FIRST_YEAR, LAST_YEAR): DuckDB reads far wider ranges, none of
# them a real request's.
FIRST_YEAR, LAST_YEAR = 1900, 3000

# Reasons about the list of retrieved chunks as a whole that both formats can give.
MISSING_LIST = "missing or null required field: retrieved (or retrieval_steps)"
BOTH_LISTS = "both retrieved and retrieval_steps are set: log one of them"
STEPS_NOT_LISTS = "retrieval_steps is not a list of lists"


# The item fields sql/stage_logs_jsonl.sql reads by name from one parse of a line (leaf_item),
# in order, with the kinds it stages them as; other declared item fields are read from each
# chunk's own parse (json_item).
LEAF_ITEM_FIELDS = [("chunk_id", ID), ("rank", NUMBER), ("score", NUMBER), ("text", TEXT)]


def jsonl_parameters() -> dict[str, object]:
    """The parameters of sql/stage_logs_jsonl.sql: the field rows as JSON paths, rules and
    from_json structures (the item fields also as JSON texts, `item_leaves`), and the shared
    reasons."""

    def rows(fields: tuple[Field, ...], prefix: str) -> dict[str, object]:
        return {
            f"{prefix}_paths": [f"$.{f.name}" for f in fields],
            f"{prefix}_rules": [{"json_types": list(f.kind.json_types), "reason": f.reason}
                                for f in fields],
            f"{prefix}_structure": json.dumps({f.name: f.kind.staged_as for f in fields}),
        }

    leaves = {f.name: "JSON" for f in ITEM_FIELDS}
    return {**rows(REQUEST_FIELDS, "request"), **rows(ITEM_FIELDS, "item"),
            "type_paths": [f"$.{f.name}" for f in REQUEST_FIELDS]
                          + ["$", "$.retrieved", "$.retrieval_steps"],
            "item_leaves": json.dumps({"retrieved": [leaves]}),
            "item_allowed": [[*f.kind.json_types, "NULL"] for f in ITEM_FIELDS],
            "leaf_items": [(f.name, f.kind) for f in ITEM_FIELDS] == LEAF_ITEM_FIELDS,
            "missing_list": MISSING_LIST, "both_lists": BOTH_LISTS, "bare_cr": BARE_CR,
            "steps_not_lists": STEPS_NOT_LISTS}


def jsonl_record_columns() -> dict[str, str]:
    """What DuckDB's JSON reader reads of each JSONL record, as read_json's `columns`: every
    request field, `retrieved` as a list of the leaf item fields and `retrieval_steps`, each
    value as its JSON text (sql/read_jsonl_records.sql), so that its type is still told from
    its first character as stage_logs_jsonl.sql tells it."""
    leaves = ", ".join(f"{quote_identifier(name)} JSON" for name, _ in LEAF_ITEM_FIELDS)
    return {**{f.name: "JSON" for f in REQUEST_FIELDS},
            "retrieved": f"STRUCT({leaves})[]", "retrieval_steps": "JSON"}


def jsonl_record_request() -> tuple[str, str]:
    """(JSON types of the request fields, `logged` struct) of a record read by
    jsonl_record_columns, as SQL over its columns: what stage_logs_jsonl.sql gives a line
    from json_type and from_json, here from each value's JSON text (leaf_type, leaf_text,
    leaf_number, the macros of that file)."""
    staged = {"VARCHAR": "leaf_text({})", "DOUBLE": "leaf_number({})", "JSON": "{}"}
    q = quote_identifier
    types = ", ".join(f"leaf_type({q(f.name)})" for f in REQUEST_FIELDS)
    logged = ", ".join(f"{q(f.name)} := {staged[f.kind.staged_as].format(q(f.name))}"
                       for f in REQUEST_FIELDS)
    return f"[{types}]", f"struct_pack({logged})"


def validate_parameters() -> dict[str, object]:
    """The parameters of sql/validate_logs.sql: the reasons of the fields whose values it
    range-checks (a rank of 1.5 is as wrong as a rank of "a"), and the years a timestamp may
    have."""
    reasons = {f.name: f.reason for f in REQUEST_FIELDS + ITEM_FIELDS}
    return {**{f"{name}_reason": reasons[name] for name in ("rank", "k", "index_size", "turn")},
            "first_year": FIRST_YEAR, "last_year": LAST_YEAR - 1}


class BoundValues(dict):
    """The values of one generated statement. Calling it with a value binds that value as a
    $named parameter and returns the placeholder, so no value is ever written into SQL."""

    def __call__(self, value: object) -> str:
        name = f"v{len(self)}"
        self[name] = value
        return f"${name}"


class ViewValues(BoundValues):
    """The values of one generated view: a view cannot hold $parameters, so each value is set
    as a variable of the connection (SET VARIABLE, still bound, never written into SQL) and
    read by name with getvariable. `prefix` keeps the names of one view apart."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def __call__(self, value: object) -> str:
        name = f"{self.prefix}_v{len(self)}"
        self[name] = value
        return f"getvariable('{name}')"

    def set_on(self, con) -> None:
        for name, value in self.items():
            con.execute(f"SET VARIABLE {name} = $value", {"value": value})


def _parquet_json(column: str, arrow_type: pa.DataType, bind: BoundValues,
                  depth: int = 0) -> str:
    """`column` as JSON under the names the file gives its struct fields. DuckDB matches a
    struct's field names without case and reads a later one that differs from an earlier one
    only in case as name_1 (tags Tenant and tenant became Tenant and tenant_1): each field is
    read by its position and keyed by its own name, in structs and lists at every depth (a
    struct inside a map's values is shown as DuckDB names it)."""
    if is_list(arrow_type) and _holds_struct(arrow_type.value_type):
        item = f"e{depth}"
        return (f"to_json(list_transform({column}, lambda {item}: "
                f"{_parquet_json(item, arrow_type.value_type, bind, depth + 1)}))")
    if not pa.types.is_struct(arrow_type):
        return f"to_json({column})"
    pairs = [f"{bind(arrow_type.field(i).name)}, "
             + _parquet_json(f"struct_extract_at({column}, {i + 1})", arrow_type.field(i).type,
                             bind, depth)
             for i in range(arrow_type.num_fields)]
    return f"CASE WHEN {column} IS NOT NULL THEN json_object({', '.join(pairs)}) END"


def is_list(arrow_type: pa.DataType | None) -> bool:
    # a fixed_size_list (polars' pl.Array) is a Parquet list too, read by DuckDB as a list
    return arrow_type is not None and (pa.types.is_list(arrow_type)
                                       or pa.types.is_large_list(arrow_type)
                                       or pa.types.is_fixed_size_list(arrow_type))


def _holds_struct(arrow_type: pa.DataType) -> bool:
    """Whether a struct is this type or within its lists (whose fields DuckDB may rename)."""
    while is_list(arrow_type):
        arrow_type = arrow_type.value_type
    return pa.types.is_struct(arrow_type)


def parquet_row_json(columns: list[tuple[str, str, pa.DataType | None]],
                     bind: BoundValues) -> str:
    """A Parquet row as JSON under the file's own column and field names, from each column's
    (own name, SQL reference, Arrow type; None: shown as DuckDB reads it): what a quarantined
    row shows as its record. Fields are read by position, as _parquet_json reads them."""
    pairs = [f"{bind(name)}, "
             + (_parquet_json(ref, arrow_type, bind) if arrow_type is not None
                else f"to_json({ref})")
             for name, ref, arrow_type in columns]
    return f"json_object({', '.join(pairs)})"


def _parquet_field(field: Field, column: str, arrow_type: pa.DataType | None,
                   bind: BoundValues) -> tuple[str, str | None]:
    """(staged value, condition under which the value gets the field's reason) for one field
    of a Parquet record or item; `column` is its SQL reference, arrow_type None if absent."""
    kind = field.kind
    if arrow_type is None or pa.types.is_null(arrow_type):
        return f"NULL::{kind.staged_as}", None
    if kind.arrow_reads(arrow_type):
        if kind.staged_as == "JSON":
            return _parquet_json(column, arrow_type, bind), None
        return f"CAST({column} AS {kind.staged_as})", None
    return f"NULL::{kind.staged_as}", f"{column} IS NOT NULL"


def _parquet_fields(fields: tuple[Field, ...], types: dict[str, pa.DataType],
                    column_of: Callable[[str], str],
                    bind: BoundValues) -> tuple[list[str], str]:
    """(`name := value` of each staged field, its first reason or NULL) over the columns
    `column_of` gives the SQL reference of, by name."""
    q = quote_identifier
    values, errors = [], []
    for field in fields:
        column = column_of(field.name) if field.name in types else "NULL"
        value, bad = _parquet_field(field, column, types.get(field.name), bind)
        values.append(f"{q(field.name)} := {value}")
        if bad:
            errors.append(f"WHEN {bad} THEN {bind(field.reason)}")
    return values, (f"CASE {' '.join(errors)} END" if errors else "NULL::VARCHAR")


def parquet_request(types: dict[str, pa.DataType], columns: dict[str, str],
                    bind: BoundValues) -> tuple[str, str]:
    """(`logged` struct, first type error) of a Parquet record, from its file's column types
    and the names DuckDB reads its columns by (`columns`: DuckDB matches names without case,
    so a later column whose name differs from an earlier one's only in case is k_1)."""
    values, first_error = _parquet_fields(
        REQUEST_FIELDS, types, lambda name: quote_identifier(columns[name]), bind)
    return f"struct_pack({', '.join(values)})", first_error


def parquet_item(item: pa.StructType, step: str, bind: BoundValues) -> str:
    """One Parquet item `x` at position `i` of step `step` as the staging struct: the fields
    and order sql/stage_logs_jsonl.sql gives a JSON item."""
    types = {item.field(i).name: item.field(i).type for i in range(item.num_fields)}
    # by position: DuckDB matches a struct's field names without case (RANK before rank)
    at = {item.field(i).name: i + 1 for i in range(item.num_fields)}
    values, first_error = _parquet_fields(
        ITEM_FIELDS, types, lambda name: f"struct_extract_at(x, {at[name]})", bind)
    values += [f"step := ({step})::INTEGER", "position := i::INTEGER",
               f"item_error := {first_error}"]
    return f"struct_pack({', '.join(values)})"
