"""The PostgreSQL source against the machine's server: a fresh database per test session,
dropped after. A table's rows load as the same records written to a JSON Lines file would
(same requests, same scores, same quarantine reasons, with the row's key as the line); an
interval reads only its days; an unchanged day is skipped and a changed one read again; and a
wrong server, database, table or privilege is one sentence without the password."""

from __future__ import annotations

import csv
import io
import json
import secrets
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg2
import pytest

from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold, ingest_logs
from pipeline.score import score
from pipeline.sources import read_options
from pipeline.warehouse import connect
from tests.conftest import golden, write_jsonl

SERVER = "127.0.0.1:5432"
PASSWORD = "s3cret-never-shown"
RECALLWATCH = Path(sys.executable).parent / "recallwatch"


def _admin(dbname: str = "postgres"):
    con = psycopg2.connect(host="127.0.0.1", port=5432, user="root", dbname=dbname)
    con.autocommit = True
    return con


@pytest.fixture(scope="session")
def pg_database():
    """A database of its own for this test session, dropped at the end."""
    try:
        admin = _admin()
    except psycopg2.OperationalError as exc:
        pytest.fail(f"PostgreSQL on {SERVER} is not reachable ({exc}); these tests read a "
                    "real server: start it and run again.")
    name = f"recallwatch_src_{secrets.token_hex(4)}"
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def pg(pg_database):
    """Run SQL in the session's database (autocommit)."""
    con = _admin(pg_database)

    def run(sql: str, params=None):
        with con.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else None

    run.connection = con
    yield run
    con.close()


@pytest.fixture
def uri(pg_database) -> str:
    return f"postgresql://root@{SERVER}/{pg_database}"


def copy_rows(pg, table: str, columns: list[str], rows: list[tuple]) -> None:
    """Insert rows with COPY (CSV: None is NULL)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    buffer.seek(0)
    with pg.connection.cursor() as cur:
        cur.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)",
                        buffer)


LOG_TABLE = """CREATE TABLE {name} (
    id bigint PRIMARY KEY, request_id text, "timestamp" timestamptz, query text, gold_id text,
    index_version text, k integer, session_id text, retrieved jsonb, tags jsonb)"""
LOG_COLUMNS = ["id", "request_id", "timestamp", "query", "gold_id", "index_version", "k",
               "session_id", "retrieved", "tags"]
DAY = datetime(2026, 11, 1, tzinfo=UTC)


def log_rows(n: int, *, first_id: int = 1000, days: int = 3) -> list[dict]:
    """n requests spread over `days` UTC days, keyed from first_id; every 997th is bad in one
    of several ways, each a (row, reason) the file route gives the same record."""
    bad = [
        ("retrieved", "c-1,c-2", "retrieved is not a list"),
        ("retrieved", [{"chunk_id": {"x": 1}}], "retrieved item 1 has a chunk_id that is not a "
                                                "string"),
        ("tags", ["acme"], "tags is not an object"),
        ("query", None, "missing or null required field: query"),
        ("retrieved", [{"chunk_id": "c-1", "rank": -3}], "has rank -3"),
    ]
    rows = []
    for i in range(n):
        ts = DAY + timedelta(seconds=i * days * 86400 // n)
        row = {
            "id": first_id + i, "request_id": f"r-{i}", "timestamp": ts, "query": f"q {i % 50}",
            "gold_id": f"g-{i % 50}", "index_version": "idx-1", "k": 3 if i % 2 else None,
            "session_id": f"s-{i % 300}",
            "retrieved": [{"chunk_id": f"c-{(i + j) % 80}", "rank": j + 1, "score": 1 - j / 10}
                          for j in range(4)],
            "tags": {"tenant": "acme" if i % 3 else "globex"},
            "reason": None,
        }
        if i % 997 == 5:
            name, value, reason = bad[(i // 997) % len(bad)]
            row[name] = value
            row["reason"] = reason
        rows.append(row)
    return rows


def load_table(pg, name: str, rows: list[dict]) -> None:
    pg(LOG_TABLE.format(name=name))
    copy_rows(pg, name, LOG_COLUMNS, [
        (r["id"], r["request_id"], r["timestamp"].isoformat(), r["query"], r["gold_id"],
         r["index_version"], r["k"], r["session_id"], json.dumps(r["retrieved"]),
         json.dumps(r["tags"]))
        for r in rows])


def as_record(row: dict) -> dict:
    """The row as a log record in a JSON Lines file."""
    record = {k: v for k, v in row.items() if k not in ("id", "reason")}
    record["timestamp"] = row["timestamp"].isoformat().replace("+00:00", "Z")
    return record


def options(table: str, **given):
    return read_options(table=table, **given)


def requests_of(con) -> list[tuple]:
    return con.sql("SELECT * EXCLUDE (source, line) FROM requests ORDER BY request_id").fetchall()


def scores_of(con) -> list[tuple]:
    return con.sql("SELECT * FROM request_scores ORDER BY request_id, route").fetchall()


@pytest.mark.slow
def test_table_of_100k_requests_loads_and_scores_as_the_same_jsonl(pg, uri, tmp_path):
    rows = log_rows(100_000)
    load_table(pg, "logs_100k", rows)
    write_jsonl(tmp_path / "logs.jsonl", [as_record(r) for r in rows])
    write_jsonl(tmp_path / "gold.jsonl",
                [golden(f"g-{g}", [f"c-{g}", f"c-{g + 1}"]) for g in range(50)])

    with connect(tmp_path / "table.duckdb") as table_wh, \
            connect(tmp_path / "file.duckdb") as file_wh:
        from_table = ingest_logs(table_wh, [uri], options=options("logs_100k"))
        from_file = ingest_logs(file_wh, [str(tmp_path / "logs.jsonl")])
        bad = {r["id"]: r["reason"] for r in rows if r["reason"]}
        assert len(bad) == 101

        # one delivery per UTC day; counts reconcile; bad rows carry their key and reason
        assert [f.source.rsplit("=", 1)[1] for f in from_table.files] == [
            "2026-11-01", "2026-11-02", "2026-11-03"]
        assert (from_table.read, from_table.loaded, from_table.quarantined) == (
            100_000, 100_000 - len(bad), len(bad))
        assert (from_file.loaded, from_file.quarantined) == (from_table.loaded,
                                                             from_table.quarantined)
        quarantined = table_wh.sql(
            "SELECT line, reason, raw IS NOT NULL FROM quarantine ORDER BY line").fetchall()
        assert [line for line, _, _ in quarantined] == sorted(bad)
        for line, reason, has_raw in quarantined:
            assert bad[line] in reason and has_raw
        # the same reasons as the file gives the same records
        def reasons(con):
            return sorted(r for (r,) in con.sql("SELECT reason FROM quarantine").fetchall())
        assert reasons(table_wh) == reasons(file_wh)

        assert requests_of(table_wh) == requests_of(file_wh)
        for wh in (table_wh, file_wh):
            ingest_gold(wh, str(tmp_path / "gold.jsonl"), "v1")
            score(wh)
        table_scores = scores_of(table_wh)
        assert len(table_scores) == 100_000 - len(bad)
        assert table_scores == scores_of(file_wh)


def test_reingest_skips_unchanged_days_and_rereads_a_changed_one(pg, uri, tmp_path):
    rows = log_rows(300, days=3)
    load_table(pg, "logs_change", rows)
    with connect(tmp_path / "wh.duckdb") as con:
        first = ingest_logs(con, [uri], options=options("logs_change"))
        assert [f.skipped for f in first.files] == [False, False, False]
        before = requests_of(con)

        again = ingest_logs(con, [uri], options=options("logs_change"))
        assert [f.skipped for f in again.files] == [True, True, True]
        assert requests_of(con) == before

        # one row of the second day changes, one of the third is deleted
        pg("UPDATE logs_change SET query = 'changed' WHERE request_id = 'r-150'")
        pg("DELETE FROM logs_change WHERE request_id = 'r-250'")
        changed = ingest_logs(con, [uri], options=options("logs_change"))
        assert [f.skipped for f in changed.files] == [True, False, False]
        assert (changed.read, changed.loaded) == (100 + 99, 100 + 99)
        assert con.sql("SELECT query FROM requests WHERE request_id = 'r-150'").fetchall() == [
            ("changed",)]
        assert con.sql("SELECT count(*) FROM requests WHERE request_id = 'r-250'"
                       ).fetchall() == [(0,)]
        # 300 rows, r-5 quarantined (retrieved not a list), r-250 deleted
        assert con.sql("SELECT count(*) FROM requests").fetchall() == [(298,)]


@pytest.mark.slow
def test_interval_reads_only_its_days_through_a_view_that_refuses_other_rows(
        pg, uri, tmp_path):
    """Proof that reads are bounded: the view raises an error as soon as any row outside
    2026-11-02 is evaluated, so a read that touched another day would fail. Run by the
    installed CLI."""
    rows = log_rows(300, days=3)
    load_table(pg, "logs_all", rows)
    pg("""CREATE FUNCTION only_nov_2(ts timestamptz, q text) RETURNS text
          LANGUAGE plpgsql VOLATILE AS $$
          BEGIN
              IF ts < '2026-11-02T00:00Z' OR ts >= '2026-11-03T00:00Z' THEN
                  RAISE EXCEPTION 'row of % read outside the interval', ts;
              END IF;
              RETURN q;
          END $$""")
    pg("""CREATE VIEW logs_guarded AS
          SELECT request_id, "timestamp", only_nov_2("timestamp", query) AS query, gold_id,
                 index_version, k, session_id, retrieved, tags FROM logs_all""")
    warehouse = tmp_path / "wh.duckdb"

    def cli(*args):
        return subprocess.run([str(RECALLWATCH), "--warehouse", str(warehouse), "ingest",
                               "logs", uri, "--table", "logs_guarded", *args],
                              capture_output=True, text=True, timeout=120)

    # the guard works: reading everything fails
    unbounded = cli()
    assert unbounded.returncode == 2
    assert "read outside the interval" in unbounded.stderr

    bounded = cli("--start", "2026-11-02T06:00:00Z", "--end", "2026-11-03")
    assert bounded.returncode == 0, bounded.stderr
    source = f"{uri}/public.logs_guarded?day=2026-11-02"
    assert f"{source}: read 100, loaded 100, quarantined 0" in bounded.stdout
    with connect(warehouse) as con:
        assert con.sql("SELECT count(*), min(timestamp), max(timestamp) FROM requests"
                       ).fetchall() == [(100, datetime(2026, 11, 2), datetime(2026, 11, 2, 23,
                                                                                 45, 36))]
        # a view has no key: lines are the rows' numbers in the day, in timestamp order
        lines = con.sql("SELECT line FROM requests ORDER BY timestamp").fetchall()
        assert [line for (line,) in lines] == list(range(1, 101))

    again = cli("--start", "2026-11-02", "--end", "2026-11-03")
    assert again.returncode == 0 and f"{source}: unchanged, skipped" in again.stdout


def test_column_mapping_reads_fields_under_other_names(pg, uri, tmp_path):
    pg("""CREATE TABLE rag_calls (seq integer PRIMARY KEY, rid text, created_at timestamp,
          question text, golden text, idx text, steps jsonb, labels jsonb, note text)""")
    pg("""INSERT INTO rag_calls VALUES
          (7, 'a-1', '2026-11-05 09:30:00', 'what?', 'g-1', 'idx-2',
           '[[{"chunk_id": "c-1", "rank": 1}], [{"chunk_id": 5, "rank": 1}]]',
           '{"tenant": "acme"}', 'ignored'),
          (8, 'a-2', '2026-11-05 10:00:00', 'why?', 'g-2', 'idx-2', '[{"chunk_id": "c-1"}]',
           NULL, NULL)""")
    mapping = ("request_id=rid,timestamp=created_at,query=question,gold_id=golden,"
               "index_version=idx,retrieval_steps=steps,tags=labels")
    with connect(tmp_path / "wh.duckdb") as con:
        summary = ingest_logs(con, [uri], options=options("public.rag_calls", columns=mapping))
        assert [f.source for f in summary.files] == [f"{uri}/public.rag_calls?day=2026-11-05"]
        assert con.sql(
            "SELECT request_id, timestamp, query, gold_id, index_version, n_steps, "
            "list_sort(chunk_ids), tags['tenant'], line FROM ranked_requests").fetchall() == [
            ("a-1", datetime(2026, 11, 5, 9, 30), "what?", "g-1", "idx-2", 2, ["5", "c-1"],
             "acme", 7)]
        assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
            (8, "retrieval_steps is not a list of lists")]

    with connect(tmp_path / "wh2.duckdb") as con, \
            pytest.raises(RecallwatchError) as missing:
        ingest_logs(con, [uri], options=options("rag_calls", columns="request_id=rid"))
    message = str(missing.value)
    assert "has no column for timestamp, retrieved (or retrieval_steps)" in message
    assert "seq (integer), rid (text), created_at (timestamp without time zone)" in message
    assert "\n" not in message


def test_line_column_names_the_rows_of_a_view(pg, uri, tmp_path):
    pg("CREATE TABLE keyed (n bigint, request_id text, ts timestamptz, query text, "
       "index_version text, retrieved jsonb)")
    pg("""INSERT INTO keyed VALUES
          (41, 'k-1', '2026-11-06 01:00Z', 'q', 'idx-1', '[{"chunk_id": "c"}]'),
          (42, 'k-2', '2026-11-06 02:00Z', 'q', 'idx-1', '{"chunk_id": "c"}')""")
    pg("CREATE VIEW keyed_view AS SELECT * FROM keyed")
    with connect(tmp_path / "wh.duckdb") as con:
        ingest_logs(con, [uri], options=options("keyed_view", columns="line=n,timestamp=ts"))
        assert con.sql("SELECT line FROM requests").fetchall() == [(41,)]
        assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
            (42, "retrieved is not a list")]


def test_a_day_gone_from_the_table_is_read_again_by_an_interval_that_covers_it(
        pg, uri, tmp_path):
    table = f"moving_{secrets.token_hex(3)}"
    pg(LOG_TABLE.format(name=table))
    pg(f"INSERT INTO {table} (id, request_id, \"timestamp\", query, index_version, retrieved) "
       "VALUES (1, 'p1', '2026-11-01 10:00+00', 'q', 'i', '[]'), "
       "(2, 'p2', '2026-11-02 10:00+00', 'q', 'i', '[]')")
    with connect(tmp_path / "wh.duckdb") as con:
        ingest_logs(con, [uri], options=options(table))
        pg(f"UPDATE {table} SET \"timestamp\" = '2026-11-05 10:00+00' WHERE id = 1")
        ingest_logs(con, [uri], options=options(table))
        # without an interval 11-01 is not listed: its copy of p1 stays, the moved one waits
        assert con.sql("SELECT request_id, timestamp::DATE::VARCHAR FROM requests ORDER BY 1"
                       ).fetchall() == [("p1", "2026-11-01"), ("p2", "2026-11-02")]
        assert "conflicts with request_id p1" in con.sql(
            "SELECT reason FROM quarantine").fetchall()[0][0]
        ingest_logs(con, [uri], options=options(table, start=datetime(2026, 11, 1),
                                                end=datetime(2026, 11, 2)))
        assert con.sql("SELECT request_id FROM requests").fetchall() == [("p2",)]
        # the moved copy loads when its own day is next read (marked: it no longer conflicts)
        again = ingest_logs(con, [uri], options=options(table))
        assert [f.skipped for f in again.files] == [True, False]
        assert con.sql("SELECT request_id, timestamp::DATE::VARCHAR FROM requests ORDER BY 1"
                       ).fetchall() == [("p1", "2026-11-05"), ("p2", "2026-11-02")]
        assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


@pytest.mark.parametrize("keys", [(1, None), (1, 1)])
def test_a_line_column_that_is_no_key_is_one_sentence(pg, uri, tmp_path, keys):
    # a null line had no place in quarantine; a repeated one paired reasons with other rows
    table = f"loose_{secrets.token_hex(3)}"
    pg(f"CREATE TABLE {table} (n bigint, request_id text, ts timestamptz, query text, "
       "index_version text, retrieved jsonb)")
    pg(f"INSERT INTO {table} VALUES (%s, 'l-1', '2026-11-06 01:00Z', 'q', 'idx-1', '{{}}'), "
       "(%s, 'l-2', '2026-11-06 02:00Z', 'q', 'idx-1', '{}')", keys)
    with connect(tmp_path / "wh.duckdb") as con:
        with pytest.raises(RecallwatchError, match=rf"{table}\?day=2026-11-06: 1 row\(s\) have "
                                                   "a null or repeated n; --columns line="):
            ingest_logs(con, [uri], options=options(table, columns="line=n,timestamp=ts"))
        assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


@pytest.mark.parametrize(("timestamp", "shown"), [
    ("infinity", "infinity"), ("-infinity", "-infinity"),
    ("12026-11-01 10:00+00", "12026-11-01T10:00:00.000000Z"),
    ("0044-03-15 10:00+00 BC", "0044-03-15T10:00:00.000000Z BC"),   # never year 44 AD
    ("1899-12-31 23:00+00", "1899-12-31T23:00:00.000000Z")])
def test_a_timestamp_no_request_has_is_quarantined_and_the_rest_loads(
        pg, uri, tmp_path, timestamp, shown):
    table = f"odd_times_{secrets.token_hex(3)}"
    pg(LOG_TABLE.format(name=table))
    pg(f"INSERT INTO {table} (id, request_id, \"timestamp\", query, index_version, retrieved) "
       "VALUES (1, 'ok', '2026-11-01 10:00+00', 'q', 'i', '[]'), "
       "(2, 'odd', %s, 'q', 'i', '[]')", (timestamp,))
    with connect(tmp_path / "wh.duckdb") as con:
        summary = ingest_logs(con, [uri], options=options(table))
        assert [f.source.rsplit("?", 1)[1] for f in summary.files] == [
            "day=2026-11-01", "day=null"]
        assert con.sql("SELECT request_id FROM requests").fetchall() == [("ok",)]
        ((line, reason),) = con.sql("SELECT line, reason FROM quarantine").fetchall()
        assert (line, reason) == (2, f"bad timestamp: {shown}")



def test_rows_without_a_timestamp_are_quarantined_by_an_interval_read_too(pg, uri, tmp_path):
    # the scheduled runs read with an interval: a row with no timestamp was in no day's
    # delivery and never quarantined (read 2 of a table of 3, counts that do not reconcile)
    table = f"undated_{secrets.token_hex(3)}"
    pg(LOG_TABLE.format(name=table))
    pg(f"INSERT INTO {table} (id, request_id, \"timestamp\", query, index_version, retrieved) "
       "VALUES (1, 'a', '2026-11-01 10:00+00', 'q', 'i', '[]'), "
       "(2, 'b', '2026-11-02 10:00+00', 'q', 'i', '[]'), (3, 'c', NULL, 'q', 'i', '[]')")
    interval = {"start": datetime(2026, 11, 1), "end": datetime(2026, 11, 3)}
    with connect(tmp_path / "wh.duckdb") as con:
        summary = ingest_logs(con, [uri], options=options(table, **interval))
        assert [(f.source.rsplit("?", 1)[1], f.read, f.quarantined) for f in summary.files] == [
            ("day=2026-11-01", 1, 0), ("day=2026-11-02", 1, 0), ("day=null", 1, 1)]
        assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
            (3, "missing or null required field: timestamp")]
        # the interval's quality check leaves them to the quarantine: they are no day's
        from pipeline.quality import validate_files
        report = validate_files([uri], **interval, options=options(table, **interval))
        assert report.checks[0].detail == "2 files, 2 records", report.checks[0]
        # unchanged, it is skipped as a day is
        again = ingest_logs(con, [uri], options=options(table, **interval))
        assert [f.skipped for f in again.files] == [True, True, True]
        # the row fixed: its quarantine stayed for good, as no read listed the null day again;
        # it is read again, now empty, and what it quarantined goes
        pg(f"UPDATE {table} SET \"timestamp\" = '2026-11-02 11:00+00' WHERE id = 3")
        after = ingest_logs(con, [uri], options=options(table, **interval))
        assert [(f.source.rsplit("?", 1)[1], f.read, f.skipped) for f in after.files] == [
            ("day=2026-11-01", 1, True), ("day=2026-11-02", 2, False), ("day=null", 0, False)]
        assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
        assert con.sql("SELECT request_id FROM requests ORDER BY 1").fetchall() == [
            ("a",), ("b",), ("c",)]
        # a table with no such row, and none loaded, reads no null day
        pg(f"DELETE FROM {table} WHERE id = 3")
        with connect(tmp_path / "other.duckdb") as fresh:
            clean = ingest_logs(fresh, [uri], options=options(table, **interval))
        assert [f.source.rsplit("?", 1)[1] for f in clean.files] == [
            "day=2026-11-01", "day=2026-11-02"]


@pytest.mark.parametrize("bound", ["start", "end"])
def test_rows_without_a_timestamp_are_quarantined_by_a_read_with_one_bound(
        pg, uri, tmp_path, bound):
    # with only --start or only --end they were read by no delivery: not loaded, not
    # quarantined, not counted
    table = f"undated_{secrets.token_hex(3)}"
    pg(LOG_TABLE.format(name=table))
    pg(f"INSERT INTO {table} (id, request_id, \"timestamp\", query, index_version, retrieved) "
       "VALUES (1, 'a', '2026-11-01 10:00+00', 'q', 'i', '[]'), (2, 'b', NULL, 'q', 'i', '[]'), "
       "(3, 'c', 'infinity', 'q', 'i', '[]')")
    given = {"start": datetime(2026, 11, 1)} if bound == "start" else {"end": datetime(2026, 11, 3)}
    with connect(tmp_path / "wh.duckdb") as con:
        summary = ingest_logs(con, [uri], options=options(table, **given))
        assert [(f.source.rsplit("?", 1)[1], f.read, f.quarantined) for f in summary.files] == [
            ("day=2026-11-01", 1, 0), ("day=null", 2, 2)]


@pytest.fixture
def no_reader(pg, pg_database):
    """A role that may connect but not read the table."""
    role = f"rw_noread_{secrets.token_hex(3)}"
    pg(f"CREATE ROLE {role} LOGIN")
    pg(f"CREATE TABLE IF NOT EXISTS private_logs ({LOG_TABLE.split('(', 1)[1]}")
    yield role
    pg(f"DROP OWNED BY {role}")
    pg(f"DROP ROLE {role}")


@pytest.mark.parametrize("case", ["database", "port", "table", "privilege"])
def test_a_wrong_source_is_one_sentence_without_the_password(
        case, pg_database, no_reader, run_cli, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "env-" + PASSWORD)
    user, port, db, table = "root", 5432, pg_database, "private_logs"
    if case == "database":
        db = "no_such_database"
    elif case == "port":
        port = 5499
    elif case == "table":
        table = "no_such_table"
    else:
        user = no_reader
    given = f"postgresql://{user}:{PASSWORD}@127.0.0.1:{port}/{db}"
    code, out, err = run_cli("ingest", "logs", given, "--table", table)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert PASSWORD not in err + out and "env-" not in err + out
    assert f"postgresql://{user}@127.0.0.1:{port}/{db}" in lines[0]
    expected = {"database": 'database "no_such_database" does not exist',
                "port": "Connection refused",
                "table": "no table or view no_such_table",
                "privilege": "permission denied for table private_logs"}[case]
    assert expected in lines[0]


def test_a_schema_the_user_may_not_use_is_one_sentence(pg, no_reader, uri, run_cli):
    # permission denied for the schema came from the catalog lookup as an internal error
    # (exit 1, the driver's two-line text)
    schema = f"closed_{secrets.token_hex(3)}"
    pg(f"CREATE SCHEMA {schema}")
    pg(LOG_TABLE.format(name=f"{schema}.logs"))
    given = uri.replace("root@", f"{no_reader}:{PASSWORD}@")
    code, out, err = run_cli("ingest", "logs", given, "--table", f"{schema}.logs")
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert f"permission denied for schema {schema}" in line and "grant USAGE" in line
    assert PASSWORD not in out + err
    pg(f"DROP SCHEMA {schema} CASCADE")


def test_a_uri_that_does_not_parse_is_one_sentence_without_the_password(run_cli):
    # an unclosed IPv6 bracket: urlsplit's ValueError was an internal error
    code, out, err = run_cli("ingest", "logs", f"postgresql://u:{PASSWORD}@[::1/logs",
                             "--table", "logs")
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("recallwatch: error: a postgresql:// source does not parse")
    assert PASSWORD not in out + err


@pytest.fixture
def latin1_database(pg_database):
    """A database of its own in LATIN1, as an older server's may be, dropped after."""
    name = f"{pg_database}_latin1"
    with _admin().cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}" ENCODING \'LATIN1\' LC_COLLATE \'C\' '
                    "LC_CTYPE 'C' TEMPLATE template0")
    try:
        yield name
    finally:
        with _admin().cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_rows_of_a_latin1_database_load_as_utf8(latin1_database, tmp_path):
    # the driver got text in the database's encoding: 'café' came as Latin-1 bytes and no
    # record of the day could be read ("cannot read this file ... is not valid UTF8")
    con = _admin(latin1_database)
    con.set_client_encoding("UTF8")
    with con.cursor() as cur:
        cur.execute(LOG_TABLE.format(name="logs"))
        cur.execute("INSERT INTO logs (id, request_id, \"timestamp\", query, index_version, "
                    "retrieved) VALUES (1, 'é-1', '2026-11-01 10:00+00', 'café crème', 'i', "
                    "'[{\"chunk_id\": \"c-ü\"}]')")
    con.close()
    uri = f"postgresql://root@{SERVER}/{latin1_database}"
    with connect(tmp_path / "wh.duckdb") as wh:
        summary = ingest_logs(wh, [uri], options=options("logs"))
        assert (summary.read, summary.loaded, summary.quarantined) == (1, 1, 0)
        assert wh.sql("SELECT request_id, query, chunk_ids FROM ranked_requests").fetchall() == [
            ("é-1", "café crème", ["c-ü"])]


def test_table_option_without_a_postgresql_source_is_refused(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [])
    with connect(tmp_path / "wh.duckdb") as con, pytest.raises(RecallwatchError, match="--table"):
        ingest_logs(con, [str(tmp_path / "a.jsonl")], options=options("logs"))


def test_source_names_never_hold_the_password():
    from pipeline.sources.postgres import redact

    assert redact(f"postgresql://u:{PASSWORD}@db.example:6543/logs?sslmode=require") == (
        "postgresql://u@db.example:6543/logs")
    assert redact("postgres://u@h/logs") == "postgresql://u@h:5432/logs"


def test_a_day_is_streamed_to_parquet_batch_by_batch(pg, uri):
    """The driver holds a query with parameters whole in memory; the day's query has none, so
    it arrives in several batches, each written as it comes (one row group each)."""
    import pyarrow.parquet as pq

    from pipeline.sources.postgres import postgres_deliveries

    pg("""CREATE TABLE wide AS
          SELECT g AS id, 'w-' || g AS request_id,
                 '2026-11-07T00:00Z'::timestamptz + g * interval '1 second' AS "timestamp",
                 repeat('long question ', 80) AS query, 'idx-1' AS index_version,
                 '[{"chunk_id": "c-1"}]'::jsonb AS retrieved
          FROM generate_series(1, 40000) g""")
    pg("ALTER TABLE wide ADD PRIMARY KEY (id)")
    (day,) = postgres_deliveries(uri, read_options(table="wide"))
    assert day.source == f"{uri}/public.wide?day=2026-11-07"
    with day.fetch() as path:
        meta = pq.read_metadata(path)
        assert meta.num_rows == 40000
        assert meta.num_row_groups > 1
        lines = pq.read_table(path, columns=["line"]).column("line").to_pylist()
        assert lines == list(range(1, 40001))


def test_a_row_over_the_size_limit_is_quarantined_with_its_key(pg, uri, tmp_path):
    pg("CREATE TABLE sized (id integer PRIMARY KEY, request_id text, \"timestamp\" timestamptz, "
       "query text, index_version text, retrieved jsonb)")
    pg("""INSERT INTO sized VALUES
          (1, 's-1', '2026-11-08T01:00Z', 'short', 'idx-1', '[{"chunk_id": "c"}]'),
          (2, 's-2', '2026-11-08T02:00Z', repeat('x', 5000), 'idx-1', '[{"chunk_id": "c"}]')""")
    with connect(tmp_path / "wh.duckdb") as con:
        summary = ingest_logs(con, [uri], max_record_bytes=1000, options=options("sized"))
        assert (summary.read, summary.loaded, summary.quarantined) == (2, 1, 1)
        ((line, reason, raw),) = con.sql("SELECT line, reason, raw FROM quarantine").fetchall()
        assert line == 2 and reason.startswith("record too large") and "s-2" in raw


@pytest.mark.slow
def test_quality_check_reads_a_table_day_as_ingest_does(pg, uri, run_cli):
    load_table(pg, "logs_check", log_rows(300, days=3))
    code, out, err = run_cli("check", "--logs", uri, "--table", "logs_check",
                             "--start", "2026-11-01", "--end", "2026-11-02")
    assert code == 0, out + err
    assert "1 file, 100 records" in out
    assert "all 100 records read as JSON objects" in out


def test_a_scheduled_interval_gates_and_runs_from_the_table_as_the_dags_do(
        pg, uri, tmp_path, monkeypatch):
    """The DAGs' path: RECALLWATCH_LOG_TABLE names the table, logs_for_interval hands the
    source over as it is, and the gate and `run` read only the interval's day from it."""
    from pipeline import api

    rows = log_rows(300, days=3)
    load_table(pg, "logs_dag", rows)
    write_jsonl(tmp_path / "gold.jsonl",
                [golden(f"g-{g}", [f"c-{g}", f"c-{g + 1}"]) for g in range(50)])
    monkeypatch.setenv("RECALLWATCH_LOG_TABLE", "logs_dag")
    start, end = "2026-11-02T00:00:00", "2026-11-03T00:00:00"
    paths = api.logs_for_interval(uri, start, end)
    assert paths == [uri]

    warehouse = tmp_path / "wh.duckdb"
    gate = api.check_logs(warehouse, paths, start, end)
    assert all(c["success"] for c in gate["checks"] if c["blocking"])
    assert "100 records" in " ".join(c["detail"] for c in gate["checks"])

    summary = api.run(warehouse, logs=paths, gold=str(tmp_path / "gold.jsonl"),
                      gold_version="v1", start=start, end=end)
    assert [f.source.rsplit("=", 1)[1] for f in summary.ingest.files] == ["2026-11-02"]
    assert [d.date().isoformat() for d in summary.days_scored] == ["2026-11-02"]
    with connect(warehouse, read_only=True) as con:
        days = con.sql("SELECT DISTINCT timestamp::DATE::VARCHAR FROM requests").fetchall()
        assert days == [("2026-11-02",)]
        assert con.sql("SELECT count(*) FROM request_scores").fetchall()[0][0] == 100
    # the DAG's quality_warnings task, given the same source: it failed (and so did every
    # run of the DAG) asking for --table, which the environment names
    warnings = {c["name"]: c for c in api.quality_warnings(warehouse, start, end,
                                                           paths=paths)["checks"]}
    assert warnings["quarantined share"]["detail"].startswith(
        "0 of 100 records read from 1 file are quarantined"), warnings
    assert warnings["matched to a golden"]["success"]
