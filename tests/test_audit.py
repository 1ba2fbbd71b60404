"""The audit of the LLM judge (pipeline/audit.py) on verdicts written straight into
judge_verdicts: the stratified, seeded sample; labels read back, stored and replaced; the
agreement figures equal pipeline.agreement.summary of the labelled table; bad files end in one
sentence; the report says "unaudited" below the bar and shows the figures above it; and the
judge stores the contexts it judged."""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from conftest import insert_rows

from pipeline.agreement import Table2x2, confusion, stratified_table, summary
from pipeline.audit import (
    MIN_PER_STRATUM,
    AuditBar,
    ModelAgreement,
    agreement,
    allocate,
    audit_status,
    describe,
    import_labels,
    read_labels,
    sample_claims,
    write_sample,
)
from pipeline.errors import RecallwatchError
from pipeline.judge import JudgeConfig, judge_many
from pipeline.report import write_report
from pipeline.warehouse import connect

NOW = datetime(2026, 11, 20, 9, 0)


def verdict(key: str, attributed: list[bool], *, model: str = "judge-a", lang: str = "en",
            status: str = "ok") -> dict:
    n = len(attributed)
    return {
        "verdict_key": key, "model": model, "prompt_version": "v1", "lang": lang,
        "claims": [f"{key} claim {i}" for i in range(1, n + 1)],
        "attributed": attributed if status == "ok" else None,
        "reasons": [f"{key} reason {i}" for i in range(1, n + 1)] if status == "ok" else None,
        "tokens": 10, "calls": 1, "status": status, "error": None, "created_at": NOW,
        "contexts": [f"{key} context 1", f"{key} context 2"],
    }


def fill(con) -> None:
    """40 attributed and 8 not attributed claims in English, 6 attributed in German, and a
    failed verdict that is never sampled."""
    rows = [verdict(f"en-{i:02d}", [True, True, i % 2 == 0]) for i in range(16)]
    rows += [verdict(f"de-{i}", [True, True], lang="de") for i in range(3)]
    rows += [verdict("failed", [True], status="failed")]
    insert_rows(con, "judge_verdicts", rows)


def strata_of(rows: list[dict]) -> dict[tuple, int]:
    found: dict[tuple, int] = {}
    for row in rows:
        key = (row["attributed"], row["model"], row["lang"])
        found[key] = found.get(key, 0) + 1
    return found


def labelled(path: Path, rows: list[dict], human) -> Path:
    """Write rows as a labelled CSV, human[i] (or human(row)) in the human column."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for i, row in enumerate(rows):
            value = human(row) if callable(human) else human[i]
            writer.writerow({**row, "contexts": json.dumps(row["contexts"]), "human": value})
    return path


def test_allocation_gives_every_stratum_a_floor_then_proportional_shares():
    assert allocate({"a": 100, "b": 10}, 20) == {"a": 15, "b": 5}
    assert allocate({"a": 100, "b": 2}, 20) == {"a": 18, "b": 2}
    assert allocate({"a": 90, "b": 10}, 50) == {"a": 45, "b": 5}
    assert allocate({"a": 3, "b": 3, "c": 3}, 4) == {"a": 2, "b": 1, "c": 1}
    assert allocate({"a": 3, "b": 4}, 100) == {"a": 3, "b": 4}


def test_sample_is_stratified_and_deterministic(con):
    fill(con)
    first = sample_claims(con, 20, seed=3)
    assert sample_claims(con, 20, seed=3).rows == first.rows
    assert sample_claims(con, 20, seed=4).rows != first.rows
    assert len(first.rows) == 20
    counts = strata_of(first.rows)
    # 40, 8 and 6 claims: 5 each, then the 5 left to the stratum furthest below its share.
    assert counts == {(1, "judge-a", "en"): 10, (0, "judge-a", "en"): MIN_PER_STRATUM,
                      (1, "judge-a", "de"): MIN_PER_STRATUM}
    assert sum(first.available.values()) == 16 * 3 + 6
    row = first.rows[0]
    assert row["human"] == "" and row["attributed"] == 0
    assert row["claim"] == f"{row['verdict_key']} claim {row['claim_no']}"
    assert row["contexts"] == [f"{row['verdict_key']} context 1",
                               f"{row['verdict_key']} context 2"]
    assert row["reason"] == f"{row['verdict_key']} reason {row['claim_no']}"
    assert all(r["verdict_key"] != "failed" for r in first.rows)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_written_sample_reads_back_once_labelled(con, tmp_path, suffix):
    fill(con)
    sample = sample_claims(con, 10, seed=1)
    path = tmp_path / f"sample{suffix}"
    write_sample(sample, path)
    if suffix == ".csv":
        with open(path, encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert json.loads(rows[0]["contexts"]) == sample.rows[0]["contexts"]
        labelled(path, [{**r, "contexts": json.loads(r["contexts"])} for r in rows],
                 lambda r: r["attributed"])
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert rows[0]["contexts"] == sample.rows[0]["contexts"]
        path.write_text("".join(json.dumps({**r, "human": r["attributed"]}) + "\n"
                                for r in rows))
    labels, blank = read_labels(path)
    assert blank == 0
    assert [(lb.verdict_key, lb.claim_no, lb.human) for lb in labels] == [
        (r["verdict_key"], r["claim_no"], bool(r["attributed"])) for r in sample.rows]


def test_score_is_exactly_the_agreement_summary_of_the_stratum_weighted_table(con, tmp_path):
    fill(con)
    sample = sample_claims(con, 30, seed=2)
    rows = sample.rows
    rng = np.random.default_rng(5)
    human = [int(rng.random() < 0.8) if r["attributed"] else int(rng.random() < 0.3)
             for r in rows]
    human[0] = ""
    done = import_labels(con, labelled(tmp_path / "l.csv", rows, human), NOW)
    assert (done.stored, done.blank) == (29, 1)
    (found,) = agreement(con)
    table = confusion([r["attributed"] for r in rows[1:]], human[1:])
    assert found.table == table and found.labels == 29
    # each stratum's labels weighed by the claims the sample drew them from
    strata = sorted(sample.available, key=lambda s: (s.attributed, s.lang))
    labels = [[h for r, h in zip(rows[1:], human[1:], strict=True)
               if (r["attributed"], r["lang"]) == (s.attributed, s.lang)] for s in strata]
    weighted, n_eff = stratified_table([s.attributed for s in strata],
                                       [sum(ls) for ls in labels],
                                       [len(ls) - sum(ls) for ls in labels],
                                       [sample.available[s] for s in strata])
    assert found.claims == 54 and found.effective_n == pytest.approx(n_eff) and found.weighted
    expected = summary(*weighted)
    for name in ("raw_agreement", "kappa", "ac1", "pabak", "sensitivity_not_attributed",
                 "specificity_not_attributed"):
        np.testing.assert_allclose(np.array(getattr(found.stats, name)[:3], dtype=float),
                                   np.array(getattr(expected, name)[:3], dtype=float))
    judge = con.sql("SELECT count(*) FROM audit_labels l JOIN judge_verdicts v USING "
                    "(verdict_key) WHERE l.judge = v.attributed[l.claim_no]").fetchall()[0][0]
    assert judge == 29


def test_labels_are_replaced_on_reimport_and_not_sampled_again(con, tmp_path):
    fill(con)
    rows = sample_claims(con, 12, seed=0).rows
    import_labels(con, labelled(tmp_path / "a.csv", rows, [1] * 12), NOW)
    import_labels(con, labelled(tmp_path / "b.csv", rows[:4], [0] * 4), NOW)
    found = con.sql("SELECT human, count(*), min(source) FROM audit_labels GROUP BY human "
                    "ORDER BY human").fetchall()
    assert found == [(False, 4, str(tmp_path / "b.csv")), (True, 8, str(tmp_path / "a.csv"))]
    again = {(r["verdict_key"], r["claim_no"]) for r in sample_claims(con, 100).rows}
    assert not again & {(r["verdict_key"], r["claim_no"]) for r in rows}


def test_a_labels_line_holding_half_a_character_is_one_sentence(tmp_path):
    # "\ud83d" alone in a JSON line reached DuckDB, which refused it: internal error, exit 1
    path = tmp_path / "labels.jsonl"
    path.write_text('{"verdict_key": "k\\ud83d", "claim_no": 1, "claim": "c", "contexts": [], '
                    '"judge": 1, "human": 1}\n', encoding="utf-8")
    with pytest.raises(RecallwatchError, match=r"line 1 holds an unpaired surrogate \(\\ud83d"):
        read_labels(path)
    path.write_text("[" * 200_000 + "\n", encoding="utf-8")
    with pytest.raises(RecallwatchError, match="line 1 is not a JSON object"):
        read_labels(path)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda rows, text: text.replace("human", "person", 1), "has no column human"),
    (lambda rows, text: text.replace(",1\n", ",yes\n", 1), "not 1 (attributed) or 0"),
    (lambda rows, text: text.replace(rows[0]["verdict_key"], "nope", 1),
     "is not a stored ok verdict"),
    (lambda rows, text: text.replace(f"{rows[0]['verdict_key']},{rows[0]['claim_no']},",
                                     f"{rows[0]['verdict_key']},9,", 1),
     "claim_no 9 is not one of the verdict's"),
    (lambda rows, text: text + text.splitlines(keepends=True)[1], "twice"),
])
def test_a_bad_labels_file_is_one_sentence_and_stores_nothing(tmp_path, edit, message, run_cli,
                                                               warehouse):
    with connect(warehouse) as wh:
        fill(wh)
        rows = sample_claims(wh, 6, seed=0).rows
    path = labelled(tmp_path / "l.csv", rows, [1] * 6)
    path.write_text(edit(rows, path.read_text()), newline="")
    code, out, err = run_cli("audit", "score", path)
    assert code == 2, err
    assert message in err and err.count("\n") == 1 and err.rstrip().endswith(".")
    with connect(warehouse) as wh:
        assert wh.sql("SELECT count(*) FROM audit_labels").fetchall()[0][0] == 0


def test_an_unknown_suffix_is_one_sentence(tmp_path):
    with pytest.raises(RecallwatchError, match=r"must end in \.csv or \.jsonl"):
        read_labels(tmp_path / "labels.xlsx")


def test_cli_samples_and_scores(run_cli, warehouse, tmp_path):
    with connect(warehouse) as wh:
        fill(wh)
    code, out, err = run_cli("audit", "sample", "--n", "10", "--seed", "1", tmp_path / "s.csv")
    assert code == 0, err
    # 10 is too few for 5 of each of 3 strata: one each in turn, "not attributed" first.
    assert "10 claims written" in out and "attributed=0 model=judge-a lang=en: 4 of 8" in out
    with open(tmp_path / "s.csv", encoding="utf-8") as fh:
        rows = [{**r, "contexts": json.loads(r["contexts"])} for r in csv.DictReader(fh)]
    labelled(tmp_path / "s.csv", rows, lambda r: r["attributed"])
    code, out, err = run_cli("audit", "score", tmp_path / "s.csv")
    assert code == 0, err
    assert "10 labels stored, 0 blank rows skipped" in out
    # ten labels that all agree do not make kappa certain: its interval is not the point 1
    assert re.search(r"Cohen's kappa  1\.000 \[-?0\.\d{3}, 1\.000\]", out), out
    assert "unaudited: 10 labels" in out
    code, _, err = run_cli("audit", "sample", tmp_path / "t.csv")
    assert code == 2 and "needs --n" in err


def labels_for_report(con, *, n_agree: int, n_disagree: int, model: str) -> None:
    """n_agree + n_disagree labelled claims of one model, half attributed by the judge."""
    rows, labels = [], []
    for i in range(n_agree + n_disagree):
        judge = i % 2 == 0
        rows.append(verdict(f"r-{model}-{i}", [judge], model=model))
        human = judge if i < n_agree else not judge
        labels.append({"verdict_key": f"r-{model}-{i}", "claim_no": 1, "model": model,
                       "lang": "en", "judge": judge, "human": human, "source": "x.csv",
                       "labelled_at": NOW})
    insert_rows(con, "judge_verdicts", rows)
    insert_rows(con, "audit_labels", labels)


def test_report_says_unaudited_below_the_bar_and_shows_figures_above(con, tmp_path):
    labels_for_report(con, n_agree=58, n_disagree=2, model="good<script>")
    labels_for_report(con, n_agree=20, n_disagree=10, model="weak")
    html = write_report(con, tmp_path / "r").read_text(encoding="utf-8")
    block = html[html.index('id="judge-audit"'):html.index('<section id="summary"')]
    assert "<strong>unaudited</strong>" in block
    assert "<script>" not in block and "good&lt;script&gt;" in block
    good, weak = block.split('<li class="audit-model">')[1:]
    assert "good&lt;script&gt;</code>: audited" in good and "60 labelled" in good
    expected = summary(29, 1, 1, 29)
    assert f"kappa {float(expected.kappa.estimate):.3f}" in good
    assert f"AC1 {float(expected.ac1.estimate):.3f}" in good
    assert "weak</code>: unaudited" in weak and "fewer than the 50 needed" in weak


def test_a_warehouse_without_verdicts_has_no_audit_note(con, tmp_path):
    html = write_report(con, tmp_path / "r").read_text(encoding="utf-8")
    assert 'id="judge-audit"' not in html


def test_the_bar_reads_the_kappa_lower_bound():
    bar = AuditBar.from_env({"RECALLWATCH_AUDIT_MIN_KAPPA": "0.5",
                             "RECALLWATCH_AUDIT_MIN_LABELS": "10"})
    assert bar == AuditBar(0.5, 10)
    with pytest.raises(RecallwatchError, match="RECALLWATCH_AUDIT_MIN_KAPPA"):
        AuditBar.from_env({"RECALLWATCH_AUDIT_MIN_KAPPA": "high"})
    # Kappa 0.6 with 20 labels: the estimate reaches the bar, its lower bound does not.
    found = ModelAgreement("m", Table2x2(8, 2, 2, 8), summary(8, 2, 2, 8), NOW)
    assert float(found.stats.kappa.estimate) >= 0.6
    assert audit_status(found, AuditBar(0.6, 10))[0] is False
    assert audit_status(None, bar) == (False, "no human labels yet")


def test_the_judge_stores_the_contexts_it_judged(con):
    config = JudgeConfig(model="m", api_key="k")
    # Neither item costs a call (no contexts; no claims), so no endpoint is needed.
    judge_many(con, config, [(["a claim"], []), ([], ["ctx 1", "ctx 2"])], now=NOW,
               client=object())
    found = sorted(con.sql("SELECT claims, contexts FROM judge_verdicts").fetchall())
    assert found == [([], ["ctx 1", "ctx 2"]), (["a claim"], [])]


def uneven_audit(con) -> None:
    """950 claims of one judge: it attributes 900, 60 of which a person would not (1 in 15),
    and not 50, 40 of which a person would not attribute either (4 in 5). Labelled as a sample
    of 50 is drawn (the floor of 5 for the small stratum, 45 for the large one), each stratum
    in its own proportions: 3 of 45 and 4 of 5 not attributed by the person."""
    insert_rows(con, "judge_verdicts",
                [verdict(f"yes-{i:03d}", [True]) for i in range(900)]
                + [verdict(f"no-{i:02d}", [False]) for i in range(50)])
    labels = [(f"yes-{i:03d}", True, i >= 3) for i in range(45)]
    labels += [(f"no-{i:02d}", False, i >= 4) for i in range(5)]
    insert_rows(con, "audit_labels", [
        {"verdict_key": key, "claim_no": 1, "model": "judge-a", "lang": "en", "judge": judge,
         "human": human, "source": "x.csv", "labelled_at": NOW}
        for key, judge, human in labels])


def test_an_unevenly_drawn_audit_estimates_the_judge_on_all_its_claims(con):
    # The floor of 5 draws the "not attributed" claims at 1 in 10 and the rest at 1 in 20:
    # counted as drawn, the judge would catch 4 of the 7 claims people reject (0.571), where
    # on all its claims it catches 40 of 100 (0.4). Each label stands for its stratum's claims.
    uneven_audit(con)
    (found,) = agreement(con)
    assert found.table == Table2x2(42, 3, 1, 4) and found.labels == 50
    population = summary(840, 60, 10, 40)
    for name in ("raw_agreement", "kappa", "ac1", "pabak", "sensitivity_not_attributed",
                 "specificity_not_attributed"):
        assert float(getattr(found.stats, name).estimate) == pytest.approx(
            float(getattr(population, name).estimate)), name
    assert float(found.stats.sensitivity_not_attributed.estimate) == pytest.approx(0.4)
    # the interval is that of the labels' information, not of 950 labelled claims
    kappa = found.stats.kappa
    assert kappa.high - kappa.low > 2 * (population.kappa.high - population.kappa.low)
    assert found.claims == 950 and found.effective_n < 50


def test_the_report_and_the_cli_give_the_weighted_figures_and_say_so(con, tmp_path):
    uneven_audit(con)
    html = write_report(con, tmp_path / "r").read_text(encoding="utf-8")
    block = html[html.index('id="judge-audit"'):html.index('<section id="summary"')]
    population = summary(840, 60, 10, 40)
    assert f"kappa {float(population.kappa.estimate):.3f}" in block
    assert "50 labelled" in block and "figures of the judge on its 950 claims" in block
    (found,) = agreement(con)
    lines = describe(found)
    assert "sensitivity (not attributed)  0.400" in "\n".join(lines)
    assert f"effective n {found.effective_n:.1f}" in lines[1]
