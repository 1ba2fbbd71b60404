"""PostgreSQL source: request logs kept in a table or view, `postgresql://USER@HOST:PORT/DB`
with `--table [SCHEMA.]TABLE`, read one UTC day per delivery. A day's delivery is named
`postgresql://USER@HOST:PORT/DB/SCHEMA.TABLE?day=YYYY-MM-DD` (never with a password: that comes
from PGPASSWORD, ~/.pgpass or the URI, and is cut from every name and message). Its identity
is a checksum the server computes over the day's records, so an unchanged day is skipped
without fetching a row and a changed day is read again whole, replacing what it loaded.

Every read is a query bounded on the timestamp column (`ts >= start AND ts < end`,
identifiers quoted from the catalog), streamed as Arrow batches through ADBC's PostgreSQL
driver into a temporary Parquet file, batch by batch. The bounds are bound values, set for
the session by `set_config($1, ...)` and read by the query with `current_setting()`: the
driver streams a query without parameters (by COPY) but holds the whole result of one with
parameters in memory. The server builds each row's native log
record as a JSON object (json/jsonb columns embedded as JSON, a timestamptz as its UTC ISO
text), so a row is validated and quarantined exactly as the same record in a JSON Lines file;
the file holds `line` and `record` and the delivery says so (`json_records`), which
pipeline/ingest/logs.py stages like JSONL lines. A record's line, shown in quarantine, is the
row's integer primary key (or the integer column `--columns line=COLUMN` names); a view or a
table without a single integer key gets the row's number within its day in key order (for a
view: timestamp, then record text), stable while the day's rows stay the same.

`--columns FIELD=COLUMN,...` names the columns that hold log fields under other names; other
fields are read from columns of their own name and are absent when there is none, as in a
file. request_id, timestamp and retrieved (or retrieval_steps) must be found. The timestamp
column is timestamptz, timestamp (taken as UTC) or date. An interval reads the UTC days it
touches, whole; without one, the days present in the table (and, as `day=null`, the rows
without a timestamp, which are quarantined)."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from pipeline.errors import RecallwatchError
from pipeline.ingest import fields
from pipeline.sources import ReadOptions

# The log fields a row may hold, in the order a record lists them.
LOG_FIELDS = (*(f.name for f in fields.REQUEST_FIELDS), "retrieved", "retrieval_steps",
              "response")
LINE = "line"   # --columns line=COLUMN: the column whose values name rows in quarantine
INTEGER_TYPES = frozenset({"smallint", "integer", "bigint"})
ISO_UTC = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'"   # to_char's pattern of an ISO instant
# A value no clock holds is written as PostgreSQL writes it (infinity), and a year before
# the common era keeps its BC, so validation quarantines each with the value it was.
_AS_TEXT = ("CASE WHEN NOT isfinite({c}) THEN ({c})::text ELSE to_char({v}, {p}) || "
            "CASE WHEN to_char({v}, 'BC') = 'BC' THEN ' BC' ELSE '' END END")
TIME_TYPES = {   # the timestamp column's type -> how its value is written in a record
    "timestamp with time zone": _AS_TEXT.format(c="{c}", v="{c} AT TIME ZONE 'UTC'",
                                                p=ISO_UTC.replace("{", "{{").replace("}", "}}")),
    "timestamp without time zone": _AS_TEXT.format(c="{c}", v="{c}", p=ISO_UTC),
    "date": _AS_TEXT.format(c="{c}", v="{c}", p="'YYYY-MM-DD'"),
}
# Relation kinds read: table, view, materialized view, partitioned table, foreign table.
READABLE_KINDS = ("r", "v", "m", "p", "f")
NULL_DAY = "null"
# The session settings that carry an interval's bounds into the queries (ISO text).
BOUNDS = ("recallwatch.start", "recallwatch.end")


def pg_identifier(name: str) -> str:
    """Quote a PostgreSQL identifier. Names come from the catalog (the table's own columns),
    never from data; unlike the warehouse's allow-list they may have any case or character."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class TableRead:
    """A table resolved against the catalog: how to connect, its name without the password,
    and the queries of one interval (bounded by the session's BOUNDS, see `bind`)."""

    uri: str = field(repr=False)
    password: str | None = field(repr=False)
    server: str          # postgresql://user@host:port/db
    name: str            # postgresql://user@host:port/db/schema.table
    rows_sql: str        # SELECT line, record ... WHERE ts >= start AND ts < end
    null_rows_sql: str   # the same for the rows without a timestamp
    days_sql: str        # SELECT DISTINCT day ... WHERE ts >= start AND ts < end
    all_days_sql: str    # the same, unbounded (and whether any row has no timestamp)
    undated_sql: str     # whether any row has no timestamp (or one no request has)
    line_column: str | None = None   # --columns line=COLUMN: checked to be a key, day by day

    def connect(self):
        return _connect(self.uri, self.server, self.password)

    @staticmethod
    def bind(cur, start: str, end: str) -> None:
        """Set the interval the next queries read: [start, end), ISO text."""
        cur.execute("SELECT set_config($1, $2, false), set_config($3, $4, false)",
                    parameters=(BOUNDS[0], start, BOUNDS[1], end))
        cur.fetchall()

    def failure(self, exc: Exception, doing: str) -> RecallwatchError:
        return RecallwatchError(
            f"{self.name}: cannot {doing} ({_cause(exc, self.password)}); check the table, the "
            "user's privileges and the server, then run again.")


@dataclass(frozen=True)
class TableDay:
    """One UTC day of a table (day None: its rows without a timestamp)."""

    table: TableRead
    day: date | None
    json_records: ClassVar[bool] = True

    @property
    def source(self) -> str:
        return f"{self.table.name}?day={self.day.isoformat() if self.day else NULL_DAY}"

    @property
    def undated(self) -> bool:
        """Rows of no day: an interval's quality check leaves them to ingest's quarantine."""
        return self.day is None

    def _query(self) -> tuple[str, tuple[str, ...]]:
        if self.day is None:
            return self.table.null_rows_sql, ()
        start = datetime.combine(self.day, datetime.min.time())
        return self.table.rows_sql, (start.isoformat(), (start + timedelta(days=1)).isoformat())

    def digest(self) -> str:
        """A checksum of the day's records computed by the server (count and two sums of
        per-record MD5 halves, independent of row order), and of the query that builds them."""
        sql, bounds = self._query()
        # rows whose line is null or repeated: only a --columns line=COLUMN can have them
        not_keyed = ("count(*) - count(DISTINCT line)" if self.table.line_column else "0")
        digest_sql = (
            "SELECT count(*), "
            "coalesce(sum(('x' || substr(h, 1, 15))::bit(60)::bigint), 0)::text, "
            "coalesce(sum(('x' || substr(h, 16, 15))::bit(60)::bigint), 0)::text, "
            f"{not_keyed} "
            f"FROM (SELECT line, md5(line::text || ':' || record) AS h FROM ({sql}) o) d")
        try:
            with self.table.connect() as con, con.cursor() as cur:
                if bounds:
                    self.table.bind(cur, *bounds)
                cur.execute(digest_sql)
                count, first, second, unkeyed = cur.fetchone()
        except RecallwatchError:
            raise
        except Exception as exc:  # the driver's errors: adbc_driver_manager.Error and kin
            raise self.table.failure(exc, "read it") from None
        if unkeyed:   # quarantine would pair reasons with the wrong rows, or have no line
            raise RecallwatchError(
                f"{self.source}: {unkeyed} row(s) have a null or repeated "
                f"{self.table.line_column}; --columns line=COLUMN must name a unique key that "
                "is never null (or leave it out: rows are then numbered in key order).")
        identity = f"{sql}\n{count}:{first}:{second}"
        return "pg:" + hashlib.sha256(identity.encode()).hexdigest()

    @contextmanager
    def fetch(self) -> Iterator[Path]:
        """The day's records as a temporary Parquet file of `line`, `record`, written batch by
        batch as the driver streams them."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema([(LINE, pa.int64()), ("record", pa.string())])
        sql, bounds = self._query()
        with tempfile.TemporaryDirectory(prefix="recallwatch-postgres-") as scratch:
            out = Path(scratch) / "records.parquet"
            try:
                with self.table.connect() as con, con.cursor() as cur:
                    if bounds:
                        self.table.bind(cur, *bounds)
                    cur.execute(sql + " ORDER BY line")
                    with pq.ParquetWriter(out, schema) as writer:
                        for batch in cur.fetch_record_batch():
                            writer.write_batch(pa.RecordBatch.from_arrays(
                                [batch.column(0).cast(pa.int64()),
                                 batch.column(1).cast(pa.string())], schema=schema))
            except RecallwatchError:
                raise
            except Exception as exc:  # the driver's errors: adbc_driver_manager.Error and kin
                raise self.table.failure(exc, "read it") from None
            yield out


def postgres_deliveries(uri: str, options: ReadOptions) -> list[TableDay]:
    """The days of `options.table` to read, one delivery each: every UTC day the interval
    touches, or without an interval every day present (and the rows without a timestamp)."""
    if not options.table:
        raise RecallwatchError(
            f"{redact(uri)}: a postgresql:// source needs --table [SCHEMA.]TABLE (or "
            "RECALLWATCH_LOG_TABLE).")
    if options.fmt not in (None, "native"):
        raise RecallwatchError(
            f"--format {options.fmt} does not apply to {redact(uri)}: a table's rows are read "
            "as native records, their fields from its columns (--columns).")
    server = redact(uri)   # first: a URI that does not parse is one sentence
    password = urlsplit(uri).password
    with _connect(uri, server, password) as con, con.cursor() as cur:
        table = _resolve(cur, uri, password, server, options)
        days = _days(cur, table, options)
    return [TableDay(table, day) for day in days]


def redact(uri: str) -> str:
    """The name of a server and database without the password (and without URI options):
    postgresql://user@host:port/db."""
    try:
        parts = urlsplit(uri)
    except ValueError:   # an unclosed IPv6 bracket: nothing of it can be shown safely
        raise RecallwatchError(
            "a postgresql:// source does not parse as a URI (an unclosed [ of an IPv6 "
            "address?); give postgresql://USER@HOST:PORT/DB.") from None
    user = f"{unquote(parts.username)}@" if parts.username else ""
    try:
        port = parts.port or 5432
    except ValueError:
        raise RecallwatchError(
            f"postgresql://{user}{parts.hostname or ''}: the port in the URI is not a number."
        ) from None
    return f"postgresql://{user}{parts.hostname or 'localhost'}:{port}{parts.path or '/'}"


def _cause(exc: Exception, password: str | None) -> str:
    """The server's or driver's reason in one line, without the driver's prefixes, the query
    or the password."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for marker in ("FATAL:", "ERROR:", "failed:"):
        if marker in text:
            text = text.rsplit(marker, 1)[1]
            break
    text = " ".join(text.split()).rstrip(".")
    for secret in filter(None, {password, unquote(password or "")}):
        text = text.replace(secret, "***")
    return text


@contextmanager
def _connect(uri: str, server: str, password: str | None):
    """A connection in UTC (days and timestamps are UTC days) that sends text as UTF-8
    (whatever the database's encoding: a LATIN1 one sent its own bytes, which no record
    could be read from), closed after the block."""
    import adbc_driver_postgresql.dbapi as pg

    try:
        con = pg.connect(uri)
    except Exception as exc:  # the driver's errors: adbc_driver_manager.Error and kin
        raise RecallwatchError(
            f"{server}: cannot connect ({_cause(exc, password)}); check the host, port, "
            "database and user in the URI, and the password (PGPASSWORD, ~/.pgpass or the "
            "URI).") from None
    try:
        with con.cursor() as cur:
            cur.execute("SET TIME ZONE 'UTC'")
            cur.execute("SET client_encoding TO 'UTF8'")
        yield con
    finally:
        con.close()


def _resolve(cur, uri: str, password: str | None, server: str,
             options: ReadOptions) -> TableRead:
    """Find the table in the catalog, map its columns to log fields and build its queries."""
    schema, _, relname = options.table.rpartition(".")
    try:
        cur.execute(
            "SELECT c.oid::bigint, n.nspname, c.relname, c.relkind::text FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = to_regclass(CASE WHEN $1 = '' THEN format('%I', $2) "
            "                               ELSE format('%I.%I', $1, $2) END)",
            parameters=(schema, relname))
        found = cur.fetchall()
    except Exception as exc:  # permission denied for its schema, ...
        raise RecallwatchError(
            f"{server}: cannot look up {options.table} ({_cause(exc, password)}); grant USAGE "
            "on its schema and SELECT on it to the user of the URI, or give another table."
        ) from None
    if not found and options.table != options.table.lower():  # folded, as SQL would
        return _resolve(cur, uri, password, server,
                        replace(options, table=options.table.lower()))
    if not found or found[0][3] not in READABLE_KINDS:
        raise RecallwatchError(
            f"{server}: no table or view {options.table} (as user {_user(cur)}); give "
            "--table [SCHEMA.]TABLE of an existing table or view.")
    oid, nspname, relname, _kind = found[0]
    name = f"{server}/{nspname}.{relname}"
    relation = f"{pg_identifier(nspname)}.{pg_identifier(relname)}"
    try:
        cur.execute(f"SELECT 1 FROM {relation} LIMIT 0")
        cur.fetchall()
    except Exception as exc:  # permission denied, a view over a missing table, ...
        raise RecallwatchError(
            f"{name}: cannot read it ({_cause(exc, password)}); grant SELECT on it to the "
            "user of the URI, or give another table.") from None
    cur.execute(
        "SELECT attname::text, format_type(atttypid, NULL) FROM pg_attribute "
        "WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        parameters=(oid,))
    types = dict(cur.fetchall())
    cur.execute(
        "SELECT a.attname::text, format_type(a.atttypid, NULL) FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = $1 AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
        parameters=(oid,))
    key = cur.fetchall()
    columns = _columns(name, types, options.columns)
    return TableRead(uri, password, server, name, *_queries(relation, types, columns, key),
                     line_column=columns.get(LINE))


def _user(cur) -> str:
    cur.execute("SELECT current_user::text")
    return cur.fetchone()[0]


def _columns(name: str, types: dict[str, str],
             mapping: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """field -> column: the mapped ones, then the fields' own names where the table has them."""
    shown = ", ".join(f"{c} ({t})" for c, t in types.items())
    known = (*LOG_FIELDS, LINE)
    columns: dict[str, str] = {}
    for log_field, column in mapping:
        if log_field not in known:
            raise RecallwatchError(
                f"--columns {log_field}={column}: {log_field} is not a log field; map one of "
                f"{', '.join(known)}.")
        if column not in types:
            raise RecallwatchError(
                f"--columns {log_field}={column}: {name} has no column {column}; its columns: "
                f"{shown}.")
        columns[log_field] = column
    for log_field in LOG_FIELDS:
        if log_field not in columns and log_field in types:
            columns[log_field] = log_field
    missing = [f for f in ("request_id", "timestamp") if f not in columns]
    if "retrieved" not in columns and "retrieval_steps" not in columns:
        missing.append("retrieved (or retrieval_steps)")
    if missing:
        raise RecallwatchError(
            f"{name} has no column for {', '.join(missing)}; its columns: {shown}. Name them "
            "with --columns FIELD=COLUMN, e.g. request_id=id,timestamp=created_at.")
    ts_type = types[columns["timestamp"]]
    if ts_type not in TIME_TYPES:
        raise RecallwatchError(
            f"{name}: the timestamp column {columns['timestamp']} is {ts_type}; days are read "
            "by a timestamptz, timestamp or date column (name one with --columns "
            "timestamp=COLUMN).")
    if LINE in columns and types[columns[LINE]] not in INTEGER_TYPES:
        raise RecallwatchError(
            f"--columns line={columns[LINE]}: {name}.{columns[LINE]} is "
            f"{types[columns[LINE]]}; the line column must hold integers (a unique key).")
    return columns


def _queries(relation: str, types: dict[str, str], columns: dict[str, str],
             key: list[tuple[str, str]]) -> tuple[str, str, str, str, str]:
    """The query of an interval's records and of the rows without a timestamp, each giving
    `line` (the integer key, else the row's number in key order, else in timestamp/record
    order) and `record` (the row's log record as JSON text); the queries of the days
    present in an interval and in the whole table; and whether any row lacks a timestamp."""
    q = pg_identifier
    ts_column = columns["timestamp"]
    ts_type = types[ts_column]
    ts = f"t.{q(ts_column)}"
    pairs = []
    for log_field in LOG_FIELDS:
        if log_field not in columns:
            continue
        value = f"t.{q(columns[log_field])}"
        if log_field == "timestamp":
            value = TIME_TYPES[ts_type].format(c=value)
        # field names are the module's constants, written as SQL string literals
        pairs.append(f"'{log_field}', {value}")
    record = f"json_build_object({', '.join(pairs)})::text"
    if LINE in columns:
        key_sql, line = f"t.{q(columns[LINE])}", "k"
    elif len(key) == 1 and key[0][1] in INTEGER_TYPES:
        key_sql, line = f"t.{q(key[0][0])}", "k"
    elif key:
        key_sql = "ROW(" + ", ".join(f"t.{q(c)}" for c, _ in key) + ")"
        line = "row_number() OVER (ORDER BY k)"
    else:
        key_sql, line = "NULL::int", "row_number() OVER (ORDER BY ts, record)"
    inner = f"SELECT {key_sql} AS k, {ts} AS ts, {record} AS record FROM {relation} t"
    # the bounds are cast to the column's own type, so an index on it serves the range
    start, end = (f"CAST(current_setting('{name}') AS {ts_type})" for name in BOUNDS)
    within = f"{ts} >= {start} AND {ts} < {end}"
    # a day of a request's years; 'infinity', year 12026 or a BC date has none (no Python
    # date holds some of them) and goes with the rows without a timestamp, quarantined
    dated = (f"{ts} >= CAST('{fields.FIRST_YEAR}-01-01' AS {ts_type}) "
             f"AND {ts} < CAST('{fields.LAST_YEAR}-01-01' AS {ts_type})")
    outer = "SELECT ({line})::bigint AS line, record FROM ({inner}) r"
    return (outer.format(line=line, inner=f"{inner} WHERE {within} AND {dated}"),
            outer.format(line=line, inner=f"{inner} WHERE {ts} IS NULL OR NOT ({dated})"),
            f"SELECT DISTINCT {ts}::date FROM {relation} t WHERE {within} AND {dated}",
            f"SELECT DISTINCT CASE WHEN {dated} THEN {ts}::date END FROM {relation} t",
            f"SELECT EXISTS (SELECT 1 FROM {relation} t WHERE {ts} IS NULL OR NOT ({dated}))")


def _days(cur, table: TableRead, options: ReadOptions) -> list[date | None]:
    """The UTC days to read: those the interval touches, whole; without a bound, the days
    present in the table on that side. The rows without a timestamp (None) are in no day:
    read whatever the interval, when there are any, so that they are quarantined (and, when
    there are none now, by with_undated_loaded if the warehouse holds some)."""
    start = _utc_day(options.start)
    end = _utc_day(options.end, ceil=True)
    try:
        if not start and not end:
            cur.execute(table.all_days_sql)
            present = [row[0] for row in cur.fetchall()]
            days = sorted(d for d in present if d is not None)
            return days + [None] if None in present else days
        if start and end:
            days = [start + timedelta(days=i) for i in range((end - start).days)]
        else:   # one bound: the days present on its side
            table.bind(cur, (start or date(1, 1, 1)).isoformat(),
                       (end or date(9999, 12, 31)).isoformat())
            cur.execute(table.days_sql)
            days = sorted(row[0] for row in cur.fetchall())
        cur.execute(table.undated_sql)
        undated = bool(cur.fetchall()[0][0])
    except Exception as exc:  # the driver's errors: adbc_driver_manager.Error and kin
        raise table.failure(exc, "list its days") from None
    return days + [None] if undated else days


def with_undated_loaded(found: list, loaded: set[str]) -> list:
    """`found` with the rows of no day of each table whose deliveries it holds added where the
    warehouse holds them (`loaded`: sources loaded before) but the table has none now (fixed
    or deleted since): read again, empty, so that what they quarantined goes."""
    tables = {d.table.name: d.table for d in found if isinstance(d, TableDay)}
    listed = {d.source for d in found}
    extra = [TableDay(table, None) for table in tables.values()]
    return found + [d for d in extra if d.source in loaded and d.source not in listed]


def _utc_day(when: datetime | None, *, ceil: bool = False) -> date | None:
    """The UTC day an instant lies in (ceil: the first day starting at or after it)."""
    if when is None:
        return None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    day = when.date()
    if ceil and when != datetime.combine(day, datetime.min.time()):
        day += timedelta(days=1)
    return day

