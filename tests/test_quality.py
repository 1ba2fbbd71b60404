"""The data-quality gate of one interval: Great Expectations over the records of its log files,
blocking failures in one line, warnings that never block, checks recorded per interval and
stage, a failed gate that leaves the published tables as they were, and a quiet GX."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import api, quality
from pipeline.quality import QualityGateFailed
from pipeline.sources import ReadOptions
from pipeline.warehouse import connect
from tests.conftest import golden, request, snapshot, write_jsonl

DAY1, DAY2 = datetime(2026, 11, 1), datetime(2026, 11, 2)
PUBLISHED = ("request_scores", "window_metrics", "drift_events")
BLOCKING = ("files readable", "records parse", "request_id present", "request_id unique",
            "timestamp readable", "timestamps in interval", "ranks >= 1", "index_version present",
            "retrieved present", "k >= 1", "records load")


def clean_day(directory: Path, day: str = "2026-11-01", n: int = 6) -> Path:
    return write_jsonl(directory / f"dt={day}" / "p.jsonl", [
        request(f"r-{day}-{i}", ["a", "b", "c"], ts=f"{day}T{10 + i}:00:00Z", k=3)
        for i in range(n)])


def by_name(result) -> dict:
    checks = result["checks"] if isinstance(result, dict) else [c.as_dict()
                                                                for c in result.checks]
    return {c["name"]: c for c in checks}


def stored(warehouse, stage: str | None = None) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.execute(
            "SELECT interval_start, interval_end, stage, check_name, blocking, success, "
            "observed, example, detail, checked_at FROM quality_checks "
            "WHERE $stage IS NULL OR stage = $stage ORDER BY stage, check_name",
            {"stage": stage}).fetchall()


def gate_failure(paths: list[Path], start=DAY1, end=DAY2) -> str:
    report = quality.validate_files([str(p) for p in paths], start, end)
    assert not report.passed
    with pytest.raises(QualityGateFailed) as failed:
        quality.gate(report)
    message = str(failed.value)
    assert "\n" not in message
    return message


def test_clean_interval_passes_and_records_every_check(tmp_path, warehouse):
    clean_day(tmp_path / "logs", n=4)
    with gzip.open(tmp_path / "logs" / "dt=2026-11-01" / "q.jsonl.gz", "wt") as fh:
        fh.write(json.dumps(request("r-gz", ["a"], ts="2026-11-01T23:59:59Z")) + "\n")

    result = api.check_logs(warehouse, [str(tmp_path / "logs" / "dt=2026-11-01")],
                            "2026-11-01", "2026-11-02")

    assert result["passed"] is True
    checks = by_name(result)
    assert all(checks[name]["success"] and checks[name]["blocking"] for name in BLOCKING)
    assert checks["log files"]["detail"] == "2 files, 5 records"
    assert checks["request_id unique"]["detail"] == "5 distinct request_id values"
    assert checks["retrieved-list length"]["observed"] == "1..3"
    json.dumps(result)  # plain values, fit for an XCom
    rows = stored(warehouse)
    assert len(rows) == len(result["checks"]) == len(BLOCKING) + 4
    assert {r[:3] for r in rows} == {(DAY1, DAY2, "files")}
    assert {r[9] for r in rows} == {DAY2}   # stamped with the interval's end: no clock


def test_duplicate_request_ids_fail_in_one_line_with_the_count_and_an_example(tmp_path):
    records = [request(f"r-{i}", ["a"], ts="2026-11-01T10:00:00Z") for i in range(20)]
    records += [request(rid, ["b"], ts="2026-11-01T11:00:00Z") for rid in ("r-17", "r-3", "r-5")]
    message = gate_failure([write_jsonl(tmp_path / "p.jsonl", records)])
    assert message == ("quality gate failed for 2026-11-01..2026-11-02: "
                       "request_id unique (3 duplicates, e.g. r-3)")


def test_identical_redeliveries_are_not_duplicates(tmp_path):
    record = request("r-1", ["a"])
    first = write_jsonl(tmp_path / "a.jsonl", [record, request("r-2", ["a"])])
    again = write_jsonl(tmp_path / "b.jsonl", [record])
    report = quality.validate_files([str(first), str(again)], DAY1, DAY2)
    assert report.passed
    assert by_name(report)["request_id unique"]["detail"] == (
        "2 distinct request_id values; 1 identical re-delivery (loaded once)")


def test_timestamps_outside_the_interval_fail_end_excluded(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [
        request("r-1", ["a"], ts="2026-11-01T00:00:00Z"),
        request("r-4", ["a"], ts="2026-10-31T23:59:00Z"),
        request("r-5", ["a"], ts="2026-11-02T00:00:00Z"),
        request("r-6", ["a"], ts="2026-11-02T01:00:00+02:00"),   # 2026-11-01T23:00 UTC
    ])
    assert gate_failure([path]) == (
        "quality gate failed for 2026-11-01..2026-11-02: "
        "timestamps in interval (2 outside, e.g. r-4 at 2026-10-31T23:59:00)")


def test_unreadable_timestamp_fails_and_names_the_value(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [request("r-1", ["a"], ts="yesterday")])
    assert gate_failure([path]).endswith(
        ": timestamp readable (1 unreadable, e.g. r-1 ('yesterday'))")


def test_rank_zero_fails(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [
        request("r-1", [{"chunk_id": "a", "rank": 1}]),
        request("r-2", [{"chunk_id": "a", "rank": 0}, {"chunk_id": "b", "rank": 1}]),
    ])
    assert gate_failure([path]).endswith(": ranks >= 1 (1 below 1, e.g. r-2 (rank 0))")


def test_k_zero_and_missing_fields_fail_while_k_absent_passes(tmp_path):
    no_version = request("r-3", ["a"])
    del no_version["index_version"]
    path = write_jsonl(tmp_path / "p.jsonl", [
        request("r-1", ["a"]), request("r-2", ["a"], k=0), no_version,
        request("  ", ["a"]),
    ])
    checks = by_name(quality.validate_files([str(path)], DAY1, DAY2))
    assert checks["k >= 1"]["example"] == "r-2 (k 0)"
    assert checks["index_version present"]["example"] == "r-3"
    assert checks["request_id present"]["example"] == f"{tmp_path.name}/p.jsonl line 4"
    assert not any(c["success"] for name, c in checks.items()
                   if name in ("k >= 1", "index_version present", "request_id present"))


def test_records_whose_retrieved_list_ingest_would_refuse_fail_the_gate(tmp_path):
    # a retrieved list logged as text (a database column of JSON kept as text) passed every
    # blocking check, and ingest then quarantined every record ("retrieved is not a list")
    as_text = [{**request(f"r-{i}", []), "retrieved": json.dumps([{"chunk_id": "a"}])}
               for i in range(3)]
    missing = request("r-9", ["a"])
    del missing["retrieved"]
    path = write_jsonl(tmp_path / "p.jsonl", [*as_text, missing, request("r-5", ["a"]),
                                              request("r-6", [])])
    assert gate_failure([path]).endswith(
        ": retrieved present (4 missing, e.g. r-0)")
    steps = request("r-7", [])
    del steps["retrieved"]
    steps["retrieval_steps"] = [[{"chunk_id": "a"}]]
    fine = write_jsonl(tmp_path / "fine.jsonl", [request("r-5", ["a"]), request("r-6", []),
                                                 steps])
    assert by_name(quality.validate_files([str(fine)], DAY1, DAY2))[
        "retrieved present"]["success"]


def test_malformed_json_line_fails_records_parse_and_counts_only_there(tmp_path):
    path = write_jsonl(tmp_path / "dt=2026-11-01" / "p.jsonl", [
        request("r-1", ["a"]), '{"request_id": "r-2", "timestamp": ', request("r-3", ["a"])])
    assert gate_failure([path]) == ("quality gate failed for 2026-11-01..2026-11-02: records "
                                    "parse (1 unreadable, e.g. dt=2026-11-01/p.jsonl line 2: "
                                    "invalid JSON)")
    (tmp_path / "dt=2026-11-01" / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    report = quality.validate_files([str(path.parent)], DAY1, DAY2)
    assert [c.name for c in report.failures] == ["files readable", "records parse"]
    assert by_name(report)["records parse"]["detail"] == (
        "2 of 4 records cannot be read, e.g. dt=2026-11-01/bad.jsonl.gz: cannot be read as "
        "JSON Lines")


def test_a_sample_the_ragas_reader_refuses_fails_records_parse_with_its_reason(tmp_path):
    # a converted format's record that could not be converted was judged as an empty record:
    # "all 4 records read as JSON objects", then missing request_id, timestamp, index_version
    # and retrieved list, where ingest quarantines it as invalid JSON or with the RAGAS reason
    sample = {"user_input": "q", "retrieved_contexts": ["a", "b"], "reference": "a",
              "timestamp": "2026-11-01T10:00:00Z", "index_version": "idx-1"}
    path = write_jsonl(tmp_path / "samples" / "ragas.jsonl", [
        sample, {**sample, "user_input": "q2"}, '{"user_input": "q3", "retrieved_contexts": ',
        {**sample, "user_input": "q4", "retrieved_contexts": "not a list"}])
    report = quality.validate_files([str(path)], DAY1, DAY2,
                                    options=ReadOptions(fmt="ragas", start=DAY1, end=DAY2))
    assert [c.name for c in report.failures] == ["records parse"]
    assert by_name(report)["records parse"]["detail"] == (
        "2 of 4 records cannot be read, e.g. samples/ragas.jsonl line 3: invalid JSON")
    assert by_name(report)["golden join key"]["success"]
    api.ingest_logs(tmp_path / "w.duckdb", [str(path)], fmt="ragas")
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        assert con.execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
            (3, "invalid JSON"), (4, "retrieved_contexts is not a list")]


def test_a_few_bad_records_are_tolerated_and_quarantined_but_a_bad_interval_is_not(tmp_path):
    good = [request(f"r-{i}", ["a"], ts=f"2026-11-01T{i % 24:02d}:00:00Z") for i in range(300)]
    one_bad = write_jsonl(tmp_path / "a" / "p.jsonl", [*good, '{"request_id": "r-x", '])
    report = quality.validate_files([str(one_bad)], DAY1, DAY2)
    assert report.passed   # 1 of 301 records: under the 1 % tolerance
    parse = by_name(report)["records parse"]
    assert parse["success"] and parse["observed"] == "1 unreadable"
    assert "within the 1% tolerance" in parse["detail"]
    many_bad = write_jsonl(tmp_path / "b" / "p.jsonl", [*good] + ['{"request_id": '] * 4)
    assert "records parse (4 unreadable" in gate_failure([many_bad])   # 4 of 304: over 1 %
    # never tolerated: one record timed outside the interval among 300
    outside = write_jsonl(tmp_path / "c" / "p.jsonl",
                          [*good, request("r-late", ["a"], ts="2026-11-02T00:00:00Z")])
    assert "timestamps in interval (1 outside" in gate_failure([outside])


def test_parquet_files_are_validated_too(tmp_path):
    rows = [request("r-1", ["a", "b"], k=2), request("r-2", ["a"], ts="2026-11-03T08:00:00Z")]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    assert gate_failure([tmp_path / "p.parquet"]) == (
        "quality gate failed for 2026-11-01..2026-11-02: "
        "timestamps in interval (1 outside, e.g. r-2 at 2026-11-03T08:00:00)")
    report = quality.validate_files([str(tmp_path / "p.parquet")], DAY1, datetime(2026, 11, 4))
    assert report.passed
    assert by_name(report)["log files"]["detail"] == "1 file, 2 records"


def test_interval_without_files_is_one_warning_not_a_failure(tmp_path, warehouse):
    (tmp_path / "logs" / "dt=2026-11-01").mkdir(parents=True)
    paths = api.logs_for_interval(tmp_path / "logs", "2026-11-01", "2026-11-02")
    for given in ([], paths):
        result = api.check_logs(warehouse, given, "2026-11-01", "2026-11-02")
        assert result["passed"] is True
        assert [(c["name"], c["blocking"], c["success"]) for c in result["checks"]] == [
            ("log files", False, False)]
        assert result["checks"][0]["detail"].startswith("no log files")


def test_warnings_never_block(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [request(f"r-{i}", [] if i < 3 else ["a"])
                                              for i in range(10)])
    report = quality.validate_files([str(path)], DAY1, DAY2)
    empty = by_name(report)["empty retrievals"]
    assert (empty["success"], empty["observed"]) == (False, "0.300")
    assert empty["detail"].startswith("3 of 10 requests retrieved nothing (30.0%")
    assert report.passed
    quality.gate(report)


def test_failed_gate_loads_nothing_and_published_tables_keep_their_rows(tmp_path, warehouse):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = tmp_path / "logs"
    clean_day(logs, "2026-11-01")
    write_jsonl(logs / "dt=2026-11-02" / "p.jsonl", [
        request("r-x", ["a"], ts="2026-11-02T10:00:00Z"),
        request("r-x", ["b"], ts="2026-11-02T11:00:00Z"),
    ])
    day1 = api.logs_for_interval(logs, "2026-11-01", "2026-11-02")
    api.check_logs(warehouse, day1, "2026-11-01", "2026-11-02")
    api.run(warehouse, logs=day1, gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    with connect(warehouse, read_only=True) as con:
        before = snapshot(con)
        assert con.sql("SELECT count(*) FROM request_scores").fetchall() == [(6,)]

    day2 = api.logs_for_interval(logs, "2026-11-02", "2026-11-03")
    with pytest.raises(QualityGateFailed, match=r"^quality gate failed for 2026-11-02\.\."
                                                r"2026-11-03: request_id unique \(1 duplicate, "
                                                r"e\.g\. r-x\)$"):
        api.check_logs(warehouse, day2, "2026-11-02", "2026-11-03")

    with connect(warehouse, read_only=True) as con:
        after = snapshot(con)
        assert con.sql("SELECT count(*) FROM requests WHERE request_id = 'r-x'").fetchall() == [
            (0,)]
    assert {t: after[t] for t in PUBLISHED} == {t: before[t] for t in PUBLISHED}
    failed = [r for r in stored(warehouse) if r[0] == DAY2 and not r[5]]
    assert [(r[3], r[6], r[7]) for r in failed] == [("request_id unique", "1 duplicate", "r-x")]


def test_recording_twice_changes_nothing_and_stages_do_not_wipe_each_other(tmp_path, warehouse):
    clean_day(tmp_path / "logs")
    paths = [str(tmp_path / "logs")]
    api.check_logs(warehouse, paths, "2026-11-01", "2026-11-02")
    first = stored(warehouse)
    api.check_logs(warehouse, paths, "2026-11-01", "2026-11-02")
    assert stored(warehouse) == first

    with connect(warehouse) as con:
        loaded = quality.check_loaded(con, DAY1, DAY2)
        quality.record(con, loaded, now=datetime(2026, 11, 2, 6))
        quality.record(con, loaded, now=datetime(2026, 11, 2, 6))
    assert stored(warehouse, "files") == first
    assert [r[3] for r in stored(warehouse, "loaded")] == ["matched to a golden",
                                                          "quarantined share"]
    assert {r[9] for r in stored(warehouse, "loaded")} == {datetime(2026, 11, 2, 6)}


def test_check_loaded_warns_on_unmatched_and_quarantined_records(tmp_path, warehouse):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    day = tmp_path / "logs" / "dt=2026-11-01"
    write_jsonl(day / "p.jsonl", [
        request("r-1", ["a"], ts="2026-11-01T10:00:00Z"),
        request("r-2", ["a"], ts="2026-11-01T11:00:00Z", gold_id="g-missing"),
        request("r-3", ["a"], ts="2026-11-01T12:00:00Z", gold_id="g-missing"),
        '{"request_id": broken',
    ])
    api.run(warehouse, logs=[str(tmp_path / "logs")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")

    for paths in (None, [str(day)]):
        result = api.quality_warnings(warehouse, "2026-11-01", "2026-11-02", paths=paths)
        assert result["passed"] is True and result["stage"] == "loaded"
        checks = by_name(result)
        matched, quarantined = checks["matched to a golden"], checks["quarantined share"]
        assert (matched["success"], matched["observed"], matched["example"]) == (
            False, "0.333", "r-2")
        assert matched["detail"].startswith("1 of 3 looked-up requests matched a golden")
        assert (quarantined["success"], quarantined["observed"]) == (False, "0.250")
        assert quarantined["detail"] == (
            "1 of 4 records read from 1 file are quarantined (25.0%; a warning above 1%), "
            "most often: invalid JSON")
    quiet = by_name(api.quality_warnings(warehouse, "2026-11-05", "2026-11-06"))
    assert [(c["success"], c["observed"]) for c in quiet.values()] == [(True, "n/a")] * 2


def test_cli_check_prints_every_check_and_exits_2_on_a_blocking_failure(tmp_path, run_cli):
    clean_day(tmp_path / "logs")
    code, out, err = run_cli("check", "--logs", tmp_path / "logs", "--start", "2026-11-01",
                             "--end", "2026-11-02")
    assert (code, err) == (0, "")
    assert "✓ blocking request_id unique: 6 distinct request_id values" in out.splitlines()

    bad = write_jsonl(tmp_path / "bad" / "p.jsonl", [request("r-1", [{"chunk_id": "a",
                                                                       "rank": 0}])])
    code, out, err = run_cli("check", "--logs", bad, "--start", "2026-11-01",
                             "--end", "2026-11-02")
    assert code == 2
    assert "✗ blocking ranks >= 1: 1 record with a rank below 1, e.g. r-1 (rank 0)" in out
    assert "✓ warning  golden join key" in out
    assert err == ("recallwatch: error: quality gate failed for 2026-11-01..2026-11-02: "
                   "ranks >= 1 (1 below 1, e.g. r-1 (rank 0))\n")


def test_validation_prints_and_logs_nothing(tmp_path, capsys, caplog):
    path = write_jsonl(tmp_path / "p.jsonl", [request(f"r-{i}", ["a"]) for i in range(50)])
    caplog.set_level(logging.DEBUG)
    quality.validate_files([str(path)], DAY1, DAY2)
    out, err = capsys.readouterr()
    assert (out, err) == ("", "")
    assert "Calculating Metrics" not in caplog.text
    assert [r for r in caplog.records if r.name.startswith("great_expectations")] == []


def test_importing_and_running_gx_in_a_fresh_process_is_quiet(tmp_path):
    # A fresh interpreter, so that the first import of great_expectations happens inside the
    # check, with every logger wide open.
    path = write_jsonl(tmp_path / "p.jsonl", [request("r-1", ["a"])])
    script = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)\n"
        "from datetime import datetime\n"
        "from pipeline import quality\n"
        f"report = quality.validate_files([{str(path)!r}], datetime(2026, 11, 1), "
        "datetime(2026, 11, 2))\n"
        "print(report.passed)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr[-2000:]
    assert "Calculating Metrics" not in done.stderr
    assert "great_expectations" not in done.stderr


def test_report_shows_the_checks_escaped(tmp_path, warehouse):
    hostile = "<script>alert(1)</script>"
    write_jsonl(tmp_path / "p.jsonl", [request(hostile, ["a"]), request(hostile, ["b"])])
    with pytest.raises(QualityGateFailed):
        api.check_logs(warehouse, [str(tmp_path / "p.jsonl")], "2026-11-01", "2026-11-02")
    text = api.report(warehouse, tmp_path / "report").read_text()
    section = text[text.index('<section id="quality">'):]
    section = section[:section.index("</section>")]
    assert "Newest interval checked: 2026-11-01..2026-11-02" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "<script" not in text
    assert "failed</span>" in section


def test_an_empty_day_partition_is_no_log_file_for_the_gate_or_for_ingest(tmp_path, warehouse):
    logs = tmp_path / "logs"
    (logs / "dt=2026-11-01" / "empty-subfolder").mkdir(parents=True)
    clean_day(logs, "2026-11-02", n=3)
    (logs / "dt=2026-11-02" / "_SUCCESS").write_text("")

    assert api.logs_for_interval(logs, "2026-11-01", "2026-11-02") == []
    assert api.logs_for_interval(logs, "2026-11-01", "2026-11-03") == [
        str(logs / "dt=2026-11-02")]
    template = str(logs) + "/dt={date}"
    assert api.logs_for_interval(template, "2026-11-01", "2026-11-03") == [
        str(logs / "dt=2026-11-02")]
    files = api.logs_for_interval(template + "/*", "2026-11-01", "2026-11-03")
    assert files == [str(logs / "dt=2026-11-02" / "p.jsonl")]   # not the _SUCCESS marker
    # what the scheduled job does with them: gate, then ingest what the gate passed
    paths = api.logs_for_interval(logs, "2026-11-01", "2026-11-03")
    assert api.check_logs(warehouse, paths, "2026-11-01", "2026-11-03")["passed"]
    assert api.ingest_logs(warehouse, paths).loaded == 3


def test_copies_ingest_loads_once_are_identical_re_deliveries_to_the_gate(tmp_path, warehouse):
    first = request("r-1", [{"chunk_id": "a", "score": 0.5}], ts="2026-11-01T10:00:00Z", k=5)
    written_again = {**first, "timestamp": "2026-11-01T10:00:00+00:00", "k": 5.0,
                     "retrieved": [{"chunk_id": "a", "score": 0.5, "rank": 1}]}
    a = write_jsonl(tmp_path / "a.jsonl", [first, request("r-2", ["b"])])
    b = write_jsonl(tmp_path / "b.jsonl", [written_again])
    as_parquet = {**first, "timestamp": datetime(2026, 11, 1, 10)}
    pq.write_table(pa.Table.from_pylist([as_parquet]), tmp_path / "c.parquet")
    paths = [str(a), str(b), str(tmp_path / "c.parquet")]

    result = api.check_logs(warehouse, paths, "2026-11-01", "2026-11-02")

    assert result["passed"], result
    assert by_name(result)["request_id unique"]["detail"] == (
        "2 distinct request_id values; 2 identical re-deliveries (loaded once)")
    assert api.ingest_logs(warehouse, paths).quarantined == 0
    with connect(warehouse, read_only=True) as con:   # what the gate said: loaded once
        assert con.sql("SELECT request_id FROM requests ORDER BY 1").fetchall() == [
            ("r-1",), ("r-2",)]


def test_a_file_that_cannot_be_read_stops_the_interval_whatever_the_tolerance(
        tmp_path, warehouse):
    day = tmp_path / "dt=2026-11-01"
    write_jsonl(day / "p.jsonl", [request(f"r-{i}", ["a"], ts=f"2026-11-01T{i % 24:02d}:00:00Z")
                                  for i in range(300)])
    (day / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file PAR1")

    message = gate_failure([day])

    assert message == ("quality gate failed for 2026-11-01..2026-11-02: files readable "
                       "(1 unreadable, e.g. dt=2026-11-01/broken.parquet: cannot be read as "
                       "Parquet)")
    with pytest.raises(QualityGateFailed):
        api.check_logs(warehouse, [str(day)], "2026-11-01", "2026-11-02")
    with connect(warehouse, read_only=True) as con:
        assert con.sql("SELECT count(*) FROM requests").fetchall() == [(0,)]


def test_a_timestamp_of_a_year_ingest_refuses_is_unreadable_and_tolerated(tmp_path):
    # ingest quarantines a year outside 1900-2999 as a bad timestamp (it lands in no day's
    # windows), so the gate counts it as unreadable, within the tolerance, not as outside
    good = [request(f"r-{i}", ["a"], ts=f"2026-11-01T{i % 24:02d}:00:00Z") for i in range(199)]
    path = write_jsonl(tmp_path / "p.jsonl",
                       [*good, request("r-old", ["a"], ts="1850-01-01T00:00:00Z")])
    report = quality.validate_files([str(path)], DAY1, DAY2)
    checks = by_name(report)
    assert checks["timestamps in interval"]["success"]
    assert checks["timestamp readable"]["observed"] == "1 unreadable"
    assert report.passed


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("query", None, "missing or null required field: query"),
    ("k", 2.5, "k must be an integer of at least 1, got 2.5"),
    ("retrieved", [{"chunk_id": "a", "rank": 1.5}],
     "retrieved item 1 has a rank that is not an integer"),
    ("retrieved", [{"chunk_id": None}], "retrieved item 1 has a null or missing chunk_id"),
    ("tags", '{"a": "1", "a": "2"}', "tags has a duplicate key: a"),
])
def test_an_interval_ingest_would_quarantine_fails_the_gate_whatever_the_reason(
        tmp_path, warehouse, field, value, reason):
    # the named checks passed these, and ingest then quarantined every record of the interval
    records = [request(f"r-{i}", ["a", "b"], ts=f"2026-11-01T10:{i % 60:02d}:00Z")
               for i in range(100)]
    for r in records:
        if value is None:
            r.pop(field)
        elif field == "tags":
            r[field] = {"a": "1"}
        else:
            r[field] = value
    path = write_jsonl(tmp_path / "p.jsonl", records)
    if field == "tags":   # a key twice in a JSON object: written as text
        path.write_text(path.read_text().replace('"tags": {"a": "1"}', f'"tags": {value}'))
    message = gate_failure([path])
    assert message.endswith(": records load (100 quarantined, e.g. "
                            f"{tmp_path.name}/p.jsonl line 1: {reason})"), message
    summary = api.ingest_logs(warehouse, [str(path)])
    assert (summary.loaded, summary.quarantined) == (0, 100)


def test_a_few_records_ingest_would_quarantine_are_tolerated(tmp_path, warehouse):
    records = [request(f"r-{i}", ["a"], ts=f"2026-11-01T10:{i % 60:02d}:00Z")
               for i in range(200)]
    del records[7]["query"]
    report = quality.validate_files([str(write_jsonl(tmp_path / "p.jsonl", records))],
                                    DAY1, DAY2)
    check = by_name(report)["records load"]
    assert report.passed and check["observed"] == "1 quarantined"
    assert "within the 1% tolerance" in check["detail"]


def test_the_tolerance_of_k_and_ranks_is_a_share_of_the_intervals_records(tmp_path):
    # 4 of 400 records log a k, one of them 0: a quarter of those that logged one, 0.25 % of
    # the interval, which ingest quarantines alone; and the same of ranks
    records = [request(f"r-{i}", ["a"], ts=f"2026-11-01T10:{i % 60:02d}:00Z")
               for i in range(400)]
    for i in range(4):
        records[i]["k"] = 0 if i == 0 else 5
        records[i]["retrieved"] = [{"chunk_id": "a", "rank": 0 if i == 0 else 1}]
    report = quality.validate_files([str(write_jsonl(tmp_path / "p.jsonl", records))],
                                    DAY1, DAY2)
    checks = by_name(report)
    assert checks["k >= 1"]["success"] and checks["k >= 1"]["observed"] == "1 below 1"
    assert checks["ranks >= 1"]["success"] and checks["ranks >= 1"]["observed"] == "1 below 1"
    assert report.passed


def test_a_log_its_format_refuses_fails_with_the_sentence_ingest_refuses_it_with(tmp_path):
    # a RAGAS dataset without its timestamp column, a file of no known format: the gate named
    # a readable CSV "cannot be read as JSON Lines", and the fix ingest names went unsaid
    ragas = tmp_path / "eval.csv"
    ragas.write_text('user_input,retrieved_context_ids\nq1,"[""a""]"\n')
    message = gate_failure([ragas])
    assert "eval.csv: a RAGAS dataset read as logs needs timestamp and index_version" in message
    assert "cannot be read as JSON Lines" not in message
    other = write_jsonl(tmp_path / "other.jsonl", [{"question": "q", "contexts": ["c"]}])
    report = quality.validate_files([str(other)], DAY1, DAY2)
    assert by_name(report)["files readable"]["example"].startswith(
        f"{tmp_path.name}/other.jsonl: matches no known log format (its columns: contexts, "
        "question)")
