"""The platform contract `rag.context_recall` 1.0.0: a pointwise scorer of `gdi_text_v1`
dataset rows, higher is better. Each row's reference answer (`expected_output`) is split into
claims by the judge (pipeline.claims.split_reference) and the claims are judged against the
row's `retrieved_context` (pipeline.judge.judge_many): the score is the share of claims the
context supports (RAGAS LLMContextRecall), mapped onto [min, max]. Nothing is stored: verdicts
are cached for one call only, in an in-memory DuckDB warehouse, so rows that share a reference
are split once and rows that share claims and context are judged once. The configuration is
checked against `contract_schema.json` (JSON Schema draft 2020-12), whose defaults are the
ones used; a bad configuration or dataset ends in one RecallwatchError sentence."""

from __future__ import annotations

import csv
import decimal
import functools
import importlib.resources
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq

from pipeline.atomic import written_whole
from pipeline.claims import split_reference
from pipeline.errors import RecallwatchError
from pipeline.ingest.files import (
    DEFAULT_MAX_RECORD_BYTES,
    TABLE_SUFFIXES,
    csv_field_count_reason,
    read_json_lines,
    single_file,
)
from pipeline.judge import JudgeConfig, judge_many, make_client, verdict_key
from pipeline.warehouse import connect, half_character

CONTRACT = "rag.context_recall"
CONTRACT_VERSION = "1.0.0"
DATASET_FORMAT = "gdi_text_v1"
COLUMNS = ("input_id", "prompt", "expected_output", "sut_response", "retrieved_context")
STATUSES = ("ok", "judge_failed", "no_evidence")
# The verdict cache lives only as long as one score_rows call, so the created_at it is stamped
# with is never read; a constant keeps the clock out of the logic.
_CACHE_STAMP = datetime(1970, 1, 1)


# ------------------------------------------------------------------------------ configuration

@functools.cache
def config_schema() -> dict:
    """The configuration's JSON Schema (shipped as pipeline/contract_schema.json)."""
    text = importlib.resources.files("pipeline").joinpath("contract_schema.json").read_text(
        encoding="utf-8")
    return json.loads(text)


def validate_config(config: Mapping | None) -> dict:
    """The configuration with the schema's defaults filled in (model only when given), or a
    RecallwatchError naming the first key at fault. min < max is checked here, as JSON Schema
    cannot compare two values."""
    config = {} if config is None else config
    schema = config_schema()
    properties = schema["properties"]
    if not isinstance(config, Mapping):
        raise RecallwatchError(
            f"the {CONTRACT} config must be a JSON object with the keys "
            f"{', '.join(properties)}, not {type(config).__name__}.")
    unknown = [key for key in config if key not in properties]
    if unknown:
        raise RecallwatchError(
            f"the config key {unknown[0]!r} is unknown to {CONTRACT}: the keys are "
            f"{', '.join(properties)}.")
    validator = jsonschema.Draft202012Validator(schema)
    error = next(iter(sorted(validator.iter_errors(dict(config)), key=lambda e: list(e.path))),
                 None)
    if error is not None:
        key = error.path[0] if error.path else None
        if key is None:  # not reached while every property is checked above; kept honest
            raise RecallwatchError(f"the {CONTRACT} config is invalid: {error.message}.")
        raise RecallwatchError(
            f"the config key {key!r} is {config[key]!r}, but it must be "
            f"{properties[key]['description']}.")
    for key, value in config.items():
        # Python reads 1e400 as inf, and 1 with 400 zeros as an integer no float holds: a score
        # of NaN or Infinity reaches a file no JSON reader opens
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and not _finite(value):
            raise RecallwatchError(
                f"the config key {key!r} is {_shown(value)}, but it must be a finite number: "
                f"{properties[key]['description']}.")
        if isinstance(value, str) and half_character(value):
            raise RecallwatchError(
                f"the config key {key!r} holds an unpaired surrogate "
                f"({ascii(half_character(value))[1:-1]}, half of a character cut in two), but "
                f"it must be {properties[key]['description']}.")
    filled = {key: spec["default"] for key, spec in properties.items() if "default" in spec}
    filled.update(config)
    # JSON Schema counts 2.0 as an integer: read it as one
    filled.update({key: int(filled[key]) for key, spec in properties.items()
                   if spec.get("type") == "integer" and key in filled})
    if not _finite(filled["max"] - filled["min"]):
        raise RecallwatchError(
            f"the config keys 'min' ({filled['min']!r}) and 'max' ({filled['max']!r}) are "
            "too far apart: max - min must be a finite number.")
    if filled["min"] >= filled["max"]:
        raise RecallwatchError(
            f"the config keys 'min' ({filled['min']!r}) and 'max' ({filled['max']!r}) are "
            "invalid: min must be below max.")
    return filled


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:   # an integer beyond the largest float
        return False


def _shown(value: int | float) -> str:
    if isinstance(value, float):
        return repr(value)
    return f"an integer of {len(str(abs(value)))} digits"


def config_from_json(text: str | None) -> dict:
    """The configuration given as JSON text (the CLI's --config); None is the empty one."""
    if text is None:
        return {}
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise RecallwatchError(
            f"--config is not valid JSON ({exc.msg} at character {exc.pos}): give an object "
            "such as '{\"lang\": \"de\", \"concurrency_limit\": 4}'.") from None
    except RecursionError:
        raise RecallwatchError(
            "--config is nested too deeply to read: give an object such as "
            "'{\"lang\": \"de\"}'.") from None
    except ValueError:   # an integer of more digits than Python converts
        raise RecallwatchError(
            "--config holds a number too large to read: give an object such as "
            "'{\"lang\": \"de\", \"max\": 10}'.") from None
    if not isinstance(value, dict):
        raise RecallwatchError("--config must be a JSON object such as '{\"lang\": \"de\"}'.")
    return value


def _no_constant(name: str):
    # Python's reader takes NaN and Infinity, which JSON has not: the scores written would
    # carry them into a file no strict reader opens
    raise RecallwatchError(f"--config is not valid JSON ({name} is not a JSON number): give "
                           "an object such as '{\"lang\": \"de\"}'.")


# ----------------------------------------------------------------------------------- scoring

def score_rows(rows: Sequence[Mapping], config: Mapping | None = None, *,
               client=None) -> list[dict]:
    """Score `gdi_text_v1` rows, one result per row, in order: input_id, metric_name, score,
    weight, status, claims (the reference's claims), attributed (0/1 per claim), reasons (the
    judge's, per claim; for judge_failed, one sentence saying why) and tokens.

    score = min + recall * (max - min), recall = sum(attributed) / len(claims); inverted, it
    is max - score + min. status 'no_evidence': the reference is empty, score None, no call.
    'judge_failed': the judge could not split the reference or gave no usable verdict, score
    None, never 0. An empty retrieved context with a reference is a real recall 0, without a
    call (the reference is not split). tokens count the calls a row needed (split and
    verdict); rows sharing a reference, or claims and context, share the calls, which are
    charged to the first of them, so the tokens of all rows add up to what was spent.

    Multi-turn rows: when `prompt` is a list of turns, or `retrieved_context` a list whose
    items are lists, `retrieved_context` holds one context per turn (a string or a list of
    strings) and only the last turn's is used; an `expected_output` given as a list of turns
    gives its last. The earlier turns' contexts do not count: context recall asks whether what
    was retrieved for the question being answered supports its reference.

    Claims are split with up to concurrency_limit calls in flight, then judged the same way.
    Raises RecallwatchError for a bad configuration, a row without a gdi_text_v1 column, or a
    problem of the judge's configuration (key refused, model unknown, endpoint unreachable);
    the model falls back to RECALLWATCH_JUDGE_MODEL, the endpoint and key come from
    OPENAI_BASE_URL and OPENAI_API_KEY."""
    settings = validate_config(config)
    prepared = [_prepare(number, row) for number, row in enumerate(rows, 1)]
    references = list(dict.fromkeys(ref for ref, contexts in prepared if ref and contexts))
    splits: dict[str, tuple] = {}
    verdicts = {}
    judge = None
    if references:
        judge = JudgeConfig.from_env(model=settings.get("model"), lang=settings["lang"],
                                     concurrency=settings["concurrency_limit"])
        client = client if client is not None else make_client(judge)
        splits = _split_all(judge, references, client)
        items = [(splits[ref][0], contexts) for ref, contexts in prepared
                 if ref and contexts and splits[ref][0] is not None]
        if items:
            with connect(":memory:") as con:
                # judge_many makes its own async client: `client` is the synchronous one
                verdicts = judge_many(con, judge, items, now=_CACHE_STAMP).verdicts
    split_charged: set[str] = set()
    verdict_charged: set[str] = set()
    results = []
    for number, (row, (reference, contexts)) in enumerate(zip(rows, prepared, strict=True), 1):
        result = {"input_id": _input_id(number, row["input_id"]),   # checked by _prepare
                  "metric_name": settings["metric_name"],
                  "score": None, "weight": settings["weight"], "status": "ok", "claims": [],
                  "attributed": [], "reasons": [], "tokens": 0}
        if not reference:
            result["status"] = "no_evidence"
        elif not contexts:
            result.update(score=_scaled(0.0, settings), reasons=["nothing was retrieved"])
        else:
            claims, tokens, error = splits[reference]
            if reference not in split_charged:
                split_charged.add(reference)
                result["tokens"] += tokens
            if claims is None:
                result.update(status="judge_failed", reasons=[f"the reference could not be "
                                                              f"split into claims: {error}"])
            else:
                key = verdict_key(judge, claims, contexts)
                verdict = verdicts[key]
                if key not in verdict_charged:
                    verdict_charged.add(key)
                    result["tokens"] += verdict.tokens
                result["claims"] = list(claims)
                if verdict.status != "ok":
                    result.update(status="judge_failed", reasons=[
                        f"the judge gave no usable verdict: {verdict.error}"])
                else:
                    result.update(score=_scaled(verdict.recall, settings),
                                  attributed=[int(a) for a in verdict.attributed],
                                  reasons=list(verdict.reasons))
        results.append(result)
    return results


def _scaled(recall: float, settings: Mapping) -> float:
    low, high = settings["min"], settings["max"]
    score = low + recall * (high - low)
    return high - score + low if settings["inverted"] else score


def _split_all(judge: JudgeConfig, references: list[str], client
               ) -> dict[str, tuple[tuple[str, ...] | None, int, str | None]]:
    """Each distinct reference split once: reference -> (claims or None, tokens, error), with
    at most judge.concurrency calls in flight. A configuration problem stops the rest."""
    found = {}
    with ThreadPoolExecutor(max_workers=judge.concurrency,
                            thread_name_prefix="split") as pool:
        futures = {pool.submit(split_reference, judge, ref, client=client): ref
                   for ref in references}
        for future in as_completed(futures):
            try:
                claims, tokens, _calls, error = future.result()
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
            found[futures[future]] = (claims, tokens, error)
    return found


def _input_id(number: int, value) -> str | int:
    """A row's input_id as written to the scores: a string or an integer (a whole decimal,
    as Spark or a database writes an integer ID, is its integer)."""
    if isinstance(value, decimal.Decimal) and value.is_finite() and value == value.to_integral():
        return int(value)
    if isinstance(value, str) and half_character(value):
        # written to the scores, which no UTF-8 file can hold: refused before any call
        raise RecallwatchError(
            f"row {number}: input_id holds an unpaired surrogate "
            f"({ascii(half_character(value))[1:-1]}, half of a character cut in two), which is "
            "no text; fix the dataset.")
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise RecallwatchError(
        f"row {number}: input_id must be a string or an integer, not {type(value).__name__} "
        f"({value!r}); fix the dataset.")


def _prepare(number: int, row: Mapping) -> tuple[str | None, tuple[str, ...]]:
    """(reference or None when empty, contexts of the last turn) of one row."""
    if not isinstance(row, Mapping):
        raise RecallwatchError(
            f"row {number} is not an object: {DATASET_FORMAT} rows have the columns "
            f"{', '.join(COLUMNS)}.")
    missing = [column for column in COLUMNS if column not in row]
    if missing:
        raise RecallwatchError(
            f"row {number} has no column {missing[0]!r}: {DATASET_FORMAT} rows need "
            f"{', '.join(COLUMNS)}.")
    _input_id(number, row["input_id"])
    where = f"row {number} (input_id {row['input_id']!r})"
    turns = isinstance(row["prompt"], list) or (
        isinstance(row["retrieved_context"], list)
        and any(isinstance(item, list) for item in row["retrieved_context"]))
    context = row["retrieved_context"]
    if turns and isinstance(context, list):
        context = context[-1] if context else None
    if context is None:
        context = []
    elif isinstance(context, str):
        context = [context]
    if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
        raise RecallwatchError(
            f"{where}: retrieved_context must be a string or a list of strings (per turn, for "
            "a multi-turn row).")
    reference = row["expected_output"]
    if isinstance(reference, list):
        reference = reference[-1] if reference else None
    if reference is not None and not isinstance(reference, str):
        raise RecallwatchError(f"{where}: expected_output must be a string (or a list of "
                               "them, one per turn).")
    for column, texts in (("expected_output", [reference or ""]),
                          ("retrieved_context", context)):
        char = next((h for h in map(half_character, texts) if h), None)
        if char is not None:
            raise RecallwatchError(
                f"{where}: {column} holds an unpaired surrogate ({ascii(char)[1:-1]}, half of "
                "a character cut in two), which is no text a judge can read; fix the row.")
    reference = reference.strip() if reference else None
    return reference or None, tuple(c for c in context if c.strip())


# ---------------------------------------------------------------------------------- files

def read_dataset(path: str | Path, max_record_bytes: int | None = None) -> list[dict]:
    """The rows of a gdi_text_v1 dataset file: JSON Lines, Parquet or CSV (which has no lists:
    a cell holding a JSON array is read as that list). A file without one of the columns is
    an error naming it, as is a JSON line longer than max_record_bytes (default 8 MiB)."""
    file = single_file(str(path), TABLE_SUFFIXES)
    name = file.name.lower()
    if name.endswith(".parquet"):
        try:
            rows = pq.read_table(file).to_pylist()
        except Exception as exc:
            raise RecallwatchError(f"{file}: not a readable Parquet file ({exc}).") from None
    elif name.endswith(".csv"):
        try:
            with open(file, encoding="utf-8-sig", newline="") as fh:
                reader = csv.DictReader(fh)
                rows = [_csv_row(file, reader, row) for row in reader]
        except UnicodeDecodeError as exc:
            raise RecallwatchError(
                f"{file}: not valid UTF-8 (byte {exc.start}); save the dataset as UTF-8.") \
                from None
        except csv.Error as exc:   # a field over the record size limit, ...
            raise RecallwatchError(f"{file}: not a readable CSV file ({exc}).") from None
    else:
        rows = list(_json_rows(file, max_record_bytes or DEFAULT_MAX_RECORD_BYTES))
    columns = set().union(*(row.keys() for row in rows)) if rows else set()
    missing = [column for column in COLUMNS if column not in columns]
    if rows and missing:
        raise RecallwatchError(
            f"{file} has no column {missing[0]!r}: a {DATASET_FORMAT} dataset needs "
            f"{', '.join(COLUMNS)}.")
    return rows


def _csv_row(file: Path, reader: csv.DictReader, row: dict) -> dict:
    """A CSV row with its cells read (_csv_cell), or one error when it has more or fewer
    fields than the header names: csv puts the rest under None or leaves the last names None,
    and a missing context would be scored as nothing retrieved."""
    reason = csv_field_count_reason(row, len(reader.fieldnames or ()))
    if reason:
        raise RecallwatchError(f"{file} line {reader.line_num} has {reason}; fix it and run "
                               "again.")
    return {key: _csv_cell(value) for key, value in row.items()}


def _csv_cell(value: str | None):
    if value and value.lstrip().startswith("["):
        try:
            decoded = json.loads(value)
        except (json.JSONDecodeError, RecursionError):   # RecursionError: nested past reading
            return value
        return decoded if isinstance(decoded, list) else value
    return value


def _json_rows(file: Path, max_record_bytes: int) -> Iterable[dict]:
    for number, text, reason, _raw in read_json_lines(file, max_record_bytes):
        if text is None:
            raise RecallwatchError(f"{file} line {number}: {reason}; fix the line and run "
                                   "again.")
        try:
            record = json.loads(text)
        except (json.JSONDecodeError, RecursionError):   # RecursionError: nested past reading
            record = None
        if not isinstance(record, dict):
            raise RecallwatchError(f"{file} line {number} is not a JSON object; fix the line "
                                   "and run again.")
        yield record


def write_scores(path: str | Path, results: Iterable[Mapping]) -> None:
    """One JSON object per line, as score_rows returns them (strict JSON: no NaN), written
    whole (pipeline.atomic), so a failure leaves what was there."""
    try:
        with written_whole(path) as written:
            _write_lines(written, path, results)
    except OSError as exc:
        raise RecallwatchError(f"cannot write {path} ({exc.strerror or exc}): choose a path in "
                               "a writable directory.") from None


def _write_lines(file: str | Path, shown: str | Path, results: Iterable[Mapping]) -> None:
    try:
        with open(file, "w", encoding="utf-8") as out:
            for result in results:
                out.write(json.dumps(result, ensure_ascii=False, allow_nan=False) + "\n")
    except OSError as exc:
        raise RecallwatchError(f"cannot write {shown} ({exc.strerror or exc}): choose a path in "
                               "a writable directory.") from None


def _check_writable(path: str | Path) -> None:
    target = Path(path)
    parent = target.parent
    problem = ("Is a directory" if target.is_dir()
               else "No such directory" if not parent.is_dir()
               else "Permission denied" if not os.access(parent, os.W_OK)
               or (target.exists() and not os.access(target, os.W_OK)) else None)
    if problem:
        raise RecallwatchError(f"cannot write {path} ({problem}): choose a path in a writable "
                               "directory.")


def _check_not_input(path: str | Path, out: str | Path) -> None:
    """The scores never replace the dataset they score (the same file by another name or a
    link too): its rows would be lost."""
    try:
        same = os.path.samefile(path, out)
    except OSError:   # one of them does not exist (yet): read_dataset names a missing input
        same = False
    if same:
        raise RecallwatchError(f"--out {out} is the dataset being scored: writing the scores "
                               "there would replace its rows; choose another --out.")


def score_file(path: str | Path, out: str | Path, config: Mapping | None = None, *,
               client=None, max_record_bytes: int | None = None) -> list[dict]:
    """Score a dataset file (read_dataset) into a JSON Lines file; returns the results. The
    configuration is checked before the file is read."""
    validate_config(config)
    _check_writable(out)   # before any judge call is paid for
    _check_not_input(path, out)
    results = score_rows(read_dataset(path, max_record_bytes), config, client=client)
    write_scores(out, results)
    return results


def describe(results: Sequence[Mapping]) -> str:
    """One line on what was scored: rows per status and the mean score of the scored ones."""
    counts = {status: sum(r["status"] == status for r in results) for status in STATUSES}
    scored = [r["score"] for r in results if r["score"] is not None]
    mean = f"mean score {sum(scored) / len(scored):.3f}" if scored else "no score"
    return (f"{len(results)} row(s): " + ", ".join(f"{k} {v}" for k, v in counts.items())
            + f"; {mean}; {sum(r['tokens'] for r in results)} judge token(s)")
