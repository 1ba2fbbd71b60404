"""The S3 source against a real S3 server on loopback (moto's, in its own process, recording
every request it receives): hive-partitioned JSONL and Parquet logs load and score as the same
files do from disk; an interval lists and reads only its day partitions and an unchanged
object is skipped without a download (both read from the server's request recording); a
changed object replaces its rows; quarantine names the object; wrong credentials, a missing
bucket and an unreachable endpoint are one clear line without the secret."""

from __future__ import annotations

import gzip
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
import moto.server  # noqa: F401  (the server the tests start)
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import api
from pipeline.errors import RecallwatchError
from pipeline.ingest.files import LOG_SUFFIXES
from pipeline.sources import ReadOptions, deliveries
from pipeline.warehouse import connect
from tests.conftest import golden, request, snapshot, write_jsonl

SECRET = "s3cr3t-never-printed-Zq81"
DAYS = ("2026-10-31", "2026-11-01", "2026-11-02")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MotoServer:
    """A moto S3 server process on loopback whose recorder logs every request it serves."""

    def __init__(self, workdir: Path, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env={**os.environ, "MOTO_RECORDER_FILEPATH": str(workdir / "requests.jsonl"),
                 **env},
            cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.1)

    def _recorder(self, action: str) -> None:
        urllib.request.urlopen(urllib.request.Request(
            f"{self.url}/moto-api/recorder/{action}", method="POST"), timeout=5).close()

    def record_from_now(self) -> None:
        self._recorder("reset-recording")
        self._recorder("start-recording")

    def requests(self) -> list[tuple[str, str, dict]]:
        """(method, path, query) of each request since record_from_now()."""
        with urllib.request.urlopen(self.url + "/moto-api/recorder/download-recording",
                                    timeout=5) as response:
            lines = response.read().decode().splitlines()
        found = []
        for line in lines:
            entry = json.loads(line)
            url = urlsplit(entry["url"])
            query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            found.append((entry["method"], unquote(url.path), query))
        return found

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    moto = MotoServer(tmp_path_factory.mktemp("moto"))
    yield moto
    moto.stop()


def aws_environment(monkeypatch, endpoint: str, key_id: str, secret: str) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_REGION",
                 "AWS_CA_BUNDLE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")   # never ask an instance role


class Bucket:
    def __init__(self, server: MotoServer, name: str):
        self.server, self.name = server, name
        # a session of its own reads the credentials of this test's environment
        self.client = boto3.session.Session().client("s3", endpoint_url=server.url)
        self.client.create_bucket(Bucket=name)

    def uri(self, key: str = "") -> str:
        return f"s3://{self.name}/{key}"

    def put(self, key: str, body: bytes) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=body)

    def put_jsonl(self, key: str, records: list) -> None:
        lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
        body = "".join(line + "\n" for line in lines).encode()
        self.put(key, gzip.compress(body) if key.endswith(".gz") else body)

    def put_parquet(self, key: str, records: list[dict]) -> None:
        out = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(records), out)
        self.put(key, out.getvalue())

    def object_reads(self) -> list[str]:
        """Keys of the objects the server was asked for (GET) since recording began."""
        return [path.split("/", 2)[2] for method, path, query in self.server.requests()
                if method == "GET" and path.count("/") >= 2 and path.split("/", 2)[2]]

    def listings(self) -> list[tuple[str, bool]]:
        """(prefix, delimited) of each LIST since recording began."""
        return [(query.get("prefix", ""), "delimiter" in query)
                for method, path, query in self.server.requests()
                if method == "GET" and "list-type" in query]


@pytest.fixture
def bucket(server, monkeypatch, request) -> Bucket:
    aws_environment(monkeypatch, server.url, "testing", SECRET)
    name = "logs-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    return Bucket(server, name)


def day_records(day: str, n: int = 2, chunks=("a", "b")) -> list[dict]:
    return [request(f"r-{day}-{i}", list(chunks[: i + 1]), ts=f"{day}T1{i}:00:00Z")
            for i in range(n)]


def put_partitions(bucket: Bucket) -> dict[str, list[dict]]:
    """Three days: JSONL on the first two, Parquet on the third, gzipped JSONL beside it."""
    records = {day: day_records(day) for day in DAYS}
    bucket.put_jsonl(f"logs/dt={DAYS[0]}/part-0.jsonl", records[DAYS[0]])
    bucket.put_jsonl(f"logs/dt={DAYS[1]}/part-0.jsonl", records[DAYS[1]])
    bucket.put_parquet(f"logs/dt={DAYS[2]}/part-0.parquet", records[DAYS[2]][:1])
    bucket.put_jsonl(f"logs/dt={DAYS[2]}/part-1.jsonl.gz", records[DAYS[2]][1:])
    bucket.put(f"logs/dt={DAYS[2]}/_SUCCESS", b"")
    return records


def loaded_ids(warehouse) -> list[str]:
    with connect(warehouse, read_only=True) as con:
        return [r[0] for r in con.sql(
            "SELECT request_id FROM requests ORDER BY request_id").fetchall()]


# ----------------------------------------------------------------------------- the tests

def test_an_interval_lists_and_reads_only_the_partitions_of_its_days(bucket, warehouse):
    records = put_partitions(bucket)
    bucket.server.record_from_now()
    summary = api.ingest_logs(warehouse, [bucket.uri("logs/")],
                              start="2026-11-01T06:00:00Z", end="2026-11-01T18:00:00Z")
    assert [f.source for f in summary.files] == [bucket.uri(f"logs/dt={DAYS[1]}/part-0.jsonl")]
    assert loaded_ids(warehouse) == sorted(r["request_id"] for r in records[DAYS[1]])
    # the prefix itself is listed one level deep (partition names only), then the day in full
    assert bucket.listings() == [("logs/", True), (f"logs/dt={DAYS[1]}/", False)]
    assert bucket.object_reads() == [f"logs/dt={DAYS[1]}/part-0.jsonl"]


def test_an_interval_across_midnight_reads_both_days_of_jsonl_gzip_and_parquet(bucket,
                                                                              warehouse):
    records = put_partitions(bucket)
    summary = api.ingest_logs(warehouse, [bucket.uri("logs/")],
                              start="2026-11-01T12:00:00Z", end="2026-11-02T12:00:00Z")
    assert [f.source.split("/", 3)[3] for f in summary.files] == [
        f"logs/dt={DAYS[1]}/part-0.jsonl", f"logs/dt={DAYS[2]}/part-0.parquet",
        f"logs/dt={DAYS[2]}/part-1.jsonl.gz"]
    assert (summary.read, summary.loaded, summary.quarantined) == (4, 4, 0)
    assert loaded_ids(warehouse) == sorted(r["request_id"]
                                           for day in DAYS[1:] for r in records[day])


def test_without_an_interval_everything_under_the_prefix_with_a_log_suffix_is_read(
        bucket, warehouse):
    put_partitions(bucket)
    bucket.put("logs/notes.txt", b"not a log")
    summary = api.ingest_logs(warehouse, [bucket.uri("logs")])
    assert len(summary.files) == 4 and summary.loaded == 6


def test_s3_logs_score_as_the_same_files_ingested_from_disk(bucket, tmp_path):
    records = put_partitions(bucket)
    local = tmp_path / "local-logs"
    for day in DAYS:
        write_jsonl(local / f"dt={day}" / "part-0.jsonl", records[day])
    gold = write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    tables = {}
    for name, logs in (("s3", [bucket.uri("logs/")]), ("disk", [str(local)])):
        warehouse = tmp_path / name / "w.duckdb"
        summary = api.run(warehouse, logs=logs, gold=str(gold), gold_version="v1")
        assert len(summary.days_scored) == 3
        with connect(warehouse, read_only=True) as con:
            tables[name] = (
                con.sql("SELECT request_id, timestamp, route, k, needed, covered, recall, "
                        "precision FROM request_scores ORDER BY ALL").fetchall(),
                con.sql("SELECT window_start, grain, slice, k, n, mean_recall, ci_low, "
                        "ci_high FROM window_metrics ORDER BY ALL").fetchall())
    assert len(tables["s3"][0]) == 6 and tables["s3"][1]
    assert tables["s3"] == tables["disk"]


def test_the_cli_ingests_an_interval_and_skips_unchanged_objects_without_a_download(
        bucket, run_cli, warehouse):
    put_partitions(bucket)
    args = ("ingest", "logs", bucket.uri("logs/"), "--start", "2026-11-02", "--end",
            "2026-11-03")
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert "2 file(s) ingested, 0 unchanged: read 2, loaded 2, quarantined 0" in out
    with connect(warehouse, read_only=True) as con:
        before = snapshot(con)
    bucket.server.record_from_now()
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert "0 file(s) ingested, 2 unchanged" in out
    assert bucket.object_reads() == []   # identities come from HEAD requests, not downloads
    assert {m for m, _, _ in bucket.server.requests()} == {"GET", "HEAD"}   # GET: LIST only
    with connect(warehouse, read_only=True) as con:
        assert snapshot(con) == before


def test_a_changed_object_replaces_the_rows_it_loaded(bucket, warehouse):
    key = f"logs/dt={DAYS[1]}/part-0.jsonl"
    bucket.put_jsonl(key, day_records(DAYS[1], n=3))
    api.ingest_logs(warehouse, [bucket.uri("logs/")])
    bucket.put_jsonl(key, [request("replacement", ["z"], ts=f"{DAYS[1]}T12:00:00Z")])
    (result,) = api.ingest_logs(warehouse, [bucket.uri("logs/")]).files
    assert not result.skipped and (result.read, result.loaded) == (1, 1)
    assert loaded_ids(warehouse) == ["replacement"]


def test_a_quarantined_line_names_the_object_and_its_line(bucket, warehouse):
    key = f"logs/dt={DAYS[1]}/part-0.jsonl"
    bucket.put_jsonl(key, [day_records(DAYS[1], 1)[0], "{not json",
                           request("no-time", ["a"], ts="yesterday")])
    (result,) = api.ingest_logs(warehouse, [bucket.uri("logs/")]).files
    assert (result.read, result.loaded, result.quarantined) == (3, 1, 2)
    with connect(warehouse, read_only=True) as con:
        rows = con.sql("SELECT source, line, reason FROM quarantine ORDER BY line").fetchall()
    assert [(source, line) for source, line, _ in rows] == [(bucket.uri(key), 2),
                                                            (bucket.uri(key), 3)]
    assert "bad timestamp" in rows[1][2]


def test_globs_and_nested_year_month_day_partitions_choose_objects(bucket):
    for day in DAYS:
        y, m, d = day.split("-")
        bucket.put_jsonl(f"nested/year={y}/month={m}/day={d}/part-0.jsonl", day_records(day))
        bucket.put_parquet(f"flat/date={day}/part-0.parquet", day_records(day))
        bucket.put_jsonl(f"flat/date={day}/part-1.jsonl", day_records(day))
    one_day = ReadOptions(start=api.instant("2026-10-31"), end=api.instant("2026-11-01"))

    def keys(uri, options=None):
        return [d.source.split("/", 3)[3] for d in deliveries([uri], LOG_SUFFIXES, options)]

    assert keys(bucket.uri("nested/"), one_day) == [
        "nested/year=2026/month=10/day=31/part-0.jsonl"]
    assert keys(bucket.uri("flat/*/part-*.parquet")) == [
        f"flat/date={day}/part-0.parquet" for day in DAYS]
    assert keys(bucket.uri("flat/date=2026-11-0*"), one_day) == []
    assert keys(bucket.uri("**/part-1.jsonl"), one_day) == ["flat/date=2026-10-31/part-1.jsonl"]
    assert keys(bucket.uri("flat/date=2026-11-02/part-1.jsonl")) == [
        "flat/date=2026-11-02/part-1.jsonl"]
    # objects in no day partition say nothing of their days: an interval reads them all
    bucket.put_jsonl("loose/a.jsonl", day_records(DAYS[2]))
    bucket.put_jsonl("loose/b/c.ndjson", day_records(DAYS[2]))
    assert keys(bucket.uri("loose"), one_day) == ["loose/a.jsonl", "loose/b/c.ndjson"]


def test_a_key_with_an_empty_level_is_one_sentence_with_an_interval_or_without(bucket,
                                                                             warehouse):
    # `logs//dt=.../part-0.jsonl`, as a writer joining `logs/` and `/dt=...` names it:
    # pyarrow cannot open such a key (an internal error: ArrowInvalid), and an interval's walk
    # listed `logs` inside `logs` until Python's recursion limit (an internal error too)
    bucket.put_jsonl(f"logs/dt={DAYS[0]}/part-0.jsonl", day_records(DAYS[0]))
    bucket.put_jsonl(f"logs//dt={DAYS[1]}/part-0.jsonl", day_records(DAYS[1]))
    for interval in ({}, {"start": DAYS[1], "end": DAYS[2]}):
        with pytest.raises(RecallwatchError,
                           match=r"^s3://[^ ]*/logs//[^ ]*: a key with an empty level \(//\) "
                                 "cannot be read"):
            api.ingest_logs(warehouse, [bucket.uri("logs/")], **interval)
    # a prefix without one reads as before
    assert api.ingest_logs(warehouse, [bucket.uri(f"logs/dt={DAYS[0]}/")]).loaded == 2


def test_aws_endpoint_url_s3_wins_over_aws_endpoint_url(bucket, monkeypatch):
    bucket.put_jsonl("logs/a.jsonl", day_records(DAYS[0]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", bucket.server.url)
    assert len(deliveries([bucket.uri("logs/")], LOG_SUFFIXES)) == 1
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "ftp://elsewhere")
    with pytest.raises(RecallwatchError, match="AWS_ENDPOINT_URL_S3 must be http"):
        deliveries([bucket.uri("logs/")], LOG_SUFFIXES)


def test_a_fetched_object_keeps_its_suffix_and_is_removed_afterwards(bucket):
    bucket.put_jsonl("logs/part-0.jsonl.gz", day_records(DAYS[0]))
    (delivery,) = deliveries([bucket.uri("logs/")], LOG_SUFFIXES)
    with delivery.fetch() as path:
        assert path.name == "part-0.jsonl.gz"
        assert len(gzip.decompress(path.read_bytes()).splitlines()) == 2
    assert not path.exists()


def test_no_objects_is_an_error_but_a_day_without_partitions_is_nothing(bucket, warehouse):
    bucket.put_jsonl(f"logs/dt={DAYS[0]}/part-0.jsonl", day_records(DAYS[0]))
    with pytest.raises(RecallwatchError, match=r"no input files found in s3://.*/empty/"):
        api.ingest_logs(warehouse, [bucket.uri("empty/")])
    with pytest.raises(RecallwatchError, match="no input files found"):
        api.ingest_logs(warehouse, [bucket.uri("empty/")], start="2026-11-05",
                        end="2026-11-06")
    # a scheduled interval whose day has no partition: no files, a warning, no failure
    paths = api.logs_for_interval(bucket.uri("logs/"), "2026-11-05", "2026-11-06")
    assert paths == [bucket.uri("logs/")]
    summary = api.ingest_logs(warehouse, paths, start="2026-11-05", end="2026-11-06")
    assert summary.files == ()
    checks = api.check_logs(warehouse, paths, "2026-11-05", "2026-11-06")
    assert checks["passed"] and "no log files" in checks["checks"][0]["detail"]


def test_a_glob_that_matches_no_log_on_any_day_is_an_error_with_an_interval_too(bucket,
                                                                               warehouse):
    # a mistyped suffix: the day's partition holds logs, the glob none of them; with an
    # interval this was "0 file(s) ingested" every day without a word
    bucket.put_jsonl(f"logs/dt={DAYS[0]}/part-0.jsonl", day_records(DAYS[0]))
    bucket.put_jsonl(f"logs/dt={DAYS[1]}/part-0.jsonl", day_records(DAYS[1]))
    for uri in (bucket.uri("logs/*/part-*.jsonl.gz"), bucket.uri("logs/*/parts-*")):
        with pytest.raises(RecallwatchError, match="no input files found"):
            api.ingest_logs(warehouse, [uri], start=DAYS[0], end=DAYS[1])
    # a glob that names logs of other days only: that interval has none, no error
    summary = api.ingest_logs(warehouse, [bucket.uri(f"logs/dt={DAYS[1]}*/*.jsonl")],
                              start=DAYS[0], end=DAYS[1])
    assert summary.files == ()
    assert api.ingest_logs(warehouse, [bucket.uri("logs/*/part-*.jsonl")], start=DAYS[0],
                           end=DAYS[1]).loaded == 2


def test_a_missing_bucket_and_an_unreachable_endpoint_are_one_line_each(bucket, run_cli,
                                                                       monkeypatch):
    code, out, err = run_cli("ingest", "logs", "s3://no-such-bucket/logs/")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"recallwatch: error: s3://no-such-bucket/logs/: bucket no-such-bucket does not exist "
        f"at {bucket.server.url}; check the bucket name, and AWS_ENDPOINT_URL if it is kept "
        "elsewhere."]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    code, out, err = run_cli("ingest", "logs", bucket.uri("logs/"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cannot reach the S3 store at http://127.0.0.1:" in err
    assert "check AWS_ENDPOINT_URL" in err and SECRET not in out + err


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory):
    """A server that checks signatures: the first three requests (an IAM user, its key and
    its policy) are let through, every later one needs that key."""
    moto = MotoServer(tmp_path_factory.mktemp("moto-auth"), INITIAL_NO_AUTH_ACTION_COUNT="3")
    iam = boto3.session.Session().client("iam", endpoint_url=moto.url, region_name="us-east-1",
                       aws_access_key_id="setup", aws_secret_access_key="setup")
    iam.create_user(UserName="reader")
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    yield moto, key["AccessKeyId"], key["SecretAccessKey"]
    moto.stop()


def test_wrong_credentials_are_one_line_naming_the_variables_without_the_secret(
        guarded_server, run_cli, monkeypatch):
    moto, key_id, secret = guarded_server
    aws_environment(monkeypatch, moto.url, key_id, secret)
    Bucket(moto, "guarded").put_jsonl(f"logs/dt={DAYS[1]}/p.jsonl", day_records(DAYS[1]))
    code, out, err = run_cli("ingest", "logs", "s3://guarded/logs/")
    assert code == 0, err
    for wrong_id, wrong_secret in ((key_id, SECRET), ("AKIAWRONGKEY0000", SECRET)):
        aws_environment(monkeypatch, moto.url, wrong_id, wrong_secret)
        code, out, err = run_cli("ingest", "logs", "s3://guarded/logs/")
        assert code == 2 and out == ""
        (line,) = err.strip().splitlines()
        assert line.startswith(f"recallwatch: error: s3://guarded/logs/: {moto.url} refused "
                               "access (")
        assert "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in line
        assert SECRET not in out + err and secret not in out + err
