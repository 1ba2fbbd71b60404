"""The warehouse: one DuckDB file holding every table. This module opens it (creating the
schema), loads the SQL files of `sql/`, quotes identifiers through one whitelist, and runs a
step's writes in one transaction so that a window is replaced whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib.resources
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline.errors import RecallwatchError

DEFAULT_WAREHOUSE = Path("warehouse") / "recallwatch.duckdb"
# DuckDB's own memory: a whole run of 10M requests peaked 0.65-0.75 GiB above it (what Python,
# the libraries and DuckDB's allocations outside its buffer pool hold), so 1.8GB keeps that run
# within 2.5 GiB (bench/run_memory.py).
DEFAULT_MEMORY_LIMIT = "1.8GB"
# Working memory DuckDB needs per thread: under a limit too small for every core, fewer threads
# (each with its own hash tables and buffers) finish where more would run out (measured: the
# statistics of a day of 143k requests need one thread under 150MB, manage two under 300MB).
THREAD_BYTES = 125 * 2**20
# Bumped whenever stored rows change meaning (e.g. how places in a ranking are counted).
FORMAT = 1

PUBLIC_TABLES = ("request_scores", "recall_at_k", "window_metrics", "quarantine", "miss_causes",
                 "drift_events", "alerts", "quality_checks")
INTERNAL_TABLES = (
    "requests", "request_copies", "request_cutoffs", "goldens", "gold_versions", "index_chunks",
    "ingest_files", "settings", "score_windows", "window_sums", "carried_gold_ids", "rebuilds",
    "named_gold_ids",
    "judge_verdicts", "golden_claims", "audit_labels",
)
_IDENTIFIERS = frozenset(PUBLIC_TABLES + INTERNAL_TABLES)
_PLAIN_COLUMN = re.compile(r"^[a-z_][a-z0-9_]*$")


def warehouse_path(explicit: str | os.PathLike | None = None) -> Path:
    """--warehouse, else RECALLWATCH_WAREHOUSE, else ./warehouse/recallwatch.duckdb. A blank
    path is refused: taken for none, it wrote another warehouse in silence (`--warehouse
    "$UNSET"`); spaces alone named a file of spaces. An empty variable counts as unset, and the
    variable is not looked at when a path is given (the DAGs give the variable's value)."""
    if explicit is not None:
        if not str(explicit).strip():
            raise RecallwatchError("the warehouse path is blank (--warehouse, or "
                                   "RECALLWATCH_WAREHOUSE): give the warehouse's DuckDB file, "
                                   "e.g. warehouse/recallwatch.duckdb, or leave both out.")
        return Path(explicit)
    from_env = os.environ.get("RECALLWATCH_WAREHOUSE")
    if from_env and not from_env.strip():
        raise RecallwatchError("RECALLWATCH_WAREHOUSE holds only spaces: set it to the "
                               "warehouse's DuckDB file, e.g. warehouse/recallwatch.duckdb, or "
                               "unset it.")
    return Path(from_env or DEFAULT_WAREHOUSE)


# How normalize_text keys a text; a warehouse records the one its stored keys were made with
# (setting `text_key`, absent: 1) and a writing connection re-keys the rest (_rekey_texts).
TEXT_KEY = "2"


def normalize_text(text: str | None) -> str | None:
    """Query/question key for joining without gold_id: NFKC, casefold, NFKC again (casefold can
    leave a letter decomposed: 'ΐ' folds to three code points, its capital to two; both end as
    one), collapsed whitespace. Key 1 lacked the second NFKC."""
    if text is None:
        return None
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


# Half of a character cut in two (a lone surrogate, such as JSON's "\ud83d" alone): Python's
# JSON reader gives it, no UTF-8 text holds it, and DuckDB refuses it.
_HALF_CHARACTER = re.compile("[\ud800-\udfff]")


def half_character(text: str) -> str | None:
    """The first lone surrogate of `text`, or None when UTF-8 can carry it all."""
    found = _HALF_CHARACTER.search(text)
    return found.group() if found else None


def mended(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, the replacement character."""
    return _HALF_CHARACTER.sub("\ufffd", text)


def distinct_texts(texts) -> list[str]:
    """Gold texts (passages, claims) in order, each once as compared (Unicode NFC: accents
    composed either way are one text), in the spelling first given: every gold item weighs
    the same, once."""
    first: dict[str, str] = {}
    for text in texts:
        first.setdefault(unicodedata.normalize("NFC", text), text)
    return list(first.values())


def _normalize_arrow(texts: pa.Array) -> pa.Array:
    return pa.array([normalize_text(t) for t in texts.to_pylist()], type=pa.string())


def connect(path: str | os.PathLike | None = None, *, read_only: bool = False,
            must_exist: bool = False):
    """Open the warehouse (":memory:" works too), create missing tables, register helpers.
    With must_exist (or read_only), a missing file is an error rather than a new warehouse, so
    a mistyped path is not silently an empty one."""
    target = str(path) if str(path) == ":memory:" else str(warehouse_path(path))
    if target != ":memory:":
        if (read_only or must_exist) and not Path(target).exists():
            raise RecallwatchError(
                f"warehouse {target} does not exist: load logs into it first "
                "(`recallwatch ingest logs PATH`), or point --warehouse at an existing one."
            )
        try:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecallwatchError(
                f"cannot create the warehouse {target} ({exc.strerror or exc}): point "
                "--warehouse at a path inside a writable directory.") from None
        if _cut_short(Path(target)):
            if read_only:
                if _locked(Path(target)):   # another process is creating it right now
                    raise _in_use(target)
                raise RecallwatchError(
                    f"warehouse {target} holds nothing (its creation was interrupted): load "
                    "logs into it first (`recallwatch ingest logs PATH`).")
            _remove_cut_short(Path(target))
        _refuse_other_files(Path(target))
        directory = Path(target).parent
        if not read_only and not os.access(directory, os.W_OK | os.X_OK):
            raise RecallwatchError(
                f"cannot write in {directory}, the warehouse's directory (Permission denied): "
                f"DuckDB keeps its journal ({Path(target).name}.wal) and spills there; make it "
                "writable, or move the warehouse to a directory that is.")
    try:
        con = duckdb.connect(target, read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise _in_use(target) from None
        raise RecallwatchError(f"cannot open warehouse {target}: {exc}") from None
    con.execute("SET TimeZone = 'UTC'")
    # DuckDB would take 80% of the machine; a bounded share spills to disk instead, so the
    # scheduler, the judge and other tasks keep their memory.
    limit = os.environ.get("RECALLWATCH_MEMORY_LIMIT", DEFAULT_MEMORY_LIMIT)
    try:
        con.execute("SET memory_limit = $limit", {"limit": limit})
    except duckdb.Error:
        con.close()
        raise RecallwatchError(
            f"RECALLWATCH_MEMORY_LIMIT={limit!r} is not a memory size; use e.g. 2GB or 512MB."
        ) from None
    try:
        limit_bytes, threads = con.execute(
            "SELECT parse_formatted_bytes(current_setting('memory_limit')), "
            "current_setting('threads')").fetchall()[0]
    except duckdb.Error:   # DuckDB takes -1 or 99999TB, then cannot read back what it holds
        con.close()
        raise RecallwatchError(
            f"RECALLWATCH_MEMORY_LIMIT={limit!r} is not a memory size this machine can give; "
            "use e.g. 2GB or 512MB.") from None
    con.execute("SET threads = $threads",
                {"threads": max(1, min(threads, limit_bytes // THREAD_BYTES))})
    _check_format(con, target, create=not read_only)
    con.create_function(
        "norm_text", _normalize_arrow, ["VARCHAR"], "VARCHAR", type="arrow",
        side_effects=False,
    )
    if not read_only:
        _rekey_texts(con)
    return con


def _in_use(target: str) -> RecallwatchError:
    return RecallwatchError(
        f"warehouse {target} is in use by another recallwatch process; DuckDB allows one "
        "writer at a time, so wait for it to finish and run again.")


def _rekey_texts(con) -> None:
    """Bring the stored query and question keys of a warehouse written with an earlier
    TEXT_KEY to this one, once; the days whose gold matches may change are rescored by the
    next run. A key 1 differs from key 2 only where it is not in NFC, so only those rows are
    keyed again."""
    if con.execute("SELECT 1 FROM settings WHERE name = 'text_key' AND value = $v",
                   {"v": TEXT_KEY}).fetchall():
        return
    from pipeline import state  # the state owner; it reads this module

    with transaction(con):
        days = {row[0] for row in con.execute(
            "UPDATE requests SET query_norm = norm_text(query) WHERE query_norm IS NOT NULL "
            "AND nfc_normalize(query_norm) <> query_norm "
            "RETURNING date_trunc('day', timestamp)").fetchall()}
        if con.execute(
                "UPDATE goldens SET question_norm = norm_text(question) "
                "WHERE question_norm IS NOT NULL AND nfc_normalize(question_norm) <> "
                "question_norm RETURNING 1").fetchall():
            days.update(row[0] for row in con.execute(
                "SELECT DISTINCT date_trunc('day', timestamp) FROM requests "
                "WHERE gold_id IS NULL").fetchall())
        state.invalidate(con, "ingest", sorted(days))
        con.execute("DELETE FROM settings WHERE name = 'text_key'")
        con.execute("INSERT INTO settings VALUES ('text_key', $v)", {"v": TEXT_KEY})


# DuckDB creates a database file by writing three 4 KiB headers (the first starts with an
# 8-byte checksum and the magic b"DUCK") and syncing them before anything else is written.
_HEADERS_BYTES = 3 * 4096
_MAGIC_AT, _MAGIC = 8, b"DUCK"


def _cut_short(path: Path) -> bool:
    """Whether `path` is a database file whose creation was killed before DuckDB wrote its
    headers (0, 4 or 8 KiB long): it holds nothing, yet DuckDB refuses to open it ever after.
    A longer file is not even opened: closing a file this process holds would drop DuckDB's
    lock on it."""
    try:
        if path.stat().st_size >= _HEADERS_BYTES:
            return False
        with open(path, "rb") as fh:
            return _headers_cut_short(fh)
    except OSError:
        return False


def _headers_cut_short(fh) -> bool:
    if os.fstat(fh.fileno()).st_size >= _HEADERS_BYTES:
        return False
    head = fh.read(_MAGIC_AT + len(_MAGIC))
    return not head or head[_MAGIC_AT:] == _MAGIC


def _refuse_other_files(path: Path) -> None:
    """A file that is not a DuckDB database is refused before DuckDB sees it: given a data
    file (`.jsonl`, `.parquet`, `.csv`), DuckDB would open a throw-away in-memory database in
    its place, and everything written would be lost without a word."""
    try:
        if not path.is_file():
            return
        with open(path, "rb") as fh:
            head = fh.read(_MAGIC_AT + len(_MAGIC))
    except OSError:
        return   # DuckDB says what is wrong with it
    if head[_MAGIC_AT:] != _MAGIC:
        raise RecallwatchError(
            f"warehouse {path} is not a DuckDB database (is it a data file?): point "
            "--warehouse at a .duckdb file, new or written by recallwatch, and give data files "
            "to `recallwatch ingest`.")


def _locked(path: Path) -> bool:
    """Whether another process holds DuckDB's lock on `path` (only for a cut-short file: a
    longer one is not opened, see _cut_short)."""
    import fcntl  # POSIX, like DuckDB's own lock

    try:
        with open(path, "rb") as fh:
            fcntl.lockf(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EACCES, errno.EAGAIN)
    return False


def _remove_cut_short(path: Path) -> None:
    """Remove a cut-short database file so that DuckDB creates it anew; one another process
    holds DuckDB's lock on (it is creating the file right now) is in use."""
    import fcntl  # POSIX, like DuckDB's own lock

    with open(path, "rb+") as fh:
        try:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:   # not "no DuckDB database" (_refuse_other_files): it is one, half made
            raise _in_use(str(path)) from None
        if _headers_cut_short(fh):   # still, under the lock
            path.unlink()


def _check_format(con, target: str, *, create: bool) -> None:
    """A warehouse records the format it was written in. Before anything is written, one in
    another format (or not a recallwatch warehouse at all) is refused rather than mixed with
    new rows; an empty file becomes a new warehouse."""
    tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if not tables:
        if not create:
            con.close()
            raise RecallwatchError(
                f"warehouse {target} is empty: load logs into it first "
                "(`recallwatch ingest logs PATH`).")
        with transaction(con):
            con.execute(sql("schema"))
            con.execute("INSERT INTO settings VALUES ('format', $f)", {"f": str(FORMAT)})
        return
    found = None
    if "settings" in tables:
        rows = con.execute("SELECT value FROM settings WHERE name = 'format'").fetchall()
        found = rows[0][0] if rows else None
    if found != str(FORMAT):
        con.close()
        if found is None:
            advice = ("it is not a recallwatch warehouse, or one too old to say its format; "
                      "ingest the logs into a new warehouse (--warehouse NEW_PATH)")
        elif found.isdigit() and int(found) > FORMAT:
            advice = (f"it was written in format {found} by a newer recallwatch (this one "
                      f"writes format {FORMAT}); upgrade recallwatch")
        else:
            advice = (f"it was written in format {found}, this recallwatch writes format "
                      f"{FORMAT}; ingest the logs again into a new warehouse (--warehouse "
                      "NEW_PATH)")
        raise RecallwatchError(f"warehouse {target} cannot be used: {advice}.")
    if create:
        con.execute(sql("schema"))  # tables and columns added since the warehouse was made
    elif _missing_columns(con):
        con.close()
        raise RecallwatchError(
            f"warehouse {target} was written by an earlier recallwatch and is opened read-only: "
            "run `recallwatch run` on it once to bring it up to date, then try again.")


def _missing_columns(con) -> bool:
    """Whether a table, view or column that sql/schema.sql creates is missing (added to the
    schema since this warehouse was written), which only a writing connection can add."""
    tables, views, columns = _schema_parts()
    found_tables = {row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables()").fetchall()}
    found_views = {row[0] for row in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    found_columns = set(con.execute(
        "SELECT table_name, column_name FROM duckdb_columns()").fetchall())
    return not (tables <= found_tables and views <= found_views and columns <= found_columns)


@functools.cache
def _schema_parts() -> tuple[frozenset, frozenset, frozenset]:
    """The tables, views and added (table, column) pairs of sql/schema.sql."""
    schema = sql("schema")

    def named(pattern: str) -> list:
        return re.findall(pattern, schema, re.MULTILINE)

    return (frozenset(named(r"^CREATE TABLE IF NOT EXISTS (\w+)")),
            frozenset(named(r"^CREATE OR REPLACE VIEW (\w+)")),
            frozenset(named(r"^ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)")))


def _sql_files():
    """The folder of the SQL files: the package `pipeline.sql` (the top-level sql/ folder,
    shipped inside the wheel), else, in a source checkout that was never installed, sql/ beside
    the package."""
    try:
        return importlib.resources.files("pipeline.sql")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "sql"


@functools.cache
def sql(name: str) -> str:
    """The text of sql/<name>.sql."""
    return (_sql_files() / f"{name}.sql").read_text(encoding="utf-8")


_QUERY_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@functools.cache
def queries(name: str) -> dict[str, str]:
    """The named read-only queries of sql/<name>.sql. Such a file groups the queries of one
    reader (the report, the CLI summary); each starts at a line `-- name: <query>` followed by
    its header comment, and runs to the next one."""
    text = sql(name)
    marks = list(_QUERY_NAME.finditer(text))
    if not marks:
        raise RuntimeError(f"sql/{name}.sql has no `-- name:` queries")
    found = {}
    for mark, following in zip(marks, marks[1:] + [None], strict=True):
        body = text[mark.end():following.start() if following else len(text)]
        found[mark.group(1)] = body.strip().rstrip(";")
    return found


def quote_identifier(name: str) -> str:
    """Quote a table or column name for SQL. Only known tables and plain lower-case column
    names pass: identifiers never come from user data."""
    if name not in _IDENTIFIERS and not _PLAIN_COLUMN.match(name):
        raise RecallwatchError(f"unknown table or column name {name!r}.")
    return '"' + name.replace('"', '""') + '"'


def public_table(name: str) -> str:
    """The quoted name of a table a user may export; a clear error for anything else (the
    internal tables may change between versions and are not for export)."""
    if name not in PUBLIC_TABLES:
        what = "is internal" if name in INTERNAL_TABLES else "is unknown"
        raise RecallwatchError(
            f"table {name!r} {what}: choose one of {', '.join(PUBLIC_TABLES)}.")
    return quote_identifier(name)


@contextlib.contextmanager
def transaction(con) -> Iterator[None]:
    """Everything inside commits together or not at all."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def unordered(con) -> contextlib.AbstractContextManager[None]:
    """Inside, DuckDB may write and return rows in any order (SET preserve_insertion_order =
    false): it then buffers less, so a small memory limit goes further. For steps whose every
    read that needs an order says ORDER BY."""
    return insertion_order(con, keep=False)


@contextlib.contextmanager
def insertion_order(con, *, keep: bool) -> Iterator[None]:
    """Inside, DuckDB keeps the order rows were read in when it writes them (keep) or not."""
    previous = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    con.execute("SET preserve_insertion_order = $keep", {"keep": keep})
    try:
        yield
    finally:
        con.execute("SET preserve_insertion_order = $previous", {"previous": previous})


def run_script(con, name: str, params: dict | None = None, *, as_arrow: bool = False):
    """Run every statement of sql/<name>.sql in order, binding the $named parameters each
    statement uses. Returns the result of the last statement (a file whose result its caller
    reads ends with that SELECT): a list of rows, or an Arrow table with as_arrow."""
    statements = split_statements(sql(name))
    for statement in statements[:-1]:
        con.execute(statement, _used(statement, params)).fetchall()
    last = statements[-1]
    if as_arrow:
        return con.sql(last, params=_used(last, params)).to_arrow_table()
    return con.execute(last, _used(last, params)).fetchall()


def _used(statement: str, params: dict | None) -> dict | None:
    names = set(re.findall(r"\$([A-Za-z_]\w*)", statement))
    return {k: v for k, v in (params or {}).items() if k in names} or None


def split_statements(text: str) -> list[str]:
    """Split a SQL file on semicolons at line ends (our files keep one statement per
    semicolon-terminated block and no semicolons inside literals)."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    body = "\n".join(lines)
    return [s.strip() for s in re.split(r";\s*(?:\n|$)", body) if s.strip()]
