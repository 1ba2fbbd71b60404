"""Tests for pipeline.metrics and `recallwatch metrics` on warehouses built by the pipeline: the
exposition parses with prometheus_client's own parsers, carries window_metrics' numbers for the
latest window of every slice x route x k and the drift state drift_events implies, label values
from logs survive escaping, --out replaces its file whole, and a warehouse without metrics
exits 2 with one sentence."""

from __future__ import annotations

import math
import os
import stat
from collections import defaultdict
from datetime import UTC, datetime

import pytest
from conftest import golden, request, write_jsonl
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus

from pipeline import api
from pipeline.errors import RecallwatchError
from pipeline.warehouse import connect

NASTY = 'say "hi" \\ then\nnew line'     # a tag value with a quote, a backslash and a newline
NASTY_SLICE = "te\\=am=" + NASTY             # its slice: '=' in the tag name escaped as '\='
LABELS = ("grain", "slice", "route", "k", "gold_version")
# the public gauge names and the window_metrics column each one carries
COLUMN_OF = {
    "recallwatch_mean_recall_ratio": "mean_recall",
    "recallwatch_mean_recall_ci_low_ratio": "ci_low",
    "recallwatch_mean_recall_ci_high_ratio": "ci_high",
    "recallwatch_pass_rate_ratio": "pass_rate",
    "recallwatch_pass_rate_ci_low_ratio": "pass_ci_low",
    "recallwatch_pass_rate_ci_high_ratio": "pass_ci_high",
    "recallwatch_full_coverage_rate_ratio": "full_coverage_rate",
    "recallwatch_full_coverage_rate_ci_low_ratio": "fc_ci_low",
    "recallwatch_full_coverage_rate_ci_high_ratio": "fc_ci_high",
    "recallwatch_mean_precision_ratio": "mean_precision",
    "recallwatch_pass_mark_ratio": "pass_mark",
    "recallwatch_scored_requests": "n",
    "recallwatch_excluded_requests": "n_excluded",
    "recallwatch_window_start_timestamp_seconds": "window_start",
    "recallwatch_window_end_timestamp_seconds": "window_end",
}
PARSERS = {"prometheus": parse_prometheus, "openmetrics": parse_openmetrics}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Twelve days of 30 requests and a 13th of two: recall falls on day 10, so drift opens
    drop episodes, and day 13's two requests (one per tenant) are too few to judge, so the
    drop of tenant=b stays open on a window whose own decision is 'insufficient'. A third of
    the requests carry a tag whose name holds '=' and whose value holds a quote, a backslash
    and a newline; the tag legacy=yes is only logged on days 1-3."""
    root = tmp_path_factory.mktemp("metrics")
    write_jsonl(root / "gold.jsonl", [golden(f"g-{i}", [f"c{i}", f"d{i}"]) for i in range(10)])
    records = []
    for day in range(1, 14):
        for j in range(30 if day < 13 else 2):
            i = j % 10
            if day == 13:
                chunks = [f"c{i}", f"d{i}"] if j else [f"c{i}"]
            elif day >= 10:
                chunks = [f"c{i}", f"d{i}"] if i == 0 else ["x"]
            else:
                chunks = [f"c{i}", f"d{i}"] if i else [f"c{i}"]
            tags = {"tenant": "ab"[j % 2]}
            if j % 3 == 0:
                tags["te=am"] = NASTY
            if day <= 3:
                tags["legacy"] = "yes"
            records.append(request(f"r{day}-{j}", chunks, ts=f"2026-11-{day:02d}T10:{j:02d}:00Z",
                                   gold_id=f"g-{i}", tags=tags))
    write_jsonl(root / "logs.jsonl", records)
    path = root / "small.duckdb"
    api.run(path, logs=[str(root / "logs.jsonl")], gold=str(root / "gold.jsonl"),
            gold_version="v1")
    return path


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo world, run once: two index versions, several tags, seven cutoffs."""
    from pipeline.demo import generate_demo_world

    root = tmp_path_factory.mktemp("metrics-demo")
    world = generate_demo_world(root / "world")
    path = root / "demo.duckdb"
    api.run(path, logs=[str(world.logs_dir)], gold=str(world.gold_path),
            gold_version=world.gold_version,
            index=[(str(p), v) for v, p in world.index_manifests.items()])
    return path


# ------------------------------------------------------------------ reading both sides

def parsed(text: bytes, fmt: str) -> dict[str, dict[tuple, float]]:
    """Gauge name -> {label values (LABELS, then metric for the drift state): value}, as the
    format's own parser reads the exposition."""
    found: dict[str, dict[tuple, float]] = defaultdict(dict)
    for family in PARSERS[fmt](text.decode("utf-8")):
        assert family.type == "gauge"
        for sample in family.samples:
            key = tuple(sample.labels[name] for name in LABELS)
            if "metric" in sample.labels:
                key += (sample.labels["metric"],)
            assert key not in found[sample.name], f"{sample.name}{key} twice"
            assert sample.timestamp is None   # the textfile collector refuses timestamps
            found[sample.name][key] = sample.value
    return found


def latest_rows(path, grain: str = "day") -> dict[tuple, dict]:
    """The latest window_metrics row of every slice x route x k, picked in Python."""
    with connect(path, read_only=True) as con:
        result = con.execute("SELECT * FROM window_metrics WHERE grain = $g", {"g": grain})
        columns = [d[0] for d in result.description]
        rows = [dict(zip(columns, row, strict=True)) for row in result.fetchall()]
    latest: dict[tuple, dict] = {}
    for row in rows:
        key = tuple(str(row[name]) for name in LABELS)
        if key not in latest or row["window_start"] > latest[key]["window_start"]:
            latest[key] = row
    return latest


def expected_drift(path, latest: dict[tuple, dict]) -> dict[tuple, float]:
    """The drift state in each latest window, by walking each series' drift_events in time
    order: an episode is open from its 'opened' row (its decision says drop or rise) until its
    'resolved' row."""
    with connect(path, read_only=True) as con:
        history = con.execute(
            "SELECT grain, slice, route, k, gold_version, metric, window_start, state, decision "
            "FROM drift_events ORDER BY window_start").fetchall()
    open_episode: dict[tuple, str | None] = {}
    states = {}
    for *series, metric, start, state, decision in history:
        key = (*map(str, series), metric)
        if state == "opened":
            open_episode[key] = decision
        elif state == "resolved":
            open_episode[key] = None
        row = latest.get(key[:-1])
        if row is not None and row["window_start"] == start:
            states[key] = {"drop": -1.0, "rise": 1.0, None: 0.0}[open_episode.get(key)]
    return states


def assert_carries_window_metrics(path, text: bytes, fmt: str) -> dict:
    found = parsed(text, fmt)
    latest = latest_rows(path)
    assert latest
    for name, column in COLUMN_OF.items():
        want = {}
        for key, row in latest.items():
            value = row[column]
            if hasattr(value, "timestamp"):
                value = value.replace(tzinfo=UTC).timestamp()
            if value is not None and not math.isnan(value):
                want[key] = float(value)
        assert found[name] == want, name
    assert set(found) == {*COLUMN_OF, "recallwatch_drift_state"}
    drift = expected_drift(path, latest)
    assert found["recallwatch_drift_state"] == drift
    return found


# ------------------------------------------------------------------------------ tests

@pytest.mark.parametrize("fmt", ["prometheus", "openmetrics"])
def test_every_latest_window_is_exported_with_window_metrics_numbers(small, fmt):
    latest, text = api.metrics(small, fmt=fmt)
    found = assert_carries_window_metrics(small, text, fmt)
    assert len(latest.rows) == len(latest_rows(small))
    assert text.endswith(b"# EOF\n") == (fmt == "openmetrics")
    all_k5 = ("day", "all", "ids", "5", "v1")
    assert found["recallwatch_mean_recall_ratio"][all_k5] == 0.75
    assert found["recallwatch_scored_requests"][all_k5] == 2
    # the fall on day 10 left drop episodes open; tenant=b's is open on day 13 although that
    # window's own decision is not a drop: the direction is the episode's
    assert found["recallwatch_drift_state"][(*all_k5, "mean_recall")] == -1.0
    with connect(small, read_only=True) as con:
        assert con.execute(
            "SELECT decision, state FROM drift_events WHERE slice = 'tenant=b' AND k = 5 "
            "AND metric = 'mean_recall' AND window_start = '2026-11-13'").fetchall() == [
            ("insufficient", "ongoing")]
    tenant_b = ("day", "tenant=b", "ids", "5", "v1", "mean_recall")
    assert found["recallwatch_drift_state"][tenant_b] == -1.0
    assert 0.0 in found["recallwatch_drift_state"].values()


@pytest.mark.parametrize("fmt", ["prometheus", "openmetrics"])
def test_a_tag_value_with_quotes_backslash_and_newline_round_trips(small, fmt):
    _, text = api.metrics(small, fmt=fmt)
    assert b'\\"hi\\" \\\\ then\\nnew line' in text   # escaped by the library
    slices = {key[1] for key in parsed(text, fmt)["recallwatch_mean_recall_ratio"]}
    assert NASTY_SLICE in slices
    assert slices == {s for _, s, *_ in latest_rows(small)}


def test_a_slice_logged_only_on_early_days_reports_its_own_latest_window(small):
    found = parsed(api.metrics(small)[1], "prometheus")
    starts = found["recallwatch_window_start_timestamp_seconds"]
    legacy = ("day", "legacy=yes", "ids", "5", "v1")
    assert starts[legacy] == datetime(2026, 11, 3, tzinfo=UTC).timestamp()
    assert starts[("day", "all", "ids", "5", "v1")] == datetime(2026, 11, 13,
                                                                tzinfo=UTC).timestamp()
    assert (found["recallwatch_window_end_timestamp_seconds"][legacy]
            == datetime(2026, 11, 4, tzinfo=UTC).timestamp())


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["prometheus", "openmetrics"])
def test_the_demo_world_exports_the_idx_v1_drop_still_open_at_its_last_day(demo, fmt):
    _, text = api.metrics(demo, fmt=fmt)
    found = assert_carries_window_metrics(demo, text, fmt)
    key = ("day", "index_version=idx-v1", "ids", "5", "gold-2026-10", "mean_recall")
    assert found["recallwatch_drift_state"][key] == -1.0
    assert found["recallwatch_drift_state"][("day", "all", "ids", "5", "gold-2026-10",
                                              "mean_recall")] == 0.0


def test_grain_and_gold_version_not_in_the_warehouse_are_one_sentence_errors(small):
    with pytest.raises(RecallwatchError, match="no window metrics by hour .*--grain day"):
        api.metrics(small, grain="hour")
    with pytest.raises(RecallwatchError, match="no gold version 'v9'.* v1"):
        api.metrics(small, gold_version="v9")
    assert api.metrics(small, gold_version="v1")[0].gold_version == "v1"


def test_the_cli_writes_stdout_or_replaces_out_whole(small, tmp_path, capsysbinary):
    from pipeline import cli

    assert cli.main(["--warehouse", str(small), "metrics", "--format", "openmetrics"]) == 0
    shown = capsysbinary.readouterr().out
    assert shown == api.metrics(small, fmt="openmetrics")[1]
    out = tmp_path / "textfile" / "recallwatch.prom"
    out.parent.mkdir()
    out.write_text("stale\n")
    assert cli.main(["--warehouse", str(small), "metrics", "--format", "openmetrics",
                     "--out", str(out)]) == 0
    assert b"written to" in capsysbinary.readouterr().out
    assert out.read_bytes() == shown
    assert os.listdir(out.parent) == ["recallwatch.prom"]   # no temporary file left behind
    assert stat.S_IMODE(out.stat().st_mode) == 0o644          # readable by the collector
    assert cli.main(["--warehouse", str(small), "metrics", "--out", str(out.parent)]) == 2
    assert b"is a directory" in capsysbinary.readouterr().err
    # a trailing slash names a directory, even one not there yet: no file of that name
    assert cli.main(["--warehouse", str(small), "metrics", "--out",
                     str(tmp_path / "new.prom") + "/"]) == 2
    assert b"is a directory" in capsysbinary.readouterr().err
    assert not (tmp_path / "new.prom").exists()


def test_a_warehouse_without_metrics_exits_2_with_one_sentence(run_cli, tmp_path):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    assert run_cli("ingest", "logs", tmp_path / "logs.jsonl")[0] == 0
    code, out, err = run_cli("metrics", "--out", tmp_path / "recallwatch.prom")
    assert code == 2 and out == ""
    assert err == ("recallwatch: error: the warehouse has no window metrics yet: run "
                   "`recallwatch run` (or `recallwatch score` then `recallwatch aggregate`) "
                   "first.\n")
    assert not (tmp_path / "recallwatch.prom").exists()
    code, _, err = run_cli("metrics", "--warehouse", tmp_path / "missing.duckdb")
    assert code == 2 and "does not exist" in err


def test_a_reader_that_goes_away_mid_exposition_exits_141(tmp_path):
    # `recallwatch metrics | head -1`: the exposition is one large write; the reader takes a
    # line and leaves while the command is still writing, which must end as a broken pipe
    # does (141), not as if everything had been written (0)
    import subprocess
    import sys

    script = ("import sys\nfrom pipeline import api, cli\n"
              "api.metrics = lambda *a, **k: (None, b'# HELP x\\n' * 200_000)\n"
              f"sys.exit(cli.main(['--warehouse', {str(tmp_path / 'w.duckdb')!r}, 'metrics']))\n")
    command = subprocess.Popen([sys.executable, "-c", script],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert command.stdout.read(9) == b"# HELP x\n"   # the command is writing now
    command.stdout.close()
    _, err = command.communicate(timeout=120)
    assert (command.returncode, err.decode()) == (141, "")


def test_a_gold_version_with_a_line_break_is_listed_in_one_line_of_error(tmp_path):
    # the versions a wrong --gold-version may choose from were joined as stored: a line break
    # in one split the one-sentence error (metrics and report alike)
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [request(f"r{i}", ["a"]) for i in range(3)])
    api.run(tmp_path / "w.duckdb", logs=[str(tmp_path / "logs.jsonl")],
            gold=str(tmp_path / "gold.jsonl"), gold_version="gold\n2026")
    for attempt in (lambda: api.metrics(tmp_path / "w.duckdb", gold_version="nope"),
                    lambda: api.report(tmp_path / "w.duckdb", tmp_path / "r",
                                       gold_version="nope")):
        with pytest.raises(RecallwatchError) as refused:
            attempt()
        assert "\n" not in str(refused.value) and "gold\\x0a2026" in str(refused.value)
