"""Auditing the LLM judge of the `claims` route against people. `sample_claims` draws a
stratified, seeded sample of the judge's claim verdicts (judge_verdicts, status ok, not yet
labelled) and `write_sample` writes it to a CSV or JSONL file with an empty `human` column for
people to label; `import_labels` reads the labelled file back into `audit_labels`, replacing
earlier labels of the same claims; `agreement` gives, per judge model, the 2x2 table of judge
and human labels and every statistic of `pipeline.agreement.summary`; `audit_status` says
whether a model counts as audited: the lower bound of the 95 % interval of Cohen's kappa (not
the estimate, so that a small sample cannot pass on luck) at or above a bar (default 0.6) on at
least a number of labels (default 50), both settable through the environment."""

from __future__ import annotations

import csv
import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from pipeline.agreement import AgreementSummary, Table2x2, stratified_table, summary
from pipeline.atomic import written_whole
from pipeline.errors import RecallwatchError
from pipeline.warehouse import half_character, run_script, transaction

CLAIMS_ROUTE = "claims"
# Every stratum with claims gets at least this many in a sample (all it has, when fewer), so
# that the rare one (often "not attributed") is never left out by proportional rounding.
MIN_PER_STRATUM = 5
DEFAULT_MIN_KAPPA = 0.6
DEFAULT_MIN_LABELS = 50
SAMPLE_COLUMNS = ("verdict_key", "claim_no", "model", "lang", "claim", "contexts",
                  "attributed", "reason", "human")
LABEL_COLUMNS = ("verdict_key", "claim_no", "human")
FORMATS = (".csv", ".jsonl")


# ------------------------------------------------------------------------------------ sample

@dataclass(frozen=True)
class Stratum:
    """One stratum of the sample frame: the judge's label, model and language."""

    attributed: bool
    model: str
    lang: str

    @property
    def text(self) -> str:
        return f"attributed={int(self.attributed)} model={self.model} lang={self.lang}"


@dataclass(frozen=True)
class AuditSample:
    """The rows drawn (SAMPLE_COLUMNS, ordered by stratum then claim) and, per stratum, how
    many claims it had and how many were drawn."""

    rows: list[dict]
    available: dict[Stratum, int]
    drawn: dict[Stratum, int]


def allocate(sizes: Mapping, n: int, minimum: int = MIN_PER_STRATUM) -> dict:
    """How many of `n` draws each stratum gets: first min(size, minimum) each (when n is too
    small for that, one each in turn by stratum order until n is spent), then one at a time to
    the stratum furthest below its proportional share n * size / total (ties: stratum order),
    never more than its size. With n >= total every claim is drawn."""
    keys = sorted(sizes, key=_order)
    total = sum(sizes.values())
    n = min(n, total)
    floor = {k: min(sizes[k], minimum) for k in keys}
    if sum(floor.values()) >= n:
        given = dict.fromkeys(keys, 0)
        while n > 0:
            for k in keys:
                if n > 0 and given[k] < floor[k]:
                    given[k] += 1
                    n -= 1
        return given
    given = floor
    for _ in range(n - sum(given.values())):
        open_keys = [k for k in keys if given[k] < sizes[k]]
        best = max(open_keys, key=lambda k: (n * sizes[k] / total - given[k], -keys.index(k)))
        given[best] += 1
    return given


def _order(key) -> tuple:
    # attributed=0 first: "not attributed" is the class the audit cares most about.
    return (key.attributed, key.model, key.lang) if isinstance(key, Stratum) else (key,)


def sample_claims(con, n: int, seed: int = 0) -> AuditSample:
    """A stratified random sample of n not-yet-labelled claim verdicts (all of them when fewer),
    allocated by `allocate`; within a stratum a seeded random.Random draws from the claims in
    (verdict_key, claim_no) order, so the same warehouse and seed give the same sample."""
    if n < 1:
        raise RecallwatchError("the audit sample size --n must be at least 1.")
    frame: dict[Stratum, list[dict]] = {}
    for row in run_script(con, "audit_claims"):
        record = dict(zip(("verdict_key", "claim_no", "model", "lang", "claim", "contexts",
                           "attributed", "reason"), row, strict=True))
        frame.setdefault(Stratum(record["attributed"], record["model"], record["lang"]),
                         []).append(record)
    if not frame:
        raise RecallwatchError(
            "the warehouse has no unlabelled claim verdicts of the judge to sample: score the "
            "claims route first (`recallwatch score` with the claims route in force).")
    sizes = {stratum: len(claims) for stratum, claims in frame.items()}
    drawn = allocate(sizes, n)
    rng = random.Random(seed)
    rows = []
    for stratum in sorted(frame, key=_order):
        picked = rng.sample(range(sizes[stratum]), drawn[stratum])
        for i in sorted(picked):
            record = frame[stratum][i]
            rows.append({**record, "attributed": int(record["attributed"]), "human": ""})
    return AuditSample(rows, sizes, drawn)


def write_sample(sample: AuditSample, path: str | os.PathLike) -> None:
    """Write the sample for labelling: CSV (contexts as a JSON list in one cell) or JSONL, by
    the file's suffix; `human` is left empty for 1 (attributed) or 0 (not attributed)."""
    path = Path(path)
    suffix = _format(path)
    try:
        # a kill mid-write leaves the old file, not part of a sample under its name
        with written_whole(path) as written, open(written, "w", encoding="utf-8",
                                                  newline="") as fh:
            if suffix == ".csv":
                writer = csv.DictWriter(fh, fieldnames=SAMPLE_COLUMNS)
                writer.writeheader()
                for row in sample.rows:
                    writer.writerow({**row, "contexts": json.dumps(row["contexts"],
                                                                   ensure_ascii=False)})
            else:
                for row in sample.rows:
                    fh.write(json.dumps({c: row[c] for c in SAMPLE_COLUMNS},
                                        ensure_ascii=False) + "\n")
    except OSError as exc:
        raise RecallwatchError(
            f"cannot write the audit sample to {path} ({exc.strerror or exc}); choose another "
            "file.") from None


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise RecallwatchError(
            f"{path}: an audit file must end in .csv or .jsonl, not {suffix or 'no suffix'!r}.")
    return suffix


# ------------------------------------------------------------------------------------ labels

@dataclass(frozen=True)
class Label:
    line: int
    verdict_key: str
    claim_no: int
    human: bool


@dataclass(frozen=True)
class LabelImport:
    """What one import did: labels stored (each replacing any earlier one of its claim) and
    rows skipped because `human` was blank."""

    source: str
    stored: int
    blank: int


def read_labels(path: str | os.PathLike) -> tuple[list[Label], int]:
    """The labelled rows of an audit file (CSV or JSONL) and the number of rows whose `human`
    is blank. Raises RecallwatchError, in one sentence naming the file and line, for a missing
    column, a `human` other than 0 or 1, a claim_no that is not a whole number, or a claim
    labelled twice."""
    path = Path(path)
    suffix = _format(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            records = list(_csv_records(path, fh) if suffix == ".csv"
                           else _jsonl_records(path, fh))
    except FileNotFoundError:
        raise RecallwatchError(f"labels file {path} does not exist.") from None
    except UnicodeDecodeError:
        raise RecallwatchError(f"labels file {path} is not UTF-8 text; save it as UTF-8.") \
            from None
    labels, blank, seen = [], 0, {}
    for line, record in records:
        missing = [c for c in LABEL_COLUMNS if c not in record]
        if missing:
            raise RecallwatchError(
                f"labels file {path} line {line} has no column {', '.join(missing)}: keep the "
                f"columns {', '.join(LABEL_COLUMNS)} of the sample as written.")
        human = _human(path, line, record["human"])
        if human is None:
            blank += 1
            continue
        claim_no = _claim_no(path, line, record["claim_no"])
        key = (str(record["verdict_key"]).strip(), claim_no)
        if key in seen:
            raise RecallwatchError(
                f"labels file {path} labels claim {claim_no} of verdict {key[0][:12]}… twice "
                f"(lines {seen[key]} and {line}): keep one row per claim.")
        seen[key] = line
        labels.append(Label(line, key[0], claim_no, human))
    return labels, blank


def _csv_records(path: Path, fh):
    reader = csv.DictReader(fh)
    if reader.fieldnames is None:
        raise RecallwatchError(f"labels file {path} is empty: label the file `recallwatch "
                               "audit sample` wrote.")
    missing = [c for c in LABEL_COLUMNS if c not in reader.fieldnames]
    if missing:
        raise RecallwatchError(
            f"labels file {path} has no column {', '.join(missing)}: keep the columns "
            f"{', '.join(LABEL_COLUMNS)} of the sample as written.")
    for record in reader:
        yield reader.line_num, record


def _jsonl_records(path: Path, fh):
    for line, text in enumerate(fh, 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except (json.JSONDecodeError, RecursionError):   # RecursionError: nested past reading
            record = None
        if not isinstance(record, dict):
            raise RecallwatchError(
                f"labels file {path} line {line} is not a JSON object: keep one sample row "
                "per line as written.")
        half = half_character(json.dumps(record, ensure_ascii=False))
        if half is not None:
            raise RecallwatchError(
                f"labels file {path} line {line} holds an unpaired surrogate "
                f"({ascii(half)[1:-1]}, half of a character cut in two), which is no text: "
                "fix the row.")
        yield line, record


def _human(path: Path, line: int, value) -> bool | None:
    text = "" if value is None else str(value).strip()
    if text == "":
        return None
    if text not in ("0", "1") or isinstance(value, (bool, float)):
        raise RecallwatchError(
            f"labels file {path} line {line}: human is {str(value)[:20]!r}, not 1 (attributed) "
            "or 0 (not attributed); leave it blank to skip the row.")
    return text == "1"


def _claim_no(path: Path, line: int, value) -> int:
    try:
        if isinstance(value, (bool, float)):
            raise ValueError
        return int(str(value).strip())
    except ValueError:
        raise RecallwatchError(
            f"labels file {path} line {line}: claim_no {str(value)[:20]!r} is not a whole "
            "number; keep it as the sample wrote it.") from None


def import_labels(con, path: str | os.PathLike, now: datetime) -> LabelImport:
    """Store the labels of a labelled audit file in audit_labels (labelled_at = now), replacing
    earlier labels of the same claims, all in one transaction; refuse the whole file (one
    sentence) when a label names no claim of a stored ok verdict."""
    labels, blank = read_labels(path)
    source = str(path)
    if labels:
        given = {"verdict_keys": [lb.verdict_key for lb in labels],
                 "claim_nos": [lb.claim_no for lb in labels]}
        unknown = run_script(con, "audit_unknown_labels",
                             {**given, "lines": [lb.line for lb in labels]})
        if unknown:
            line, key, claim_no, known_key, claims = unknown[0]
            what = (f"claim_no {claim_no} is not one of the verdict's {claims} claims"
                    if known_key else f"verdict_key {key[:16]!r} is not a stored ok verdict")
            more = f" ({len(unknown) - 1} more rows like it)" if len(unknown) > 1 else ""
            raise RecallwatchError(
                f"labels file {path} line {line}: {what}{more}; label a sample written by "
                "`recallwatch audit sample` from this warehouse.")
        with transaction(con):
            run_script(con, "record_audit_labels",
                       {**given, "humans": [lb.human for lb in labels], "source": source,
                        "labelled_at": now})
    return LabelImport(source, len(labels), blank)


# --------------------------------------------------------------------------------- agreement

@dataclass(frozen=True)
class ModelAgreement:
    """The audit of one judge model: the 2x2 table of its labels as drawn, the statistics of
    pipeline.agreement.summary of its judge on all its claims (the labels weighed by the claims
    of their stratum, pipeline.agreement.stratified_table), the judge's claims in the labelled
    strata, the effective number of labels behind the figures, and the newest import."""

    model: str
    table: Table2x2
    stats: AgreementSummary
    labelled_at: datetime
    claims: int = 0
    effective_n: float = 0.0

    @property
    def labels(self) -> int:
        return int(sum(self.table))

    @property
    def weighted(self) -> bool:
        """Whether the strata were drawn at different rates (the figures then differ from
        those of the labels counted as drawn)."""
        return abs(self.effective_n - self.labels) > 1e-9 * max(self.labels, 1)


def agreement(con, alpha: float = 0.05) -> list[ModelAgreement]:
    """Per judge model with labels, every statistic of pipeline.agreement.summary over its
    labels in audit_labels (each claim's latest label). The audit sample draws its strata (the
    judge's label and language) unevenly, a small one beyond its share, so each label counts
    for the judge's claims of its stratum (pipeline.agreement.stratified_table): the figures
    describe the judge on all the claims it judged, and their intervals the labels' information."""
    strata: dict[str, list[tuple]] = {}
    for model, _lang, judge, yes, no, claims, labelled_at in run_script(con, "audit_agreement"):
        strata.setdefault(model, []).append((judge, yes, no, claims, labelled_at))
    found = []
    for model, rows in strata.items():
        judge, yes, no, claims, at = (list(column) for column in zip(*rows, strict=True))
        table = Table2x2(
            a=sum(y for j, y in zip(judge, yes, strict=True) if j),
            b=sum(n for j, n in zip(judge, no, strict=True) if j),
            c=sum(y for j, y in zip(judge, yes, strict=True) if not j),
            d=sum(n for j, n in zip(judge, no, strict=True) if not j))
        weighted, n_eff = stratified_table(judge, yes, no, claims)
        found.append(ModelAgreement(model, table, summary(*weighted, alpha), max(at),
                                    int(sum(claims)), n_eff))
    return found


@dataclass(frozen=True)
class AuditBar:
    """When the claims route counts as audited: the lower bound of kappa's 95 % interval at
    least min_kappa, on at least min_labels labels."""

    min_kappa: float = DEFAULT_MIN_KAPPA
    min_labels: int = DEFAULT_MIN_LABELS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AuditBar:
        """RECALLWATCH_AUDIT_MIN_KAPPA and RECALLWATCH_AUDIT_MIN_LABELS, else the defaults."""
        env = os.environ if environ is None else environ
        try:
            min_kappa = float(env.get("RECALLWATCH_AUDIT_MIN_KAPPA", DEFAULT_MIN_KAPPA))
            min_labels = int(env.get("RECALLWATCH_AUDIT_MIN_LABELS", DEFAULT_MIN_LABELS))
        except ValueError:
            min_kappa, min_labels = -2.0, 0
        if not -1.0 <= min_kappa <= 1.0 or min_labels < 1:
            raise RecallwatchError(
                "RECALLWATCH_AUDIT_MIN_KAPPA must be a number in [-1, 1] and "
                "RECALLWATCH_AUDIT_MIN_LABELS a whole number of at least 1.")
        return cls(min_kappa, min_labels)


def audit_status(found: ModelAgreement | None, bar: AuditBar) -> tuple[bool, str]:
    """(audited, why) of one judge model under the bar; `why` is one sentence."""
    if found is None:
        return False, "no human labels yet"
    n, kappa = found.labels, found.stats.kappa
    if n < bar.min_labels:
        return False, f"{n} labels, fewer than the {bar.min_labels} needed"
    low = float(kappa.low)
    if np.isnan(low):
        return False, f"kappa is undefined ({kappa.reason})"
    if low < bar.min_kappa:
        return False, (f"the lower bound of kappa's 95 % interval, {low:.3f}, is below "
                       f"{bar.min_kappa:g}")
    return True, (f"the lower bound of kappa's 95 % interval, {low:.3f}, reaches "
                  f"{bar.min_kappa:g} on {n} labels")


def describe(found: ModelAgreement) -> list[str]:
    """The figures of one model's audit as lines for people."""
    s = found.stats

    def est(e) -> str:
        return f"{_f3(e.estimate)} [{_f3(e.low)}, {_f3(e.high)}]"

    return [
        f"model {found.model}: n={found.labels} labelled claims (a={found.table.a} "
        f"b={found.table.b} c={found.table.c} d={found.table.d}; judge in rows, 1 = attributed)",
        *([f"  figures of the judge on its {found.claims} claims: each label weighed by the "
           f"claims of its stratum, drawn at different rates (effective n "
           f"{found.effective_n:.1f})"] if found.weighted else []),
        f"  raw agreement  {est(s.raw_agreement)}",
        f"  Cohen's kappa  {est(s.kappa)}" + (f" ({s.kappa.reason})" if s.kappa.reason else ""),
        f"  Gwet's AC1     {est(s.ac1)}",
        f"  PABAK          {est(s.pabak)}",
        f"  sensitivity (not attributed)  {est(s.sensitivity_not_attributed)}",
        f"  specificity (not attributed)  {est(s.specificity_not_attributed)}",
    ]


def _f3(x) -> str:
    value = float(x)
    return "—" if np.isnan(value) else f"{value:.3f}"


def strata_lines(sample: AuditSample) -> Sequence[str]:
    """One line per stratum: drawn of available."""
    return [f"  {s.text}: {sample.drawn[s]} of {sample.available[s]}"
            for s in sorted(sample.available, key=_order)]
