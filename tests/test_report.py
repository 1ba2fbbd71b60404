"""Tests of pipeline.report (write_report, end to end): the HTML report is self-contained, draws
in a real browser, escapes logged text, and quotes k, route, gold-set version and n beside every
figure. The chart geometry, the scope and the report's reads have their own test modules.

The warehouse is built row by row from sql/schema.sql: eight days whose recall falls when the
index is rebuilt (idx-v1 -> idx-v2) and recovers, several miss causes, excluded requests, an
older gold set and a second route that must not leak into the numbers, and quarantined records.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import markupsafe
import numpy as np
import pytest
from conftest import chromium, insert_rows, needs_chromium
from PIL import Image

from pipeline.report import write_report
from pipeline.report.charts import MEAN_COLOR, SIZE_COLOR

SCHEMA = Path(__file__).resolve().parents[1] / "sql" / "schema.sql"
PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"

GOLD, OLD_GOLD = "gs-2026-11", "gs-2026-10"
DAYS = [date(2026, 11, 1) + timedelta(days=i) for i in range(8)]
# Share of gold chunks found per day: falls with the idx-v2 rebuild on day 4, then recovers.
LEVELS = [0.93, 0.91, 0.92, 0.70, 0.55, 0.72, 0.86, 0.91]
PER_DAY = 24
SERVED_K = 5
CANDIDATES = 10  # logged per request, beyond k included
CUTOFFS = (1, 3, 5, 10)
WINDOW_CUTOFFS = (3, 5, 10)
PASS_MARK = 0.7
CAUSE_WEIGHTS = {
    "v1": {"beyond_k": 0.5, "not_retrieved": 0.4, "not_in_index": 0.1},
    "v2": {"not_in_index": 0.5, "beyond_k": 0.3, "not_retrieved": 0.2},
}


@dataclass
class Warehouse:
    path: Path
    scored: int = 0                      # ids route, GOLD, status scored
    per_day: dict[date, int] = field(default_factory=dict)
    per_golden: dict[str, int] = field(default_factory=dict)
    v2: str = "idx-v2"


def _hex_rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))


def _window_rows(scores: list[dict], at_k: dict[tuple[str, int], float],
                 requests: dict[str, dict]) -> list[dict]:
    """Aggregate like the pipeline would, with a plain normal interval (good enough here)."""
    groups: dict[tuple, list[dict]] = {}
    for s in (s for s in scores if s["route"] == "ids"):
        req = requests[s["request_id"]]
        day = s["timestamp"].date()
        versions = [s["gold_version"]] if s["gold_version"] else [GOLD, OLD_GOLD]
        slices = ["all", f"index_version={s['index_version']}", f"tenant={req['tenant']}"]
        for gv in versions:
            for sl in slices:
                groups.setdefault((day, gv, sl), []).append(s)
    rows = []
    for (day, gv, sl), members in sorted(groups.items()):
        scored = [m for m in members if m["status"] == "scored" and m["gold_version"] == gv]
        if not scored:
            continue
        for k in WINDOW_CUTOFFS:
            values = [at_k[(m["request_id"], k)] for m in scored]
            n = len(values)
            mean = sum(values) / n
            sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else 0.0
            half = 1.96 * sd / n ** 0.5
            passed = sum(v >= PASS_MARK for v in values) / n
            full = sum(v == 1.0 for v in values) / n
            p_half = 1.96 * (passed * (1 - passed) / n) ** 0.5
            f_half = 1.96 * (full * (1 - full) / n) ** 0.5
            sizes = [requests[m["request_id"]]["index_size"] for m in scored]
            start = datetime.combine(day, datetime.min.time())
            rows.append({
                "window_start": start, "window_end": start + timedelta(days=1),
                "grain": "day", "slice": sl, "route": "ids", "k": k, "gold_version": gv,
                "n": n, "n_sessions": n, "mean_recall": mean,
                "ci_low": max(0.0, mean - half), "ci_high": min(1.0, mean + half),
                "ci_method": "adjusted_t", "mean_precision": None, "pass_mark": PASS_MARK,
                "pass_rate": passed, "pass_ci_low": max(0.0, passed - p_half),
                "pass_ci_high": min(1.0, passed + p_half), "full_coverage_rate": full,
                "fc_ci_low": max(0.0, full - f_half), "fc_ci_high": min(1.0, full + f_half),
                "index_versions": sorted({m["index_version"] for m in scored}),
                "max_index_size": max(sizes),
                "n_excluded": sum(m["status"] != "scored" for m in members),
            })
    return rows


def _logged(rid: str, gold_ranks: dict[str, int]) -> dict:
    """A logged ranking of CANDIDATES chunks: the given gold chunks at their ranks, filler
    chunks elsewhere."""
    by_rank = {rank: chunk for chunk, rank in gold_ranks.items()}
    chunks = [by_rank.get(r, f"x-{rid}-{r}") for r in range(1, CANDIDATES + 1)]
    return {
        "retrieved": [{"step": 1, "position": r, "chunk_id": c, "rank": r,
                       "score": round(1 - r / 20, 3), "text": None}
                      for r, c in enumerate(chunks, start=1)],
        "chunk_ids": chunks,
        "chunk_ranks": list(range(1, CANDIDATES + 1)),
    }


def _raw_record(query: str) -> str:
    return json.dumps({"request_id": "r-z", "query": query})


def build_warehouse(path: Path, *, hostile: bool = False) -> Warehouse:
    rng = random.Random(20261101)
    wh = Warehouse(path=path, v2=("idx-v2" + PAYLOAD) if hostile else "idx-v2")
    tenants = ("acme", PAYLOAD if hostile else "globex")

    goldens = []
    for i in range(1, 14):
        gid = f"g-{i:02d}"
        chunks = [] if i == 13 else [f"c-{i:02d}-{j}" for j in range((2, 3, 4)[i % 3])]
        goldens.append({"gold_id": gid, "question": f"What does policy {i} require?",
                        "gold_chunk_ids": chunks})
    by_id = {g["gold_id"]: g for g in goldens}

    requests, scores, cutoff_rows, misses = {}, [], [], []
    at_k: dict[tuple[str, int], float] = {}
    for d, day in enumerate(DAYS):
        for j in range(PER_DAY):
            rid = f"r-{d}-{j:02d}"
            ts = datetime.combine(day, datetime.min.time()) + timedelta(minutes=50 * j + 7)
            version = "idx-v1" if d < 3 or (d == 3 and j % 2) else wh.v2
            kind = "v1" if version == "idx-v1" else "v2"
            size = 180_000 + 400 * d if kind == "v1" else 236_000 + 900 * d
            tenant = tenants[j % 3 == 0]
            if j == 0:
                gid = "g-missing"
            elif j == 1:
                gid = "g-13"
            elif j == 2 and d in (2, 5):
                gid = "g-12"  # only two scored requests: below the worst-goldens minimum
            else:
                gid = f"g-{rng.randint(1, 11):02d}"
            golden = by_id.get(gid)
            question = golden["question"] if golden else "Where is the missing policy?"
            query = question.upper() if j % 5 == 0 else question
            if hostile and gid == "g-03":
                query = f"{question} {PAYLOAD}"
            logged_gold = None if j % 3 == 0 else gid
            gv = OLD_GOLD if d < 2 and j % 4 == 3 else GOLD
            requests[rid] = {"index_size": size, "tenant": tenant}
            status = "no_gold_match" if golden is None else (
                "no_evidence" if not golden["gold_chunk_ids"] else "scored")

            con_row = {
                "request_id": rid, "timestamp": ts, "query": query,
                "query_norm": " ".join(query.casefold().split()), "gold_id": logged_gold,
                "index_version": version, "index_size": size, "k": SERVED_K,
                "n_steps": 1, "session_id": f"s-{d}-{j // 2}", "turn": 1 + j % 2,
                "tag_keys": ["tenant"], "tag_values": [tenant],
                **_logged(rid, {}),
                "source": f"/data/logs/dt={day}/part-0.jsonl", "line": j + 1,
            }
            requests[rid]["row"] = con_row
            if status != "scored":
                scores.append({
                    "request_id": rid, "timestamp": ts, "gold_id": golden and gid,
                    "gold_version": gv if golden else None, "index_version": version,
                    "route": "ids", "k": SERVED_K, "needed": 0 if golden else None,
                    "covered": None, "recall": None, "full_coverage": None, "precision": None,
                    "status": status,
                })
                continue

            hard = 0.7 if gid in ("g-03", "g-07") else 1.0
            served_ranks = rng.sample(range(1, SERVED_K + 1), SERVED_K)
            later_ranks = rng.sample(range(SERVED_K + 1, CANDIDATES + 1), CANDIDATES - SERVED_K)
            found: dict[str, int] = {}
            candidates: dict[str, int] = {}  # gold chunks logged beyond k
            for chunk in golden["gold_chunk_ids"]:
                if rng.random() < LEVELS[d] * hard:
                    found[chunk] = served_ranks.pop()
                    continue
                weights = CAUSE_WEIGHTS[kind]
                cause = rng.choices(list(weights), list(weights.values()))[0]
                if cause == "beyond_k":
                    candidates[chunk] = later_ranks.pop()
                misses.append({
                    "request_id": rid, "route": "ids", "gold_version": gv, "gold_id": gid,
                    "index_version": version, "chunk_id": chunk, "cause": cause,
                    "rank": candidates.get(chunk),
                })
            needed, covered = len(golden["gold_chunk_ids"]), len(found)
            con_row.update(_logged(rid, {**found, **candidates}))
            scores.append({
                "request_id": rid, "timestamp": ts, "gold_id": gid, "gold_version": gv,
                "index_version": version, "route": "ids", "k": SERVED_K, "needed": needed,
                "covered": covered, "recall": covered / needed,
                "full_coverage": covered == needed, "precision": covered / SERVED_K,
                "status": "scored",
            })
            hits = [sum(rank <= min(c, SERVED_K) for rank in found.values()) for c in CUTOFFS]
            for cutoff, hit in zip(CUTOFFS, hits, strict=True):
                at_k[(rid, cutoff)] = hit / needed
            # The served k caps every cutoff: candidates beyond k never count.
            cutoff_rows.append({
                "request_id": rid, "route": "ids", "needed": needed, "cutoffs": list(CUTOFFS),
                "covered": hits, "served": [min(c, SERVED_K) for c in CUTOFFS],
            })
            if j % 3 == 0:  # a second route: must never leak into the ids report
                scores.append({**scores[-1], "route": "passages", "recall": 0.123,
                               "covered": None, "full_coverage": False})
                cutoff_rows.append({
                    "request_id": rid, "route": "passages", "needed": 1000,
                    "cutoffs": list(CUTOFFS), "covered": [123] * len(CUTOFFS),
                    "served": [1230] * len(CUTOFFS),
                })
            if gv == GOLD:
                wh.scored += 1
                wh.per_day[day] = wh.per_day.get(day, 0) + 1
                wh.per_golden[gid] = wh.per_golden.get(gid, 0) + 1

    quarantine = [
        {"kind": "logs", "source": "/data/logs/dt=2026-11-02/part-0.jsonl", "line": line,
         "reason": "invalid JSON", "raw": '{"request_id": "r-x", "query": '}
        for line in (3, 17, 40)
    ] + [
        {"kind": "logs", "source": "/data/logs/dt=2026-11-05/part-0.jsonl", "line": 8,
         "reason": "missing required field: index_version",
         "raw": _raw_record(PAYLOAD if hostile else "fee?")},
        {"kind": "gold", "source": "/data/gold/gs-2026-11.jsonl", "line": 5,
         "reason": "gold_id duplicated with different content", "raw": '{"gold_id": "g-04"}'},
    ]
    files = [
        {"kind": "logs", "source": f"/data/logs/dt={day}/part-0.jsonl",
         "content_hash": f"sha-{day}", "options": "", "n_read": PER_DAY + q, "n_loaded": PER_DAY,
         "n_quarantined": q}
        for day, q in zip(DAYS, (0, 3, 0, 0, 1, 0, 0, 0), strict=True)
    ] + [
        {"kind": "gold", "source": "/data/gold/gs-2026-11.jsonl", "content_hash": "sha-g",
         "options": "", "n_read": 14, "n_loaded": 13, "n_quarantined": 1},
        {"kind": "index", "source": "/data/index/idx-v2.parquet", "content_hash": "sha-i",
         "options": "", "n_read": 40, "n_loaded": 40, "n_quarantined": 0},
    ]

    con = duckdb.connect(str(path))
    try:
        con.execute(SCHEMA.read_text())
        con.executemany(
            """
            INSERT INTO requests (request_id, timestamp, query, query_norm, gold_id,
                index_version, index_size, k, n_steps, session_id, turn, tags, retrieved,
                chunk_ids, chunk_ranks, source, line)
            VALUES ($request_id, $timestamp, $query, $query_norm, $gold_id, $index_version,
                $index_size, $k, $n_steps, $session_id, $turn, map($tag_keys, $tag_values),
                $retrieved, $chunk_ids, $chunk_ranks, $source, $line)
            """,
            [r["row"] for r in requests.values()],
        )
        insert_rows(con, "goldens", [
            {"gold_version": gv, "question_norm": g["question"].casefold(),
             "reference": None, **g}
            for gv in (OLD_GOLD, GOLD) for g in goldens
        ])
        insert_rows(con, "gold_versions", [
            {"gold_version": OLD_GOLD, "seq": 1, "source": "/data/gold/gs-2026-10.jsonl",
             "content_hash": "a", "n_goldens": 13},
            {"gold_version": GOLD, "seq": 2, "source": "/data/gold/gs-2026-11.jsonl",
             "content_hash": "b", "n_goldens": 13},
        ])
        insert_rows(con, "request_scores", scores)
        insert_rows(con, "request_cutoffs", cutoff_rows)  # the public recall_at_k view unnests it
        insert_rows(con, "miss_causes", misses)
        insert_rows(con, "window_metrics", _window_rows(scores, at_k, requests))
        insert_rows(con, "quarantine", quarantine)
        insert_rows(con, "ingest_files", files)
    finally:
        con.close()
    return wh


def render(wh: Warehouse, out_dir: Path, **kwargs) -> str:
    con = duckdb.connect(str(wh.path), read_only=True)
    try:
        path = write_report(con, out_dir, **kwargs)
    finally:
        con.close()
    assert path == out_dir / "report.html"
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def scored_warehouse(tmp_path_factory) -> Warehouse:
    return build_warehouse(tmp_path_factory.mktemp("wh") / "warehouse.duckdb")


@pytest.fixture(scope="module")
def report(scored_warehouse, tmp_path_factory) -> tuple[Path, str]:
    out_dir = tmp_path_factory.mktemp("report")
    return out_dir / "report.html", render(scored_warehouse, out_dir)


def test_report_is_self_contained(report):
    _, text = report
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert not re.search(r"<script\b", text, re.I)
    assert not re.search(r"<link\b", text, re.I)
    assert "@import" not in text
    # No attribute loads anything: the only links are in-page anchors.
    assert not re.search(r"\bsrc\s*=", text, re.I)
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', text))
    assert "<svg" in text and "<style>" in text


@pytest.mark.browser
@needs_chromium
def test_report_draws_in_headless_chromium(report, tmp_path):
    path, _ = report
    png = tmp_path / "shot.png"
    shot = chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,4000", path.as_uri())
    assert png.exists(), shot.stderr[-2000:]

    pixels = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)
    assert pixels.shape == (4000, 1280, 3)

    def painted(color: str, tolerance: int = 10) -> np.ndarray:
        target = np.array(_hex_rgb(color), dtype=np.int16)
        return np.abs(pixels - target).max(axis=2) <= tolerance

    # The mean-recall line and points, and the index-size panel, were really painted: many
    # pixels of the line colour, spread across the width of a chart rather than one spot.
    mean = painted(MEAN_COLOR)
    assert mean.sum() > 1500
    columns = np.flatnonzero(mean.any(axis=0))
    assert columns.max() - columns.min() > 600
    assert painted(SIZE_COLOR).sum() > 500
    assert int((pixels.min(axis=2) < 235).sum()) > 50_000

    dom = chromium(tmp_path, "--dump-dom", path.as_uri()).stdout
    assert dom.count("<svg") >= 5
    assert dom.count("<circle") >= 2 * len(DAYS)
    assert "<path" in dom and 'stroke-dasharray="5 4"' in dom


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("hostile")
    wh = build_warehouse(base / "warehouse.duckdb", hostile=True)
    return base / "out" / "report.html", render(wh, base / "out")


def test_logged_script_tag_is_escaped(hostile_report):
    _, text = hostile_report
    escaped = str(markupsafe.escape(PAYLOAD))
    assert PAYLOAD not in text
    assert "<script" not in text and "<img" not in text
    assert not re.search(r"<[^>]*\sonerror\s*=", text)
    # Shown as text: a logged query, a tag value (as its slice), a quarantine raw record and an
    # index version inside SVG text.
    assert "What does policy 3 require? " + escaped in text
    assert "tenant=" + escaped in text
    assert str(markupsafe.escape(_raw_record(PAYLOAD))) in text
    assert re.search(r'<text [^>]*class="marker">(?:<title>[^<]*</title>)?idx-v2&lt;script&gt;',
                     text)


@pytest.mark.browser
@needs_chromium
def test_logged_script_tag_stays_text_in_headless_chromium(hostile_report, tmp_path):
    path, _ = hostile_report
    dom = chromium(tmp_path, "--dump-dom", path.as_uri()).stdout
    assert "<svg" in dom
    assert re.search(r"<head>.*?<title>(.*?)</title>", dom, re.S).group(1) == "recallwatch report"
    assert not re.search(r"<(?:script|img)\b", dom, re.I)
    assert not re.search(r"<[^>]*\sonerror\s*=", dom, re.I)
    assert "&lt;script&gt;document.title='pwned'" in dom


CAPTION = re.compile(
    r'<figure id="(?P<id>[\w-]+)">\s*<figcaption>.*?<span class="meta"[^>]*>'
    r"k=(?P<k>.+?) · route=(?P<route>\S+) · gold set (?P<gold>\S+) · "
    r"n=(?P<n>[\d,]+) scored requests</span>",
    re.S,
)


def test_every_figure_states_k_route_gold_version_and_n(scored_warehouse, report):
    _, text = report
    captions = {m["id"]: m for m in CAPTION.finditer(text)}
    assert len(captions) == text.count("<figure"), "a figure has no k/route/gold/n caption"

    latest = max(scored_warehouse.per_day)
    worst = sum(n for n in scored_warehouse.per_golden.values() if n >= 3)
    expected_n = {
        "fig-headline": scored_warehouse.per_day[latest],
        "fig-status": scored_warehouse.scored,
        "fig-daily": scored_warehouse.scored,
        "fig-curve": scored_warehouse.scored,
        "fig-curve-table": scored_warehouse.scored,
        "fig-rates": scored_warehouse.scored,
        "fig-misses": scored_warehouse.scored,
        "fig-misses-by-version": scored_warehouse.scored,
        "fig-worst": worst,
        "fig-slices": scored_warehouse.per_day[latest],
    }
    # the warehouse's second index version gets a before/after figure over the days around it
    rebuild = captions.pop("fig-rebuild-1")
    assert (rebuild["route"], rebuild["gold"]) == ("ids", GOLD)
    # (this hand-built warehouse has no window_sums, so the sides are empty)
    assert int(rebuild["n"].replace(",", "")) == 0
    assert set(captions) == set(expected_n)
    assert worst < scored_warehouse.scored  # g-12 has two requests: the minimum of three bites
    for fig, n in expected_n.items():
        caption = captions[fig]
        assert caption["route"] == "ids", fig
        assert caption["gold"] == GOLD, fig
        assert int(caption["n"].replace(",", "")) == n, fig
        if fig.startswith("fig-curve"):
            assert caption["k"].startswith("1, 3, 5, 10 (cutoffs"), fig
            assert "report k=5" in caption["k"], fig
        else:
            assert re.fullmatch(r"5( \(served\))?", caption["k"]), (fig, caption["k"])
    # Every chart sits inside a captioned figure.
    assert text.count("<svg") == len(re.findall(r"<figure id=[^>]*>(?:(?!</figure>).)*<svg",
                                                text, re.S))


def test_defaults_pick_newest_gold_set_and_most_common_served_k(scored_warehouse, tmp_path):
    text = render(scored_warehouse, tmp_path)
    assert f"gold set <strong>{GOLD}</strong>" in text
    assert "k <strong>5</strong>" in text
    older = render(scored_warehouse, tmp_path / "old", gold_version=OLD_GOLD, k=3)
    caption = {m["id"]: m for m in CAPTION.finditer(older)}["fig-daily"]
    assert (caption["gold"], caption["k"]) == (OLD_GOLD, "3")


@pytest.mark.parametrize("loaded", [False, True], ids=["schema-only", "loaded-not-scored"])
def test_empty_warehouse_writes_a_report_saying_nothing_is_scored(tmp_path, loaded):
    path = tmp_path / "empty.duckdb"
    con = duckdb.connect(str(path))
    con.execute(SCHEMA.read_text())
    if loaded:
        con.execute(
            "INSERT INTO gold_versions VALUES ('gs-1', 1, '/g.jsonl', 'h', 0, NULL);"
            "INSERT INTO quarantine (kind, source, line, reason, raw) "
            "VALUES ('logs', '/l.jsonl', 1, 'invalid JSON', '{');"
        )
    text_path = write_report(con, tmp_path / "out")
    con.close()
    text = text_path.read_text(encoding="utf-8")
    assert "Nothing is scored yet" in text
    assert "<svg" not in text and "<figure" not in text
    assert text.rstrip().endswith("</html>")
    if loaded:
        assert "gs-1" in text and "invalid JSON" in text



def report_of(tmp_path, records: list[dict]) -> str:
    """The report of one golden (chunks a, b) and `records`, built by `run`."""
    from conftest import golden, write_jsonl

    from pipeline.run import run
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", records)
    with connect(tmp_path / "w.duckdb") as con:
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")
        out = write_report(con, tmp_path / "report")
    return Path(out).read_text(encoding="utf-8")


def worst_section_of(tmp_path, missing: bool) -> str:
    """The worst-goldens section of four goldens of three requests each, all finding their
    chunk but, when `missing`, those of g0."""
    from conftest import golden, request, write_jsonl

    from pipeline.run import run
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden(f"g{i}", [f"c{i}"], question=f"q{i}")
                                          for i in range(4)])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{i}-{j}", ["x"] if missing and i == 0 else [f"c{i}"], gold_id=f"g{i}",
                ts=f"2026-11-01T1{j}:00:00Z") for i in range(4) for j in range(3)])
    with connect(tmp_path / "w.duckdb") as con:
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")
        html = Path(write_report(con, tmp_path / "report")).read_text(encoding="utf-8")
    return html[html.index('<section id="worst">'):html.index('<section id="slices">')]


def test_worst_goldens_list_only_goldens_that_missed(tmp_path):
    # one of four goldens ever misses: the three that found everything were listed as
    # "worst" at recall 1.000
    section = worst_section_of(tmp_path / "a", missing=True)
    assert "The 1 goldens with the lowest mean recall" in section
    assert "<code>g0</code>" in section and "<code>g1</code>" not in section
    # when every golden finds all it needs, the section says so
    section = worst_section_of(tmp_path / "b", missing=False)
    assert "Every golden with 3 or more scored requests found all it needed" in section
    assert "<table>" not in section


def test_a_warehouse_of_hourly_windows_only_says_why_the_report_is_empty(tmp_path):
    # `aggregate --window hour` then `drift`: the report said "No drift computed yet — run
    # recallwatch drift", the command just run
    from conftest import golden, request, write_jsonl

    from pipeline import api

    warehouse = tmp_path / "w.duckdb"
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{d}-{j}", ["a", "b"][: 1 + j % 2], ts=f"2026-11-0{d}T10:0{j}:00Z")
        for d in (1, 2, 3) for j in range(4)])
    api.ingest_gold(warehouse, str(tmp_path / "gold.jsonl"), "v1")
    api.ingest_logs(warehouse, [str(tmp_path / "logs.jsonl")])
    api.score(warehouse)
    api.aggregate(warehouse, grain="hour")
    api.drift(warehouse)
    text = re.sub(r"<[^>]+>", "", Path(api.report(warehouse, tmp_path / "r")).read_text(
        encoding="utf-8"))
    assert "This warehouse holds hourly windows only (aggregate --window hour)" in text
    assert "No drift of daily windows: this warehouse holds hourly windows only" in text
    assert "No drift computed yet" not in text


def test_slices_without_requests_on_the_latest_day_are_named_not_left_out(tmp_path):
    # a tenant that logged only on the first day has no row on the latest day: the per-slice
    # table says so, with the last day it had, instead of leaving it out without a word
    from conftest import request

    html = report_of(tmp_path, [
        request("r-1", ["a"], ts="2026-11-01T10:00:00Z", tags={"tenant": "early"}),
        request("r-2", ["a", "b"], ts="2026-11-01T11:00:00Z", tags={"tenant": "both"}),
        request("r-3", ["b"], ts="2026-11-02T10:00:00Z", tags={"tenant": "both"})])
    section = html[html.index('<section id="slices">'):html.index('<section id="drift">')]
    assert "tenant=both" in section and "Each slice on 2026-11-02" in section
    text = re.sub(r"<[^>]+>", "", section)
    assert "1 slice had no requests on 2026-11-02: tenant=early (last day 2026-11-01)" in text


def test_a_mean_without_an_interval_names_no_method(tmp_path):
    # one request on the latest day, recall 0.5: window_metrics has no interval for it (n = 1)
    # and the report printed "— — (t)", as if a t-interval stood there
    from conftest import golden, request, write_jsonl

    from pipeline.run import run
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", ["a"], ts="2026-11-01T10:00:00Z"),
        request("r-2", ["a", "b"], ts="2026-11-01T11:00:00Z"),
        request("r-3", ["b"], ts="2026-11-02T10:00:00Z")])
    with connect(tmp_path / "w.duckdb") as con:
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")
        stored = con.sql("SELECT window_start::DATE::VARCHAR, ci_low, ci_method "
                         "FROM window_metrics WHERE grain = 'day' AND slice = 'all' "
                         "AND k = 3 ORDER BY 1").fetchall()
        out = write_report(con, tmp_path / "report", k=3)
    assert stored == [("2026-11-01", pytest.approx(stored[0][1]), "adjusted_t"),
                      ("2026-11-02", None, "adjusted_t")]
    text = re.sub(r"<[^>]+>", " ", Path(out).read_text(encoding="utf-8"))
    text = re.sub(r"\s+", " ", text)
    assert "(no interval)" in text and "(adjusted_t)" not in text
    # the daily table: a method beside the interval of 11-01, none beside 11-02's
    assert re.search(r"2026-11-01 2 0 0\.750 \[[^]]+\] adjusted_t ", text), text
    assert re.search(r"2026-11-02 1 0 0\.500 — — ", text), text
    # the latest day by slice: no interval, no method for the mean; the rates' Wilson stands
    assert re.search(r"all 1 0 0\.500 — — / wilson ", text), text


def test_characters_that_turn_or_hide_text_are_written_as_their_codes(tmp_path):
    # a right-to-left override in a tag value turned the dates and counts after it around in
    # the page ("and 105 more" read ".erom 501 dna"); a zero-width space hid in a slice name
    from conftest import request

    html = report_of(tmp_path, [
        request("r-1", ["a"], ts="2026-11-01T10:00:00Z", tags={"tenant": "rtl\u202eover"}),
        request("r-2", ["a", "b"], ts="2026-11-02T11:00:00Z",
                tags={"tenant": "zero\u200bwidth"}, index_version="idx-\u202e2"),
        request("r-3", ["b"], ts="2026-11-02T12:00:00Z", tags={"tenant": "👨\u200d👩\u200d👧"}),
        request("r-4", ["b"], ts="2026-11-02T13:00:00Z", tags={"tenant": "ac\u00adme\U000e0041"})])
    assert not any(ch in html for ch in "\u202e\u200b"), "raw formatting characters"
    assert "tenant=rtl\\u202eover" in html and "tenant=zero\\u200bwidth" in html
    assert "idx-\\u202e2" in html
    assert "tenant=ac\\xadme\\ue0041" in html   # a soft hyphen, an invisible tag character
    assert "👨\u200d👩\u200d👧" in html   # an emoji sequence's joiners stay


def test_a_slice_never_compared_with_a_baseline_says_so(tmp_path):
    # a new index version every 5 days: the default first:7 baseline never forms, 20 days
    # were all "baseline" and the report said only "0 drop ... 20 baseline days"
    from conftest import golden, request, write_jsonl

    from pipeline.run import run
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r-{d}-{i}", ["a", "b"][: 1 + i % 2], ts=f"2026-11-{d:02d}T1{i}:00:00Z",
                index_version=f"idx-{(d - 1) // 5}")
        for d in range(1, 21) for i in range(4)])
    with connect(tmp_path / "w.duckdb") as con:
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")
        assert con.sql("SELECT DISTINCT decision FROM drift_events").fetchall() == [
            ("baseline",)]
        html = Path(write_report(con, tmp_path / "report")).read_text(encoding="utf-8")
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
        assert "No day of this slice has been compared with a baseline" in text
        assert "--baseline SLICE=trailing:N" in text and "( first:7 )" in text
        # with a baseline that forms, no such notice (anytime, a trailing baseline and its
        # gap of as many days: 4 of the 5 each version serves)
        from pipeline.config import put_in_force, resolve

        put_in_force(con, resolve(con, baselines={"*": "trailing:2"}))
        run(con)
        html = Path(write_report(con, tmp_path / "report")).read_text(encoding="utf-8")
    assert "No day of this slice has been compared" not in html


def test_a_trailing_baseline_still_in_its_anytime_gap_is_not_said_never_to_form(tmp_path):
    # 14 days of one index version and trailing:7 in anytime mode: the baseline and its gap
    # take 2N = 14 days, the 15th is compared. The report said no day had been compared
    # because each version serves fewer days than the baseline needs (use another baseline)
    from conftest import golden, request, write_jsonl

    from pipeline.config import put_in_force, resolve
    from pipeline.run import run
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r-{d}-{i}", ["a", "b"][: 1 + i % 2], ts=f"2026-11-{d:02d}T1{i}:00:00Z")
        for d in range(1, 15) for i in range(4)])
    with connect(tmp_path / "w.duckdb") as con:
        put_in_force(con, resolve(con, baselines={"*": "trailing:7"}))
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")
        assert con.sql("SELECT DISTINCT decision FROM drift_events").fetchall() == [
            ("baseline",)]
        html = Path(write_report(con, tmp_path / "report")).read_text(encoding="utf-8")
        assert "No day of this slice has been compared" not in html
        # a fixed look (no gap) and a new index every 5 days: trailing:7 never forms, it says so
        put_in_force(con, resolve(con, drift_mode="fixed"))
        write_jsonl(tmp_path / "logs.jsonl", [
            request(f"r-{d}-{i}", ["a", "b"][: 1 + i % 2], ts=f"2026-11-{d:02d}T1{i}:00:00Z",
                    index_version=f"idx-{(d - 1) // 5}")
            for d in range(1, 15) for i in range(4)])
        run(con, logs=[str(tmp_path / "logs.jsonl")])
        html = Path(write_report(con, tmp_path / "report")).read_text(encoding="utf-8")
    assert "No day of this slice has been compared" in html


def test_days_where_no_request_was_scored_draw_no_empty_charts(tmp_path):
    # every request names a golden the gold set lacks: nothing is scored; the report drew
    # empty daily and rate charts and a drift timeline shading nine "baseline" days at 0
    from conftest import request

    html = report_of(tmp_path, [
        request(f"r-{d}", ["a"], ts=f"2026-11-{d:02d}T10:00:00Z", gold_id="nowhere",
                query="not a gold question") for d in range(1, 10)])
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    for section in ("daily", "rates", "drift"):
        part = html[html.index(f'<section id="{section}">'):]
        part = part[:part.index("</section>")]
        assert "<svg" not in part, section
    assert text.count("No request of 2026-11-01 … 2026-11-09 was scored (9 excluded") >= 2, text
    assert "9 baseline days" not in text and "forms the baseline: —" not in text
    # the windows exist (their requests are counted and excluded): no "nothing is scored yet"
    assert 'id="nothing-scored"' not in html


def test_a_quarantined_record_kept_cut_says_at_least_what_is_left_out(tmp_path):
    # ingest keeps 65,536 characters of a record: the preview of a 100,000-character line
    # said "65296 more characters"
    from pipeline.ingest.files import RAW_LIMIT
    from pipeline.report.sections import _preview

    assert _preview("x" * RAW_LIMIT).endswith(f"… (at least {RAW_LIMIT - 240} more characters)")
    assert _preview("x" * 300).endswith("… (60 more characters)")
    # never through a character: a flag's halves, a letter and its accent
    assert _preview("x" * 239 + "\U0001f1e9\U0001f1ea" + "y" * 9).startswith("x" * 239 + "…")
    assert _preview("x" * 239 + "e\u0301" + "y" * 9).startswith("x" * 239 + "…")


def test_a_gold_set_no_request_was_looked_up_in_is_named(tmp_path):
    # scored with v1, then v2 loaded (the newest, the report's default): the report said no
    # request had been looked up "in a gold set", while 3 had, in v1
    from conftest import golden, write_jsonl

    from pipeline.ingest import ingest_gold
    from pipeline.warehouse import connect

    report_of(tmp_path, [request_at(i) for i in range(3)])
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"])])
    with connect(tmp_path / "w.duckdb") as con:
        ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2")
        html = Path(write_report(con, tmp_path / "report")).read_text(encoding="utf-8")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "No request has been looked up in gold set v2 for route ids yet." in text


def request_at(i: int) -> dict:
    from conftest import request

    return request(f"r-{i}", ["a"], ts=f"2026-11-01T1{i}:00:00Z")


# What the page lays out where, measured in the browser: chart text outside its chart,
# index-change labels drawn over each other, summary cards whose text runs out of them.
LAYOUT_PROBE = """<script>
addEventListener('load', () => {
  const out = [];
  document.querySelectorAll('svg').forEach(svg => {
    const vb = svg.viewBox.baseVal;
    if (!vb || !vb.width) return;
    svg.querySelectorAll('text').forEach(t => {
      const b = t.getBBox();
      if (b.x < vb.x - 0.5 || b.x + b.width > vb.x + vb.width + 0.5)
        out.push('outside: ' + t.textContent);
    });
    const marks = [...svg.querySelectorAll('text.marker')].map(t => [t, t.getBBox()]);
    marks.forEach(([a, A], i) => marks.slice(i + 1).forEach(([b, B]) => {
      // glyph boxes of adjacent rows touch by a pixel or two: more is drawn over
      if (A.x + 2 < B.x + B.width && B.x + 2 < A.x + A.width && A.y + 2 < B.y + B.height
          && B.y + 2 < A.y + A.height)
        out.push('overlap: ' + a.textContent + ' / ' + b.textContent);
    }));
  });
  document.querySelectorAll('.card .detail, .card .value').forEach(d => {
    if (d.scrollWidth > d.clientWidth + 1) out.push('card: ' + d.textContent.trim());
  });
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.browser
@needs_chromium
def test_long_names_stay_inside_their_charts_and_cards(tmp_path):
    # a long gold set name ran over the next summary card; capitals or CJK index versions
    # were drawn off a chart's left edge; index changes on consecutive days drew their
    # labels over each other
    from conftest import golden, request, write_jsonl

    from pipeline.run import run
    from pipeline.warehouse import connect

    versions = ["PROD-EMBEDDINGS-HNSW-M32-EF256-WEEK-01", "PROD-EMBEDDINGS-HNSW-M32-EF256-WEEK-02",
                "索引版本二〇二六年十一月一日重建", "idx-2026-11-01-hnsw-m32-ef256-rebuilt"]
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r-{d}-{i}", ["a", "x"], ts=f"2026-11-{d:02d}T1{i}:00:00Z",
                index_version=versions[min(d - 1, 3)] if d <= 4 else versions[3])
        for d in range(1, 6) for i in range(3)])
    with connect(tmp_path / "w.duckdb") as con:
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="gs-2026-11-01_production_eval_set_v12_final")
        html = Path(write_report(con, tmp_path / "report")).read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", LAYOUT_PROBE + "</body>"), encoding="utf-8")
    dom = chromium(tmp_path, "--window-size=1300,3000", "--virtual-time-budget=3000",
                   "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    assert json.loads(markupsafe.Markup(found.group(1)).unescape()) == []
