"""The claims of each golden, fixed once per gold-set version: the denominator of claims recall
(the `claims` route, pipeline/routes/claims.py) must not change between runs, so claims are
stored in `golden_claims` the first time a golden needs them and never split again. They come
from the gold file's `claims` when it gives them (source 'gold'), else from the golden's
`reference`, split once by the judge with a second prompt sent through the judge's own client
and retries (pipeline.judge.complete_json; source 'judge'). A person reviews them with
`recallwatch claims export FILE` and corrects them with `claims import FILE` (JSON Lines of
gold_id and claims; an imported golden's claims are replaced, source 'import'). Days scored
with the old claims keep their scores until they are scored again: `recallwatch run` finds
them stale (claims_fingerprint, recorded with each scored day by pipeline.state)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.atomic import written_whole
from pipeline.errors import RecallwatchError
from pipeline.judge import Budget, JudgeConfig, complete_json, message_tokens
from pipeline.warehouse import distinct_texts, half_character, mended, run_script, transaction

SPLIT_PROMPT_VERSION = "v1"
# The RAGAS claim decomposition ("break down each sentence into one or more fully understandable
# statements"), asked for as a JSON list so the reply is checked, not parsed out of prose.
SPLIT_PROMPTS: dict[str, str] = {
    "en": ("Break the given answer down into claims: short, self-contained statements, each "
           "fully understandable without the others (no pronouns that point to another "
           "claim). Keep every fact of the answer and add none. Answer in JSON with the key "
           '"claims": a list of strings, in the order the answer states them.'),
    "de": ("Zerlege die gegebene Antwort in Aussagen: kurze, in sich verständliche Sätze, jeder "
           "ohne die anderen verständlich (keine Pronomen, die auf eine andere Aussage "
           "verweisen). Behalte jede Tatsache der Antwort und füge keine hinzu. Antworte in "
           'JSON mit dem Schlüssel "claims": eine Liste von Zeichenketten, in der Reihenfolge '
           "der Antwort."),
    "fr": ("Décompose la réponse donnée en affirmations : des énoncés courts et autonomes, "
           "chacun compréhensible sans les autres (pas de pronom renvoyant à une autre "
           "affirmation). Garde chaque fait de la réponse et n'en ajoute aucun. Réponds en JSON "
           'avec la clé "claims" : une liste de chaînes, dans l\'ordre de la réponse.'),
}
_ANSWER_LABEL = {"en": "Answer", "de": "Antwort", "fr": "Réponse"}

SPLIT_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "reference_claims",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
            "required": ["claims"],
            "additionalProperties": False,
        },
    },
}


@dataclass
class ClaimsFixed:
    """What fix_claims did. claims maps each golden of the version with stored claims to them;
    failed maps a golden whose reference the judge could not split to why (it is tried again by
    the next run); skipped holds the goldens left unsplit because the budget ran out."""

    claims: dict[str, tuple[str, ...]] = field(default_factory=dict)
    split: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)
    calls: int = 0
    tokens: int = 0
    # a dry run: the references a run would split within the budget, with estimated tokens
    # and their text (gold_id, tokens, reference)
    planned: list[tuple[str, int, str]] = field(default_factory=list)


def split_messages(config: JudgeConfig, reference: str) -> list[dict]:
    """The instruction and the reference answer to split."""
    return [{"role": "system", "content": SPLIT_PROMPTS[config.lang]},
            {"role": "user", "content": f"{_ANSWER_LABEL[config.lang]}:\n{reference}"}]


def split_reference(config: JudgeConfig, reference: str, *, client=None,
                    budget: Budget | None = None
                    ) -> tuple[tuple[str, ...] | None, int, int, str | None]:
    """The claims of one reference answer: (claims, tokens, calls, error). A reply that is not
    JSON with a non-empty list of non-empty strings gives claims None and the error, never a
    guess. `budget` bounds its tries (see complete_json)."""
    content, tokens, calls, error = complete_json(
        config, split_messages(config, reference), SPLIT_FORMAT, client=client, budget=budget)
    if content is None:
        return None, tokens, calls, error
    try:
        found = json.loads(content).get("claims")
    except (json.JSONDecodeError, AttributeError, RecursionError):
        found = None
    if not isinstance(found, list) or not all(isinstance(c, str) for c in found):
        return None, tokens, calls, 'the reply is not JSON with a "claims" list of strings'
    # half a character cut in two in the judge's text: kept as U+FFFD, the rest of the claim
    # stands
    claims = tuple(distinct_texts(mended(c).strip() for c in found if c.strip()))
    if not claims:
        return None, tokens, calls, "the judge found no claims in the reference"
    return claims, tokens, calls, None


def claims_fingerprint(con, gold_version: str) -> str:
    """What `import_claims` changed in the claims of `gold_version`, as one value ('' when
    nothing was imported): the claims route's scores of a day depend on it."""
    return run_script(con, "claims_fingerprint", {"gold_version": gold_version})[0][0]


def stored_claims(con, gold_version: str) -> dict[str, tuple[str, ...]]:
    return {gold_id: tuple(claims)
            for gold_id, claims, _ in run_script(con, "claims_stored",
                                                 {"gold_version": gold_version})}


def fix_claims(con, config: JudgeConfig | None, gold_version: str, gold_ids: Sequence[str], *,
               max_calls: int | None = None, dry_run: bool = False, client=None
               ) -> ClaimsFixed:
    """Make sure every golden of `gold_ids` that has claims or a reference has its claims
    stored: the gold file's first (for the whole version, no call), then one judge call per
    reference still unsplit, each stored in its own transaction as it arrives so a run stopped
    midway keeps them. At most max_calls calls (retries included) are started and
    config.max_tokens tokens spent (None: no limit): a reference whose split does not fit is
    skipped. A dry run calls nothing and counts the references it would split as skipped,
    those the budget has room for also as `planned`. Without a judge (config None) the
    references stay unsplit (skipped)."""
    params = {"gold_version": gold_version}
    with transaction(con):
        run_script(con, "claims_from_gold", params)
    fixed = ClaimsFixed()
    todo = run_script(con, "claims_to_split", {**params, "gold_ids": sorted(set(gold_ids))})
    budget = Budget(max_calls, config.max_tokens if config is not None else None)
    for gold_id, reference in todo:
        estimate = message_tokens(split_messages(config, reference)) if config is not None else 0
        if config is not None and dry_run and budget.spend(estimate):
            fixed.planned.append((gold_id, estimate, reference))
        if config is None or dry_run or not budget.has_room(estimate):
            fixed.skipped.add(gold_id)
            continue
        claims, tokens, calls, error = split_reference(config, reference, client=client,
                                                       budget=budget)
        fixed.calls += calls
        fixed.tokens += tokens
        if claims is None:
            fixed.failed[gold_id] = error or "the judge gave no claims"
            continue
        replace_claims(con, gold_version, gold_id, claims, "judge")
        fixed.split += 1
    fixed.claims = stored_claims(con, gold_version)
    return fixed


def replace_claims(con, gold_version: str, gold_id: str, claims: Sequence[str],
                   source: str) -> None:
    with transaction(con):
        run_script(con, "claims_replace", {"gold_version": gold_version, "gold_id": gold_id,
                                           "claims": list(claims), "source": source})


def export_claims(con, path: str | Path, gold_version: str) -> int:
    """Write the stored claims of `gold_version` as JSON Lines ({"gold_id", "claims",
    "source"} per golden) for a person to review; returns the goldens written. The claims the
    gold file gives are fixed first, as scoring fixes them, so they are there before any
    scoring."""
    with transaction(con):
        run_script(con, "claims_from_gold", {"gold_version": gold_version})
    rows = run_script(con, "claims_stored", {"gold_version": gold_version})
    try:
        # a kill mid-write leaves the old file, not half the claims under its name
        with written_whole(path) as written, open(written, "w", encoding="utf-8") as out:
            for gold_id, claims, source in rows:
                out.write(json.dumps({"gold_id": gold_id, "claims": list(claims),
                                      "source": source}, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise RecallwatchError(f"cannot write {path} ({exc.strerror or exc}): choose a path in a "
                               "writable directory.") from None
    return len(rows)


def import_claims(con, path: str | Path, gold_version: str) -> int:
    """Replace the claims of every golden named in the JSON Lines file `path` (gold_id and a
    non-empty list of claims per line), source 'import', all in one transaction; returns the
    goldens replaced. A bad line or an unknown gold_id stops the import before anything
    changes."""
    known = {row[0] for row in con.execute(
        "SELECT gold_id FROM goldens WHERE gold_version = $v", {"v": gold_version}).fetchall()}
    wanted: dict[str, tuple[str, ...]] = {}
    lines_of: dict[str, int] = {}
    try:
        # JSON Lines end at '\n' alone: a claim may hold U+2028 or U+0085, which
        # splitlines() would break at; a byte-order mark is no part of the first line
        lines = Path(path).read_text(encoding="utf-8-sig").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecallwatchError(f"cannot read claims file {path} ({exc}): give a UTF-8 JSON "
                               "Lines file as written by `recallwatch claims export`.") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):   # RecursionError: nested past reading
            record = None
        claims = record.get("claims") if isinstance(record, dict) else None
        gold_id = record.get("gold_id") if isinstance(record, dict) else None
        if (not isinstance(gold_id, str) or not isinstance(claims, list)
                or not all(isinstance(c, str) for c in claims)
                or not [c for c in claims if c.strip()]):
            raise RecallwatchError(
                f"{path} line {number} must be JSON with a gold_id and a non-empty list of "
                "claims (strings); fix it and import again (nothing was changed).")
        if gold_id not in known:
            raise RecallwatchError(
                f"{path} line {number}: gold_id {gold_id!r} is not in gold set {gold_version}; "
                "fix it and import again (nothing was changed).")
        if gold_id in lines_of:
            # the later line would replace the earlier one's claims without a word
            raise RecallwatchError(
                f"{path} names gold_id {gold_id!r} twice (lines {lines_of[gold_id]} and "
                f"{number}): give all of a golden's claims on one line and import again "
                "(nothing was changed).")
        lines_of[gold_id] = number
        half = next((h for h in map(half_character, [gold_id, *claims]) if h), None)
        if half is not None:
            raise RecallwatchError(
                f"{path} line {number} holds an unpaired surrogate ({ascii(half)[1:-1]}, half "
                "of a character cut in two), which is no text; fix it and import again "
                "(nothing was changed).")
        wanted[gold_id] = tuple(distinct_texts(c.strip() for c in claims if c.strip()))
    with transaction(con):
        for gold_id, claims in wanted.items():
            run_script(con, "claims_replace", {"gold_version": gold_version, "gold_id": gold_id,
                                               "claims": list(claims), "source": "import"})
    return len(wanted)
