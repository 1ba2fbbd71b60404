"""The report's "Judge audit" note: whether the LLM judge of the claims route has been audited
against people (pipeline.audit), per judge model — the claims it judged, the latest audit
figures (Cohen's kappa with its interval, Gwet's AC1, PABAK, raw agreement, the judge's
sensitivity and specificity on "not attributed", n) and "unaudited" until the lower bound of
kappa's interval reaches the bar on enough labels. Shown for the claims route, and for any
other route once the warehouse holds judge verdicts or labels; its own query is
sql/report_audit.sql."""

from __future__ import annotations

import duckdb
import numpy as np

from pipeline.audit import CLAIMS_ROUTE, AuditBar, agreement, audit_status
from pipeline.report.reads import rows, tables
from pipeline.report.scope import Scope
from pipeline.warehouse import queries


def audit_section(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict | None:
    """The note's values, or None when there is nothing to say (no verdicts, no labels, and a
    route other than claims; or a warehouse from before audits)."""
    if not {"judge_verdicts", "audit_labels"} <= tables(con):
        return None
    judged = {row["model"]: row for row in rows(con, queries("report_audit")["judged_claims"])}
    audited = {found.model: found for found in agreement(con)}
    if scope.route != CLAIMS_ROUTE and not judged and not audited:
        return None
    bar = AuditBar.from_env()
    models = []
    for model in sorted(set(judged) | set(audited)):
        found = audited.get(model)
        ok, why = audit_status(found, bar)
        models.append({"model": model, "judged": judged[model]["claims"] if model in judged
                       else 0, "audited": ok, "why": why, **_figures(found)})
    return {"models": models, "audited": bool(models) and all(m["audited"] for m in models),
            "min_kappa": bar.min_kappa, "min_labels": bar.min_labels}


def _figures(found) -> dict:
    if found is None:
        return {"n": 0, "labelled_at": None}
    s = found.stats
    return {
        "n": found.labels, "labelled_at": found.labelled_at, "claims": found.claims,
        "effective_n": found.effective_n if found.weighted else None,
        "kappa": _estimate(s.kappa), "ac1": _estimate(s.ac1), "pabak": _estimate(s.pabak),
        "raw": _estimate(s.raw_agreement),
        "sensitivity": _estimate(s.sensitivity_not_attributed),
        "specificity": _estimate(s.specificity_not_attributed),
    }


def _estimate(e) -> dict:
    """Estimate and bounds as floats for the template; NaN (undefined) as None, a dash."""
    return {name: (None if np.isnan(float(v)) else float(v))
            for name, v in (("estimate", e.estimate), ("low", e.low), ("high", e.high))}
