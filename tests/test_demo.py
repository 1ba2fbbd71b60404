"""Tests for pipeline.demo: the demo world is reproducible, writes its logs, gold set and index
manifests in the formats the README's Inputs section describes, and tells its recall story.
Every figure is recomputed here from the written files with DuckDB and the standard library,
independently of the pipeline's own ingest and scoring.
"""

import hashlib
import json
import re
import unicodedata
from datetime import date, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from pipeline.demo import generate_demo_world

RANKED = "STRUCT(chunk_id VARCHAR, rank INTEGER, score DOUBLE, text VARCHAR)"
# Explicit columns make a malformed JSON line an all-NULL row and a wrongly typed field NULL,
# instead of failing the read or widening every column to JSON.
JSON_COLUMNS = {
    "request_id": "VARCHAR", "timestamp": "VARCHAR", "query": "VARCHAR", "gold_id": "VARCHAR",
    "index_version": "VARCHAR", "index_size": "BIGINT", "k": "INTEGER",
    "retrieved": f"{RANKED}[]", "retrieval_steps": f"{RANKED}[][]", "session_id": "VARCHAR",
    "turn": "INTEGER", "response": "VARCHAR",
    "tags": "STRUCT(tenant VARCHAR, retriever VARCHAR)",
}
ISO_SECONDS_Z = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _file_digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*")) if path.is_file()
    }


def _read_gold(world) -> list[dict]:
    return [json.loads(line) for line in world.gold_path.read_text().splitlines()]


def _connect(world) -> duckdb.DuckDBPyConnection:
    """Views over the written files: raw `logs`, well-formed `requests`, `gold`, `manifests`."""
    con = duckdb.connect()
    logs = world.logs_dir.as_posix()
    con.execute(f"""
        CREATE VIEW logs AS
        SELECT * EXCLUDE (filename), filename LIKE '%.jsonl' AS is_json
        FROM read_json('{logs}/*/requests.jsonl', format = 'newline_delimited',
                       columns = {JSON_COLUMNS}, ignore_errors = true,
                       hive_partitioning = true, filename = true)
        UNION ALL BY NAME
        SELECT * EXCLUDE (filename), false AS is_json
        FROM read_parquet('{logs}/*/requests.parquet', hive_partitioning = true,
                          filename = true)
    """)
    con.execute(f"""
        CREATE VIEW requests AS
        SELECT *, coalesce(retrieved, flatten(retrieval_steps)) AS all_candidates
        FROM logs
        WHERE request_id IS NOT NULL
          AND regexp_full_match(coalesce(timestamp, ''), '{ISO_SECONDS_Z}')
          AND (retrieved IS NOT NULL OR retrieval_steps IS NOT NULL)
          AND list_bool_and([c.chunk_id IS NOT NULL
                             FOR c IN coalesce(retrieved, flatten(retrieval_steps))])
    """)
    con.execute("CREATE TABLE gold AS SELECT * FROM read_json(?, format = 'newline_delimited')",
                [world.gold_path.as_posix()])
    manifests = [p.as_posix() for p in world.index_manifests.values()]
    con.execute("CREATE TABLE manifests AS SELECT * FROM read_parquet(?)", [manifests])

    # Requests without a gold_id join their golden by normalized question text.
    gold_by_question = {_normalize(g["question"]): g["gold_id"] for g in _read_gold(world)}
    asked = con.sql("SELECT request_id, query, gold_id FROM requests").fetchall()
    matched = pa.table({
        "request_id": [request_id for request_id, _, _ in asked],
        "matched_gold_id": [
            gold_id or gold_by_question.get(_normalize(query)) for _, query, gold_id in asked
        ],
    })
    con.register("matched_arrow", matched)
    con.execute("CREATE TABLE matched AS SELECT * FROM matched_arrow")
    con.unregister("matched_arrow")
    return con


def _daily_recall_at_5(con) -> list[tuple[date, str, float, int]]:
    """(day, index version, mean recall@5, scored requests); agentic: union of the steps."""
    return con.sql("""
        WITH scored AS (
            SELECT r.dt, r.index_version,
                   len(list_intersect(g.gold_chunk_ids,
                                      [c.chunk_id FOR c IN r.all_candidates IF c.rank <= 5]))
                   / len(g.gold_chunk_ids) AS recall
            FROM requests r
            JOIN matched m USING (request_id)
            JOIN gold g ON g.gold_id = m.matched_gold_id
            WHERE len(g.gold_chunk_ids) > 0
        )
        SELECT dt, any_value(index_version), avg(recall), count(*)
        FROM scored GROUP BY dt ORDER BY dt
    """).fetchall()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The world `recallwatch demo` shows: default arguments (about 1.5 s to generate)."""
    return generate_demo_world(tmp_path_factory.mktemp("demo-world"))


@pytest.fixture(scope="module")
def con(world):
    connection = _connect(world)
    yield connection
    connection.close()


def test_same_seed_writes_identical_files(tmp_path):
    first = generate_demo_world(tmp_path / "a", seed=11, days=4, requests_per_day=150)
    second = generate_demo_world(tmp_path / "b", seed=11, days=4, requests_per_day=150)
    digests = _file_digests(first.root)
    assert len(digests) == 1 + 1 + 4  # gold, one manifest, four daily partitions
    assert digests == _file_digests(second.root)


def test_other_seed_writes_other_logs(tmp_path):
    first = generate_demo_world(tmp_path / "a", seed=1, days=2, requests_per_day=100)
    second = generate_demo_world(tmp_path / "b", seed=2, days=2, requests_per_day=100)
    first_digests, second_digests = _file_digests(first.root), _file_digests(second.root)
    for name in first_digests:
        assert first_digests[name] != second_digests[name], name


def test_regenerating_into_the_same_directory_leaves_no_stale_partitions(tmp_path):
    generate_demo_world(tmp_path, days=6, requests_per_day=50)
    shorter = generate_demo_world(tmp_path, days=3, requests_per_day=50)
    partitions = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert partitions == [f"dt={shorter.start + timedelta(days=d)}" for d in range(3)]


def test_world_spans_thirty_days_of_fifty_thousand_requests_in_both_formats(world, con):
    assert (world.start, world.end) == (date(2026, 10, 1), date(2026, 10, 31))
    assert world.n_requests >= 50_000
    assert world.n_bad_records == 5
    for d in range(30):
        partition = world.logs_dir / f"dt={world.start + timedelta(days=d)}"
        expected = "requests.jsonl" if d % 2 == 0 else "requests.parquet"
        assert [p.name for p in partition.iterdir()] == [expected]
    (n_records,) = con.sql("SELECT count(*) FROM logs").fetchall()[0]
    assert n_records == world.n_requests
    (n_good, n_ids) = con.sql("SELECT count(*), count(DISTINCT request_id) FROM requests"
                              ).fetchall()[0]
    assert n_good == n_ids == world.n_requests - world.n_bad_records


def test_recall_at_5_falls_as_index_grows_and_recovers_after_rebuild(world, con):
    daily = _daily_recall_at_5(con)
    assert [day for day, *_ in daily] == [world.start + timedelta(days=d) for d in range(30)]
    recall = np.array([mean for _, _, mean, _ in daily])
    versions = [version for _, version, _, _ in daily]
    rebuild = (world.rebuild_day - world.start).days
    assert rebuild == 20
    assert versions == ["idx-v1"] * rebuild + ["idx-v2"] * (30 - rebuild)
    assert min(n for *_, n in daily) > 1_500

    assert 0.85 <= recall[0] <= 0.92
    assert 0.55 <= recall[rebuild - 1] <= 0.66
    # Steady decline over idx-v1: every 5-day block below the previous one.
    blocks = recall[:rebuild].reshape(4, 5).mean(axis=1)
    assert np.all(np.diff(blocks) < -0.03), blocks
    assert np.polyfit(np.arange(rebuild), recall[:rebuild], 1)[0] < -0.01
    # The rebuild restores recall, which then drifts down more slowly.
    assert 0.84 <= recall[rebuild] <= 0.92
    assert recall[rebuild] - recall[rebuild - 1] > 0.2
    v2_slope = np.polyfit(np.arange(30 - rebuild), recall[rebuild:], 1)[0]
    v1_slope = np.polyfit(np.arange(rebuild), recall[:rebuild], 1)[0]
    assert v1_slope < v2_slope < 0
    assert recall[-3:].mean() < recall[rebuild:rebuild + 3].mean() - 0.02
    assert recall[-3:].mean() > recall[rebuild - 3:rebuild].mean() + 0.1


def test_index_grows_daily_and_rebuild_switches_version(world, con):
    days = con.sql("""
        SELECT dt, list_distinct(list(index_version)), min(index_size), max(index_size),
               min(k), max(k)
        FROM requests GROUP BY dt ORDER BY dt
    """).fetchall()
    sizes = np.array([size_min for _, _, size_min, *_ in days])
    assert all(len(versions) == 1 for _, versions, *_ in days)
    assert all(size_min == size_max for _, _, size_min, size_max, *_ in days)
    assert all(k_min == k_max == 5 for *_, k_min, k_max in days)
    assert sizes[0] == 100_000
    assert np.all((np.diff(sizes) >= 2_700) & (np.diff(sizes) <= 3_300))
    # Manifests list each version at its final size.
    manifest_sizes = dict(con.sql(
        "SELECT index_version, count(*) FROM manifests GROUP BY ALL").fetchall())
    assert manifest_sizes == {"idx-v1": sizes[19], "idx-v2": sizes[29]}


def test_candidates_are_ten_distinct_chunks_ranked_by_descending_score(con):
    bad_lists = con.sql("""
        SELECT request_id FROM requests, unnest(coalesce([retrieved], retrieval_steps)) AS s(lst)
        WHERE len(lst) != 10
           OR [c.rank FOR c IN lst] != range(1, 11)
           OR len(list_distinct([c.chunk_id FOR c IN lst])) != 10
           OR list_sort([c.score FOR c IN lst], 'DESC') != [c.score FOR c IN lst]
           OR len(list_distinct([c.score FOR c IN lst])) != 10
           OR list_bool_or([len(c.text) < 40 OR len(c.text) > 130 FOR c IN lst])
    """).fetchall()
    assert bad_lists == []


def test_deleted_gold_chunks_are_absent_from_manifests_and_logs(world, con):
    gold = _read_gold(world)
    manifest_ids = {cid for (cid,) in con.sql("SELECT chunk_id FROM manifests").fetchall()}
    missing = {cid for g in gold for cid in g["gold_chunk_ids"]} - manifest_ids
    assert missing == set(world.deleted_chunk_ids)
    assert len(missing) == 6
    owners = [g["gold_id"] for g in gold if missing & set(g["gold_chunk_ids"])]
    assert len(owners) == 6  # one missing chunk each in six goldens with evidence
    # Search the raw text, so that even records the readers reject are covered.
    for path in world.logs_dir.rglob("requests.jsonl"):
        text = path.read_text()
        assert not [cid for cid in missing if f'"{cid}"' in text], path
    logged = con.sql("""
        SELECT count(*) FROM logs, unnest(coalesce(retrieved, flatten(retrieval_steps))) AS c(x)
        WHERE x.chunk_id IN (SELECT unnest(?))
    """, params=[sorted(missing)]).fetchall()[0][0]
    assert logged == 0


def test_every_logged_chunk_is_in_its_versions_manifest(world, con):
    unknown = con.sql("""
        SELECT DISTINCT index_version, chunk_id FROM (
            SELECT index_version, unnest(all_candidates).chunk_id AS chunk_id FROM requests)
        EXCEPT SELECT index_version, chunk_id FROM manifests
    """).fetchall()
    assert unknown == []
    # The gold chunks that requests of a version need are in that version's manifest, except
    # the deleted ones.
    gold_gaps = con.sql("""
        SELECT DISTINCT index_version, needed FROM (
            SELECT r.index_version, unnest(g.gold_chunk_ids) AS needed
            FROM requests r JOIN matched m USING (request_id)
            JOIN gold g ON g.gold_id = m.matched_gold_id)
        EXCEPT SELECT index_version, chunk_id FROM manifests
    """).fetchall()
    assert {version for version, _ in gold_gaps} == {"idx-v1", "idx-v2"}
    assert {cid for _, cid in gold_gaps} == set(world.deleted_chunk_ids)


def test_manifests_hash_their_texts_and_stay_small(world, con):
    rows = con.sql("SELECT index_version, chunk_id, content_hash, text FROM manifests").fetchall()
    assert all(h == hashlib.sha1(t.encode()).hexdigest() for _, _, h, t in rows)
    assert len({(v, c) for v, c, _, _ in rows}) == len(rows)
    # Same chunk, same text across the rebuild, so gold IDs carry over by content hash.
    assert con.sql("""
        SELECT count(*) FROM manifests a JOIN manifests b USING (chunk_id)
        WHERE a.index_version = 'idx-v1' AND b.index_version = 'idx-v2'
          AND a.content_hash != b.content_hash
    """).fetchall()[0][0] == 0
    assert sum(p.stat().st_size for p in world.index_manifests.values()) < 40e6


def test_gold_set_has_300_goldens_and_ten_without_evidence(world):
    gold = _read_gold(world)
    assert [g["gold_id"] for g in gold] == [f"g-{i:03d}" for i in range(1, 301)]
    assert all(list(g) == ["gold_id", "question", "reference", "gold_chunk_ids",
                           "gold_passages", "claims"] for g in gold)
    assert len({_normalize(g["question"]) for g in gold}) == 300
    empty = [g for g in gold if not g["gold_chunk_ids"]]
    assert len(empty) == 10
    assert all(g["gold_passages"] == [] and g["reference"] is None and g["claims"] == []
               for g in empty)
    with_evidence = [g for g in gold if g["gold_chunk_ids"]]
    for g in with_evidence:
        assert 1 <= len(g["gold_chunk_ids"]) <= 4
        assert all(re.fullmatch(r"c-\d{6}", cid) for cid in g["gold_chunk_ids"])
        assert len(g["gold_passages"]) == len(g["gold_chunk_ids"])
        # One reference sentence per passage; the first states the passage's value.
        assert g["reference"].count(". ") + 1 == len(g["gold_passages"])
        # The claims are the reference's sentences, so the claims route splits nothing.
        assert g["claims"] and " ".join(g["claims"]) == g["reference"]
        assert len(g["claims"]) == len(g["gold_passages"])
        value = g["gold_passages"][0].rsplit(" is ", 1)[1].rstrip(".")
        assert value in g["reference"]
    all_chunks = [cid for g in gold for cid in g["gold_chunk_ids"]]
    assert len(all_chunks) == len(set(all_chunks))


def test_gold_passages_reword_their_chunks_within_the_passages_threshold(world, con):
    """Each gold passage is its chunk's text reworded: not equal to it, similar above the
    passages route's threshold (0.5), and not above it to the golden's other chunks."""
    from rapidfuzz.distance import Levenshtein

    texts = dict(con.sql("SELECT DISTINCT chunk_id, text FROM manifests").fetchall())
    own, others = [], []
    for g in _read_gold(world):
        for chunk_id, passage in zip(g["gold_chunk_ids"], g["gold_passages"], strict=True):
            if chunk_id in world.deleted_chunk_ids:
                continue
            assert passage != texts[chunk_id]
            own.append(Levenshtein.normalized_similarity(passage, texts[chunk_id]))
            others += [Levenshtein.normalized_similarity(passage, texts[other])
                       for other in g["gold_chunk_ids"]
                       if other != chunk_id and other not in world.deleted_chunk_ids]
    assert len(own) > 500
    assert min(own) > 0.7 and max(own) < 0.99
    assert max(others) <= 0.5


def test_requests_without_gold_id_join_by_normalized_question(con):
    rows = con.sql("""
        SELECT r.gold_id IS NOT NULL, m.matched_gold_id IS NOT NULL, r.query, r.is_json
        FROM requests r JOIN matched m USING (request_id)
    """).fetchall()
    n = len(rows)
    with_id = [row for row in rows if row[0]]
    without_id = [row for row in rows if not row[0]]
    assert 0.67 <= len(with_id) / n <= 0.73
    novel = [row for row in without_id if not row[1]]
    assert 0.015 <= len(novel) / n <= 0.025
    matched_queries = [query for _, found, query, _ in without_id if found]
    # The join needs every normalization step: case, whitespace and NFKC.
    assert sum(q != _normalize(q) and q.lower() != q for q in matched_queries) > 1_000
    assert sum("  " in q for q in matched_queries) > 1_000
    assert sum(any(ord(ch) > 127 for ch in q) for q in matched_queries) > 1_000
    assert all(unicodedata.normalize("NFKC", q).isascii() for q in matched_queries)


def test_json_lines_omit_gold_id_key_when_unknown(world):
    records = []
    for line in (world.logs_dir / f"dt={world.start}" / "requests.jsonl").read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    assert all(record.get("gold_id", "absent") is not None for record in records)
    assert 0.25 <= sum("gold_id" not in record for record in records) / len(records) <= 0.35


def test_sessions_tenants_and_agentic_requests_have_realistic_shares(world, con):
    n, in_session, acme, agentic, agentic_in_parquet = con.sql("""
        SELECT count(*), count(session_id), count(*) FILTER (tags.tenant = 'acme'),
               count(*) FILTER (retrieval_steps IS NOT NULL),
               count(*) FILTER (retrieval_steps IS NOT NULL AND NOT is_json)
        FROM requests
    """).fetchall()[0]
    assert 0.25 <= in_session / n <= 0.35
    assert 0.55 <= acme / n <= 0.65
    assert 0.004 <= agentic / n <= 0.008  # ~1% of the JSON Lines half
    assert agentic_in_parquet == 0
    assert con.sql("""
        SELECT count(*) FROM requests WHERE retrieval_steps IS NOT NULL
          AND (retrieved IS NOT NULL OR len(retrieval_steps) != 2)
    """).fetchall()[0][0] == 0
    assert con.sql("SELECT count(*) FROM requests WHERE session_id IS NULL AND turn != 1"
                   ).fetchall()[0][0] == 0
    assert con.sql("SELECT count(DISTINCT tags.retriever) FROM requests").fetchall() == [(1,)]
    # A session is 2-4 consecutive requests with turns 1..n, one tenant, turns in time order.
    bad_sessions = con.sql("""
        WITH s AS (
            SELECT session_id, list(turn ORDER BY request_id) AS turns,
                   list(timestamp ORDER BY request_id) AS times,
                   list(request_id ORDER BY request_id) AS ids,
                   count(DISTINCT tags.tenant) AS tenants
            FROM requests WHERE session_id IS NOT NULL GROUP BY session_id
        )
        SELECT session_id FROM s
        WHERE len(turns) NOT BETWEEN 2 AND 4 OR turns != range(1, len(turns) + 1)
           OR times != list_sort(times) OR tenants != 1
           OR CAST(split_part(ids[-1], '-', 3) AS INTEGER)
              - CAST(split_part(ids[1], '-', 3) AS INTEGER) != len(ids) - 1
    """).fetchall()
    assert bad_sessions == []
    outside_day = con.sql("""
        SELECT count(*) FROM requests
        WHERE CAST(strptime(timestamp, '%Y-%m-%dT%H:%M:%SZ') AS DATE) != dt
    """).fetchall()[0][0]
    assert outside_day == 0


def test_five_bad_records_sit_in_json_lines_days(world):
    reasons = []
    for path in sorted(world.logs_dir.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                reasons.append("invalid json")
                continue
            if "timestamp" not in record:
                reasons.append("missing timestamp")
            elif not re.fullmatch(ISO_SECONDS_Z[1:-1], record["timestamp"]):
                reasons.append(f"timestamp {record['timestamp']}")
            elif isinstance(record["retrieved"], str):
                reasons.append("retrieved is a string")
            elif any(c["chunk_id"] is None for c in record["retrieved"] or []):
                reasons.append("null chunk_id")
    assert sorted(reasons) == sorted([
        "invalid json", "missing timestamp", "timestamp yesterday-ish",
        "retrieved is a string", "null chunk_id",
    ])


def test_short_world_stops_before_rebuild_and_keeps_its_bad_records(tmp_path):
    world = generate_demo_world(tmp_path, days=3, requests_per_day=40,
                                start=date(2027, 2, 27))
    assert list(world.index_manifests) == ["idx-v1"]
    assert world.end == date(2027, 3, 2)
    assert world.n_requests == 3 * 40 + 5
    n_lines = sum(len(p.read_text().splitlines()) for p in world.logs_dir.rglob("*.jsonl"))
    con = _connect(world)
    (n_parquet,) = con.sql("SELECT count(*) FROM logs WHERE NOT is_json").fetchall()[0]
    assert n_lines + n_parquet == world.n_requests
