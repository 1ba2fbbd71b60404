"""The LLM judge of the `claims` route: given the claims of a golden's reference answer and the
contexts a request retrieved, an OpenAI-compatible model classifies each claim as attributed to
the context (1) or not (0), with a reason (RAGAS LLMContextRecall, adapted to judge a list of
claims in one call). A reply is validated (JSON, schema, exactly the given claims in order);
one that is not is asked again once, then the verdict is `failed`, never a guess. Transport
failures (429, 5xx, timeouts) are retried here with exponential backoff and jitter, honouring
Retry-After. Verdicts are cached in the warehouse table `judge_verdicts`, keyed by a hash of
(model, prompt version, lang, claims, contexts), so a re-run calls only for what is missing;
calls run on an asyncio event loop in a thread of their own (`openai.AsyncOpenAI`, at most
`concurrency` in flight), and only the calling thread touches the DuckDB connection: the loop
hands each verdict to that one writer through a queue, so calls never wait for a write. The
API key is read from the environment and never appears in a repr, an error, a log line or a
table."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import queue
import random
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime

from pipeline.endpoints import http_endpoint
from pipeline.errors import RecallwatchError, mask_secrets
from pipeline.progress import Progress
from pipeline.warehouse import mended, normalize_text, run_script, transaction

log = logging.getLogger(__name__)

LANGS = ("en", "de", "fr")
PROMPT_VERSION = "v1"
DEFAULT_CONCURRENCY = 10
# Retry-After beyond this is not waited for in one go: the call is given up as failed.
MAX_RETRY_AFTER = 120.0
# Output tokens a dry run expects per claim (a statement, a one-sentence reason, a flag).
REPLY_TOKENS_PER_CLAIM = 50
# The largest token count a reply's usage is believed (stored as BIGINT, summed per run): a
# count beyond it is no count, and the call is taken to have used its estimate.
MAX_TOKEN_COUNT = 2 ** 53

# The RAGAS LLMContextRecall instruction ("Given a context, and an answer, analyze each sentence
# in the answer and classify if the sentence can be attributed to the given context or not"),
# adapted to a list of claims. Keyed by (prompt version, lang); a changed text is a new version,
# since cached verdicts are keyed by the version.
PROMPTS: dict[tuple[str, str], str] = {
    ("v1", "en"): (
        "You are given a context and a list of claims. Analyze each claim and classify whether "
        "it can be attributed to the given context or not. Use only 1 (yes: the context "
        "supports the claim) or 0 (no) as a binary classification, and give a one-sentence "
        "reason. Judge by the context alone, not by what you know. Answer in JSON with the key "
        '"classifications": one object per claim, in the order given, with "statement" (the '
        'claim exactly as given), "reason" and "attributed".'),
    ("v1", "de"): (
        "Du erhältst einen Kontext und eine Liste von Aussagen. Prüfe jede Aussage und "
        "klassifiziere, ob sie dem gegebenen Kontext zugeschrieben werden kann oder nicht. "
        "Verwende nur 1 (ja: der Kontext stützt die Aussage) oder 0 (nein) als binäre "
        "Klassifikation und gib eine Begründung in einem Satz. Urteile allein nach dem Kontext, "
        'nicht nach deinem Wissen. Antworte in JSON mit dem Schlüssel "classifications": ein '
        'Objekt je Aussage, in der gegebenen Reihenfolge, mit "statement" (die Aussage genau wie '
        'gegeben), "reason" und "attributed".'),
    ("v1", "fr"): (
        "Tu reçois un contexte et une liste d'affirmations. Analyse chaque affirmation et "
        "indique si elle peut être attribuée au contexte donné ou non. Utilise uniquement 1 "
        "(oui : le contexte étaye l'affirmation) ou 0 (non) comme classification binaire, et "
        "donne une raison en une phrase. Juge d'après le contexte seul, pas d'après tes "
        'connaissances. Réponds en JSON avec la clé "classifications" : un objet par '
        'affirmation, dans l\'ordre donné, avec "statement" (l\'affirmation telle quelle), '
        '"reason" et "attributed".'),
}

# The user message: the labelled context, then the claims as a JSON list on the last line.
_LABELS = {
    "en": ("Context", "Claims (classify each, in this order)",
           "Your previous reply could not be used: {problem}. Answer again, classifying exactly "
           "these claims in this order"),
    "de": ("Kontext", "Aussagen (jede klassifizieren, in dieser Reihenfolge)",
           "Deine vorige Antwort war nicht verwendbar: {problem}. Antworte erneut und "
           "klassifiziere genau diese Aussagen in dieser Reihenfolge"),
    "fr": ("Contexte", "Affirmations (classer chacune, dans cet ordre)",
           "Ta réponse précédente était inutilisable : {problem}. Réponds de nouveau en classant "
           "exactement ces affirmations dans cet ordre"),
}

RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "context_recall_classifications",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"classifications": {"type": "array", "items": {
                "type": "object",
                "properties": {"statement": {"type": "string"}, "reason": {"type": "string"},
                               "attributed": {"type": "integer", "enum": [0, 1]}},
                "required": ["statement", "reason", "attributed"],
                "additionalProperties": False}}},
            "required": ["classifications"],
            "additionalProperties": False,
        },
    },
}


# ------------------------------------------------------------------------------ configuration

@dataclass(frozen=True)
class JudgeConfig:
    """Which model judges, where, and how hard to try. `api_key` never shows in the repr;
    `base_url` None is OpenAI's own endpoint. max_calls / max_tokens bound one `judge_many` run
    (None: unbounded); max_retries counts retries after the first try of a call."""

    model: str
    base_url: str | None = None
    api_key: str = field(default="", repr=False)
    lang: str = "en"
    prompt_version: str = PROMPT_VERSION
    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float = 60.0
    max_retries: int = 4
    backoff: float = 1.0          # first wait before a retry, doubled each time (with jitter)
    max_backoff: float = 30.0
    max_calls: int | None = None
    max_tokens: int | None = None

    def __post_init__(self):
        if not self.model:
            raise RecallwatchError("the judge model is empty: set RECALLWATCH_JUDGE_MODEL.")
        if self.lang not in LANGS:
            raise RecallwatchError(
                f"judge language {self.lang!r} must be one of {', '.join(LANGS)}.")
        if (self.prompt_version, self.lang) not in PROMPTS:
            raise RecallwatchError(
                f"judge prompt version {self.prompt_version!r} has no {self.lang} text; known "
                f"versions: {', '.join(sorted({v for v, _ in PROMPTS}))}.")
        if self.concurrency < 1 or self.timeout <= 0 or self.max_retries < 0:
            raise RecallwatchError(
                "judge concurrency must be at least 1, timeout above 0 and max_retries at "
                "least 0.")
        if self.base_url:
            _check_endpoint(self.base_url)
        if not self.api_key.isascii() or not self.api_key.isprintable() or any(
                c.isspace() for c in self.api_key):
            # an HTTP header carries the key: a line break or a non-ASCII letter cannot go
            raise RecallwatchError(
                "OPENAI_API_KEY holds a space, a line break or a non-ASCII character: set it "
                "to the key alone.")

    def __repr__(self) -> str:
        return (f"JudgeConfig(model={self.model!r}, base_url={_safe_url(self.base_url)!r}, "
                f"lang={self.lang!r}, prompt_version={self.prompt_version!r}, "
                f"concurrency={self.concurrency}, timeout={self.timeout}, "
                f"max_retries={self.max_retries}, max_calls={self.max_calls}, "
                f"max_tokens={self.max_tokens})")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> JudgeConfig:
        """Model from RECALLWATCH_JUDGE_MODEL, endpoint from OPENAI_BASE_URL (unset: OpenAI),
        key from OPENAI_API_KEY; keyword arguments override or add the other fields."""
        env = os.environ if environ is None else environ
        model = overrides.pop("model", None) or env.get("RECALLWATCH_JUDGE_MODEL")
        if not model:
            raise RecallwatchError(
                "no judge model: set RECALLWATCH_JUDGE_MODEL to the model name the endpoint "
                "serves (e.g. gpt-4o-mini).")
        api_key = overrides.pop("api_key", None) or env.get("OPENAI_API_KEY")
        if not api_key:
            raise RecallwatchError(
                "OPENAI_API_KEY is not set: set it to the judge endpoint's key (any non-empty "
                "value for a local server that takes none).")
        base_url = overrides.pop("base_url", None) or env.get("OPENAI_BASE_URL") or None
        return cls(model=model, base_url=base_url, api_key=api_key, **overrides)

    def secrets(self) -> tuple[str, ...]:
        """Texts that must never be shown: the key, and credentials in the endpoint URL."""
        found = [self.api_key]
        if self.base_url:
            parts = urllib.parse.urlsplit(self.base_url)
            found += [parts.password or "", parts.query]
        return tuple(s for s in found if s)


def _check_endpoint(url: str) -> None:
    """Refuse an endpoint URL the client cannot use, without showing it (it may hold a
    password): no http(s) scheme (user:pass@host reads as the scheme 'user'), no host, or a
    port that is no port."""
    if http_endpoint(url) is None:
        raise RecallwatchError(
            "OPENAI_BASE_URL must be an http:// or https:// URL with a host (and a port number "
            "if one is given), e.g. http://127.0.0.1:8000/v1.")


def _safe_url(url: str | None) -> str | None:
    """The endpoint without user info, query or fragment (which may carry credentials)."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urllib.parse.urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def _scrub(text: str, config: JudgeConfig) -> str:
    return mask_secrets(text, config.secrets())


# ----------------------------------------------------------------------------------- verdicts

@dataclass(frozen=True)
class Verdict:
    """The judge's classification of one set of claims against one set of contexts.
    status 'ok': attributed and reasons hold one entry per claim; 'failed': the judge gave no
    usable answer (error says why) and the claims count as not judged, never as 0;
    'skipped': the run's budget ran out before the judge was asked."""

    claims: tuple[str, ...]
    attributed: tuple[bool, ...] | None
    reasons: tuple[str, ...] | None
    tokens: int
    calls: int
    status: str
    error: str | None = None

    @property
    def covered(self) -> int | None:
        """Claims attributed to the context (None unless ok)."""
        return sum(self.attributed) if self.status == "ok" else None

    @property
    def recall(self) -> float | None:
        """covered / needed; None unless ok or when there are no claims."""
        if self.status != "ok" or not self.claims:
            return None
        return self.covered / len(self.claims)


class _OutOfBudget(Exception):
    """The run's budget has no room for another call."""


class _InvalidReply(Exception):
    """A reply that cannot be used (its message names the problem, without secrets)."""


class Budget:
    """Calls and tokens of one run, shared by its concurrent calls. A call reserves its estimated
    tokens before it starts and settles them with the real usage after, so that no call starts
    that would take the run past max_calls or max_tokens."""

    def __init__(self, max_calls: int | None, max_tokens: int | None):
        self.max_calls, self.max_tokens = max_calls, max_tokens
        self.calls = self.tokens = self.reserved = self.settled = 0
        # the most a call has used per token of its estimate: an estimate is characters / 4,
        # and a model that counts more (its reasoning, a script of one token per letter) would
        # take the run past max_tokens call after call; later calls are weighed by it
        self.ratio = 1.0
        self._lock = threading.Lock()

    def has_room(self, estimate: int) -> bool:
        with self._lock:
            return self._fits(estimate)

    def _fits(self, estimate: int) -> bool:
        if self.max_calls is not None and self.calls + 1 > self.max_calls:
            return False
        return self.max_tokens is None or \
            self.tokens + (self.reserved + estimate) * self.ratio <= self.max_tokens

    def unproven(self) -> bool:
        """A token budget whose first call is in flight and none has answered yet (a failed
        attempt is no answer): calls started together before any answer would all be weighed
        by the estimate alone."""
        with self._lock:
            return self.max_tokens is not None and not self.settled and self.reserved > 0

    def take(self, estimate: int) -> None:
        with self._lock:
            if not self._fits(estimate):
                raise _OutOfBudget
            self.calls += 1
            self.reserved += estimate

    def spend(self, estimate: int) -> bool:
        """A dry run's call: taken and settled at its estimate when it fits the budget (True)."""
        try:
            self.take(estimate)
        except _OutOfBudget:
            return False
        self.settle(estimate, estimate)
        return True

    def settle(self, estimate: int, used: int) -> None:
        with self._lock:
            self.reserved -= estimate
            self.tokens += used
            if used > 0:   # an answer (a failed attempt tells nothing of what a call costs)
                self.settled += 1
            if estimate > 0 and used > estimate:
                self.ratio = max(self.ratio, used / estimate)


def verdict_key(config: JudgeConfig, claims: Sequence[str], contexts: Sequence[str]) -> str:
    """The cache key of a verdict: sha256 of model, prompt version, lang, claims and contexts
    (exact texts, in order)."""
    payload = json.dumps([config.model, config.prompt_version, config.lang, list(claims),
                          list(contexts)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def prompt_messages(config: JudgeConfig, claims: Sequence[str],
                    contexts: Sequence[str]) -> list[dict]:
    """The system instruction and the user message (context, then the claims as a JSON list
    on the last line)."""
    context_label, claims_label, _ = _LABELS[config.lang]
    context = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(contexts, 1))
    user = (f"{context_label}:\n{context}\n\n{claims_label}:\n"
            f"{json.dumps(list(claims), ensure_ascii=False)}")
    return [{"role": "system", "content": PROMPTS[(config.prompt_version, config.lang)]},
            {"role": "user", "content": user}]


def estimate_tokens(config: JudgeConfig, claims: Sequence[str], contexts: Sequence[str]) -> int:
    """A rough cost of one call: prompt characters / 4, plus REPLY_TOKENS_PER_CLAIM per claim."""
    return _claims_call_tokens(prompt_messages(config, claims, contexts), len(claims))


def _claims_call_tokens(messages: list[dict], n_claims: int) -> int:
    chars = sum(len(m["content"]) for m in messages)
    return chars // 4 + REPLY_TOKENS_PER_CLAIM * n_claims


def message_tokens(messages: list[dict]) -> int:
    """A rough cost of a call of other messages (a reference's split): characters / 4, and as
    much again for the reply."""
    return 2 * (sum(len(m["content"]) for m in messages) // 4)


def make_client(config: JudgeConfig):
    """A synchronous `openai` client for the endpoint (complete_json's callers share one across
    their threads); it never retries by itself (the judge does)."""
    from openai import OpenAI  # deferred: only runs that judge need it

    return OpenAI(base_url=config.base_url, api_key=config.api_key, timeout=config.timeout,
                  max_retries=0)


def make_async_client(config: JudgeConfig):
    """An `openai.AsyncOpenAI` client for the endpoint, for judge calls on one event loop; it
    never retries by itself. Its connections belong to the loop that first uses it."""
    from openai import AsyncOpenAI  # deferred: only runs that judge need it

    return AsyncOpenAI(base_url=config.base_url, api_key=config.api_key,
                       timeout=config.timeout, max_retries=0)


def judge_claims(config: JudgeConfig, claims: list[str], contexts: list[str], *,
                 client=None, budget: Budget | None = None) -> Verdict:
    """Judge every claim against the contexts in one call. A reply that is not JSON of the
    schema naming exactly the given claims in order (normalized text) is asked again once,
    then the verdict is `failed`. No claims: ok with nothing to judge; no contexts: every claim
    is not attributed (a real 0). Neither costs a call. Raises RecallwatchError only for a
    problem of the configuration (key refused, model unknown, endpoint unreachable).
    client: an `openai.AsyncOpenAI` not yet used on another event loop (default: one made and
    closed here); the call runs on an event loop of its own."""
    claims, contexts = tuple(claims), list(contexts)
    if not claims or not contexts:
        return _without_call(claims, contexts)

    async def judge() -> Verdict:
        if client is not None:
            return await _judge_claims(config, claims, contexts, client, budget)
        async with make_async_client(config) as own:
            return await _judge_claims(config, claims, contexts, own, budget)

    return asyncio.run(judge())


def _without_call(claims: tuple[str, ...], contexts: Sequence[str]) -> Verdict:
    """The verdict that needs no judge: no claims (nothing to judge), or no contexts (every
    claim not attributed)."""
    reason = "nothing was retrieved" if claims and not contexts else None
    return Verdict(claims, (False,) * len(claims), (reason,) * len(claims), 0, 0, "ok")


async def _judge_claims(config: JudgeConfig, claims: tuple[str, ...], contexts: list[str],
                        client, budget: Budget | None) -> Verdict:
    """judge_claims on the running event loop, for claims and contexts both non-empty."""
    budget = budget if budget is not None else Budget(None, None)
    estimate = estimate_tokens(config, claims, contexts)
    messages = prompt_messages(config, claims, contexts)
    tokens = calls = 0
    problem = None
    for ask in range(2):
        try:
            content, used, made = await _complete_async(client, config, messages, budget,
                                                        estimate)
        except _OutOfBudget:
            if calls:  # a re-ask that no longer fits: what was spent is kept, as a failure
                return Verdict(claims, None, None, tokens, calls, "failed",
                               f"{problem}; the budget left no room to ask again")
            return Verdict(claims, None, None, tokens, calls, "skipped", "budget exhausted")
        except _CallFailed as exc:
            return Verdict(claims, None, None, tokens + exc.tokens, calls + exc.calls, "failed",
                           _scrub(str(exc), config))
        tokens, calls = tokens + used, calls + made
        try:
            attributed, reasons = _parse_reply(content, claims)
        except _InvalidReply as exc:
            problem = _scrub(str(exc), config)
            log.debug("judge reply unusable (ask %d): %s", ask + 1, problem)
            messages = messages + [
                {"role": "assistant", "content": content or ""},
                {"role": "user", "content": _LABELS[config.lang][2].format(problem=problem)
                 + ":\n" + json.dumps(list(claims), ensure_ascii=False)}]
            # asking again sends the unusable reply too: the budget counts it
            estimate = _claims_call_tokens(messages, len(claims))
            continue
        return Verdict(claims, attributed, reasons, tokens, calls, "ok")
    return Verdict(claims, None, None, tokens, calls, "failed",
                   f"the judge's reply was unusable twice: {problem}")


class _CallFailed(Exception):
    """A call that failed for good after its retries (the message holds no secret)."""

    def __init__(self, message: str, *, tokens: int = 0, calls: int = 0):
        super().__init__(message)
        self.tokens, self.calls = tokens, calls


def complete_json(config: JudgeConfig, messages: list[dict], response_format: dict, *,
                  client=None, budget: Budget | None = None
                  ) -> tuple[str | None, int, int, str | None]:
    """One chat completion of another prompt (pipeline/claims.py splits a reference into
    claims with it) through a synchronous client (make_client), with the judge's retries and
    errors: (content, tokens, calls, error). content is None when the call failed for good or
    the reply was cut off; error then says why, without secrets. Raises RecallwatchError for a
    problem of the configuration, as judge_claims does. `budget`, shared by the caller's
    calls, bounds its tries: check `budget.has_room(message_tokens(messages))` first (a first
    try without room is not started and raises)."""
    client = client if client is not None else make_client(config)
    try:
        content, used, calls = _complete(client, config, messages,
                                         budget if budget is not None else Budget(None, None),
                                         message_tokens(messages), response_format)
    except _CallFailed as exc:
        return None, exc.tokens, exc.calls, _scrub(str(exc), config)
    return content, used, calls, None if content is not None else "the reply was cut off"


# _complete and _complete_async are one loop, written twice because one waits with time.sleep
# and the other with asyncio.sleep; what a reply or a failure means is decided once, below.

def _complete(client, config: JudgeConfig, messages: list[dict], budget: Budget,
              estimate: int, response_format: dict = RESPONSE_FORMAT
              ) -> tuple[str | None, int, int]:
    """One chat completion through a synchronous client, retried on 429 (honouring
    Retry-After), 5xx, timeouts and dropped connections with exponential backoff and jitter.
    Returns (content, tokens, calls made)."""
    import openai

    calls, last = 0, "no attempt was made"
    for attempt in range(config.max_retries + 1):
        _take(budget, estimate, calls, last)
        calls += 1
        used = 0
        try:
            response = client.chat.completions.create(
                **_body(config, messages, response_format), timeout=config.timeout)
            content, used = _reply(response, estimate)
            return content, used, calls
        except (openai.APIStatusError, openai.APIConnectionError) as exc:
            last, wait_for = _retryable(exc, config, calls)
        except _NOT_A_COMPLETION as exc:   # a 200 whose body is no completion: as a 5xx
            last, wait_for = f"the judge endpoint's reply was not a chat completion " \
                             f"({type(exc).__name__})", None
        finally:
            budget.settle(estimate, used)
        if attempt == config.max_retries:
            break
        time.sleep(_delay(config, attempt, wait_for, last))
    raise _given_up(config, last, calls)


async def _complete_async(client, config: JudgeConfig, messages: list[dict], budget: Budget,
                          estimate: int, response_format: dict = RESPONSE_FORMAT
                          ) -> tuple[str | None, int, int]:
    """_complete through an `openai.AsyncOpenAI` client, waiting without blocking the loop. The
    budget is taken before the first await, so a check of it and the call it admits are not
    interleaved with another task's."""
    import openai

    calls, last = 0, "no attempt was made"
    for attempt in range(config.max_retries + 1):
        while attempt and budget.unproven():   # a retry, as a first try, waits for an answer
            await asyncio.sleep(0.005)
        _take(budget, estimate, calls, last)
        calls += 1
        used = 0
        try:
            # The same request as client.chat.completions.create, without its per-call
            # conversion of every message by the parameter types: a third of the client's own
            # work per call, on the loop that every call's answer waits for.
            # The client's timeout bounds each read, not the answer: a server (or a gateway
            # sending keep-alive blanks) that trickles its body a byte at a time would hold
            # the call, and the run, without end. The whole answer is given the timeout.
            response = await asyncio.wait_for(client.post(
                "/chat/completions", cast_to=_chat_completion(),
                body=_body(config, messages, response_format),
                options={"timeout": config.timeout}), config.timeout)
            content, used = _reply(response, estimate)
            return content, used, calls
        except (openai.APIStatusError, openai.APIConnectionError) as exc:
            last, wait_for = _retryable(exc, config, calls)
        except TimeoutError:   # the whole answer took longer than the timeout
            last, wait_for = f"no answer within {config.timeout:g} s", None
        except _NOT_A_COMPLETION as exc:   # a 200 whose body is no completion: as a 5xx
            last, wait_for = f"the judge endpoint's reply was not a chat completion " \
                             f"({type(exc).__name__})", None
        finally:
            budget.settle(estimate, used)
        if attempt == config.max_retries:
            break
        await asyncio.sleep(_delay(config, attempt, wait_for, last))
    raise _given_up(config, last, calls)


def _take(budget: Budget, estimate: int, calls: int, last: str) -> None:
    """Reserve a try of a call; a retry the budget has no room for ends the call as failed,
    keeping the tries already paid for (a first try that does not fit is skipped: nothing
    was spent)."""
    try:
        budget.take(estimate)
    except _OutOfBudget:
        if not calls:
            raise
        raise _CallFailed(f"{last}; the budget left no room to try again", calls=calls) from None


def _body(config: JudgeConfig, messages: list[dict], response_format: dict) -> dict:
    """The Chat Completions request: the judge's model, deterministic, a JSON reply."""
    return {"model": config.model, "messages": messages, "temperature": 0,
            "response_format": response_format}


def _chat_completion():
    from openai.types.chat import ChatCompletion  # deferred, as the client is

    return ChatCompletion


class _NotACompletion(Exception):
    """A 200 reply that is no chat completion (a proxy's HTML page, JSON cut short)."""


# What reading a 200 reply raises when its body is no chat completion: JSON that does not
# parse (ValueError, also bytes that are not UTF-8), or a body the client hands back as text.
_NOT_A_COMPLETION = (ValueError, _NotACompletion)


def _reply(response, estimate: int) -> tuple[str | None, int]:
    """(content, tokens used) of a completion; content None when the reply was cut off. A
    server that does not say what it used, or says it in no count of tokens, is taken to have
    used the estimate. A body of another shape (a choice that is no object, a choice without
    a message as a content filter leaves it, content that is no text) is no completion."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not hasattr(response, "usage"):
        raise _NotACompletion(type(response).__name__)
    total = getattr(response.usage, "total_tokens", None)
    used = total if isinstance(total, int) and not isinstance(total, bool) \
        and 0 < total <= MAX_TOKEN_COUNT else estimate
    if not choices:
        return None, used
    choice = choices[0]
    if not hasattr(choice, "finish_reason") or not hasattr(choice, "message"):
        raise _NotACompletion(f"a choice of type {type(choice).__name__}")
    if choice.message is None:
        raise _NotACompletion(f"a choice without a message (finish_reason "
                              f"{choice.finish_reason!r})")
    if choice.finish_reason == "length":
        return None, used
    content = getattr(choice.message, "content", None)
    if content is not None and not isinstance(content, str):
        raise _NotACompletion(f"content of type {type(content).__name__}")
    return content, used


def _retryable(exc, config: JudgeConfig, calls: int) -> tuple[str, float | None]:
    """What a failed try means: (why, seconds the server asked to wait or None) when it is worth
    another try (429, 5xx, timeout or 408, dropped connection); otherwise raises
    RecallwatchError for a problem of the configuration (401, 403, 404) or _CallFailed for
    another refusal."""
    import openai

    endpoint = _safe_url(config.base_url) or "api.openai.com"
    if isinstance(exc, openai.AuthenticationError):
        raise RecallwatchError(
            f"the judge endpoint {endpoint} refused the API key (HTTP 401): check "
            "OPENAI_API_KEY.") from None
    if isinstance(exc, openai.PermissionDeniedError):
        raise RecallwatchError(
            f"the API key may not use model {config.model!r} (HTTP 403): check "
            "OPENAI_API_KEY and RECALLWATCH_JUDGE_MODEL.") from None
    if isinstance(exc, openai.NotFoundError):
        raise RecallwatchError(
            f"the judge endpoint {endpoint} does not serve model {config.model!r} at "
            "/chat/completions (HTTP 404): check RECALLWATCH_JUDGE_MODEL and "
            "OPENAI_BASE_URL.") from None
    if isinstance(exc, openai.RateLimitError):
        last = "rate limited (HTTP 429)"
        wait_for = _retry_after(exc.response)
        if wait_for is not None and wait_for > MAX_RETRY_AFTER:
            raise _CallFailed(f"{last}, asked to wait {wait_for:.0f} s", calls=calls) from None
        return last, wait_for
    if isinstance(exc, openai.APIStatusError):
        last = f"the judge endpoint answered HTTP {exc.status_code}"
        if exc.status_code < 500 and exc.status_code != 408:   # 408: a proxy's timeout
            raise _CallFailed(last, calls=calls) from None
        wait_for = _retry_after(exc.response)   # a 503's Retry-After is capped as a 429's is
        if wait_for is not None and wait_for > MAX_RETRY_AFTER:
            raise _CallFailed(f"{last}, asked to wait {wait_for:.0f} s", calls=calls) from None
        return last, wait_for
    if isinstance(exc, openai.APITimeoutError):
        return f"no answer within {config.timeout:g} s", None
    return _UNREACHABLE, None


_UNREACHABLE = "could not connect to the judge endpoint"


def _delay(config: JudgeConfig, attempt: int, wait_for: float | None, last: str) -> float:
    delay = wait_for if wait_for is not None else _backoff(config, attempt)
    log.debug("judge call failed (%s), retry %d in %.2f s", last, attempt + 1, delay)
    return delay


def _given_up(config: JudgeConfig, last: str, calls: int) -> Exception:
    """The error of a call whose every try failed: unreachable is the configuration's problem."""
    if last == _UNREACHABLE:
        return RecallwatchError(
            f"cannot reach the judge endpoint {_safe_url(config.base_url) or 'api.openai.com'} "
            f"after {calls} tries: check OPENAI_BASE_URL and that the server is up.")
    return _CallFailed(f"{last} on all {calls} tries", calls=calls)


def _backoff(config: JudgeConfig, attempt: int) -> float:
    """Exponential backoff with jitter: between half and all of backoff * 2^attempt (capped),
    so that workers rate limited together do not retry together."""
    return min(config.max_backoff, config.backoff * 2 ** attempt) * random.uniform(0.5, 1.0)


def _retry_after(response) -> float | None:
    """Seconds the server asked to wait: retry-after-ms, or Retry-After in seconds or as an
    HTTP date; None when it did not say."""
    headers = getattr(response, "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _parse_reply(content: str | None, claims: tuple[str, ...]
                 ) -> tuple[tuple[bool, ...], tuple[str, ...]]:
    """(attributed, reasons) of a reply, or _InvalidReply naming what is wrong with it."""
    if content is None:
        raise _InvalidReply("the reply was empty or cut off")
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, RecursionError):   # RecursionError: nested past reading
        raise _InvalidReply("the reply is not valid JSON") from None
    items = data.get("classifications") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(
            isinstance(it, dict) and isinstance(it.get("statement"), str)
            and isinstance(it.get("reason"), str)
            and it.get("attributed") in (0, 1) and not isinstance(it.get("attributed"), float)
            for it in items):
        raise _InvalidReply('the reply does not follow the schema ("classifications": '
                            'statement, reason, attributed 0 or 1)')
    if len(items) != len(claims):
        raise _InvalidReply(f"the reply classified {len(items)} statements, not the "
                            f"{len(claims)} claims given")
    for i, (item, claim) in enumerate(zip(items, claims, strict=True), 1):
        if normalize_text(item["statement"]) != normalize_text(claim):
            raise _InvalidReply(f"statement {i} of the reply is not claim {i} as given")
    # a reason is the judge's own words, kept as given but for half a character cut in two
    return (tuple(bool(it["attributed"]) for it in items),
            tuple(mended(it["reason"]) for it in items))


# --------------------------------------------------------------------------- many, with cache

@dataclass
class JudgeRun:
    """What one judge_many run did. Counts are of distinct keys except `items` and `calls`:
    cached (reused, no call), judged (given a verdict now, ok or failed), failed, skipped_budget
    (not judged: the budget ran out; neither ok nor failed, judged by a later run). calls and
    tokens are what the endpoint was asked (retries included); in a dry run, the calls that
    would be made (one per key) and an estimate of their tokens. verdicts maps each key that
    has one (cached or judged now) to it."""

    items: int = 0
    distinct: int = 0
    cached: int = 0
    judged: int = 0
    failed: int = 0
    skipped_budget: int = 0
    calls: int = 0
    tokens: int = 0
    dry_run: bool = False
    verdicts: dict[str, Verdict] = field(default_factory=dict, repr=False)


def judge_many(con, config: JudgeConfig, items: Sequence[tuple[Sequence[str], Sequence[str]]],
               *, now: datetime, dry_run: bool = False, progress: Progress | None = None,
               client=None) -> JudgeRun:
    """Judge many (claims, contexts) items: dedupe by verdict_key, reuse the cached ok verdicts,
    judge the rest with at most config.concurrency calls in flight, and write each verdict to
    judge_verdicts (created_at = now) in a transaction of its own as it arrives, from this
    thread only, so that a run stopped midway keeps what it got. The calls run on an event loop
    in a thread of their own and hand their verdicts over through a queue: a slot freed by an
    answer takes the next item at once, never waiting for a write. The budget (max_calls,
    max_tokens) stops new calls from starting; the items left are counted as skipped_budget.
    If progress (or anything else) raises, no new call starts, and the calls in flight are
    waited for and written before the error propagates. client: an `openai.AsyncOpenAI` not
    yet used on another event loop (default: one made and closed by this run)."""
    run = JudgeRun(items=len(items), dry_run=dry_run)
    wanted: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for claims, contexts in items:
        wanted.setdefault(verdict_key(config, claims, contexts), (tuple(claims), tuple(contexts)))
    run.distinct = len(wanted)
    for key, claims, attributed, reasons, tokens, calls in run_script(
            con, "judge_cached_verdicts", {"keys": list(wanted)}):
        run.verdicts[key] = Verdict(tuple(claims), tuple(attributed), tuple(reasons), tokens,
                                    calls, "ok")
    run.cached = len(run.verdicts)
    todo = [(key, *wanted[key]) for key in wanted if key not in run.verdicts]
    if dry_run:   # the calls a run would start: up to the first the budget has no room for
        budget = Budget(config.max_calls, config.max_tokens)
        needing = [(c, x) for _, c, x in todo if c and x]
        for done, (claims, contexts) in enumerate(needing):
            estimate = estimate_tokens(config, claims, contexts)
            if not budget.spend(estimate):
                run.skipped_budget = len(needing) - done
                break
            run.calls += 1
            run.tokens += estimate
        return run
    if not todo:
        return run
    answers: queue.SimpleQueue = queue.SimpleQueue()
    no_new_calls = threading.Event()
    caller = threading.Thread(target=_call_all, name="judge-calls", daemon=True,
                              args=(config, todo, client, answers, no_new_calls))
    caller.start()
    total, done = len(todo), 0
    error: BaseException | None = None
    while True:
        try:
            try:   # a timeout, so that Ctrl-C is seen while no answer comes (a hung server)
                answer = answers.get(timeout=0.5)
            except queue.Empty:
                continue
            if answer is _ALL_ANSWERED:
                break
            if isinstance(answer, BaseException):  # a configuration problem, or a bug
                raise answer
            if isinstance(answer, int):  # items the budget left without a call
                run.skipped_budget += answer
                continue
            key, verdict = answer
            if verdict.status == "skipped":
                run.skipped_budget += 1
                continue
            _record(con, config, key, verdict, now, wanted[key][1])
            run.verdicts[key] = verdict
            run.judged += 1
            run.failed += verdict.status == "failed"
            run.calls += verdict.calls
            run.tokens += verdict.tokens
            done += 1
            if progress is not None:
                progress("judge claims", done, total)
        except BaseException as exc:  # noqa: B036 - the calls in flight are written first
            if isinstance(exc, KeyboardInterrupt) and isinstance(error, KeyboardInterrupt):
                # Ctrl-C again: stop waiting; the verdicts written so far are kept, those of
                # the calls still in flight are not (a re-run asks for them again)
                raise error from None
            if error is None:
                error = exc
                if isinstance(exc, KeyboardInterrupt):
                    log.warning("judge: interrupted; writing the verdicts of the calls in "
                                "flight (Ctrl-C again to stop without them)")
            no_new_calls.set()
    caller.join()
    if error is not None:
        raise error
    if run.failed:
        log.warning("judge: %d of %d verdicts failed (counted as judge_failed, not 0)",
                    run.failed, run.judged)
    return run


_ALL_ANSWERED = object()


def _call_all(config: JudgeConfig, todo: list[tuple[str, tuple[str, ...], tuple[str, ...]]],
              client, answers: queue.SimpleQueue, no_new_calls: threading.Event) -> None:
    """The calls of judge_many, on an event loop of this thread: config.concurrency tasks take
    items in turn and put on `answers` a (key, verdict) per item, the number of items the
    budget left without a call, or the error that stopped them; then _ALL_ANSWERED. They start
    no new item once no_new_calls is set (by them, or by the writer)."""
    budget = Budget(config.max_calls, config.max_tokens)
    pending = iter(todo)

    async def take_turns(client) -> None:
        while not no_new_calls.is_set():
            item = next(pending, None)
            if item is None:
                return
            key, claims, contexts = item
            if not claims or not contexts:
                answers.put((key, _without_call(claims, contexts)))
                continue
            while budget.unproven():   # the first answer tells what a call really costs
                await asyncio.sleep(0.005)
            if not budget.has_room(estimate_tokens(config, claims, contexts)):
                answers.put(1 + sum(1 for _ in pending))
                no_new_calls.set()
                return
            try:
                verdict = await _judge_claims(config, claims, list(contexts), client, budget)
            except Exception as exc:  # handed to the writer, which raises it
                answers.put(exc)
                no_new_calls.set()
                return
            answers.put((key, verdict))

    # no more turns than items: a limit far above them starts no idle task
    turns = min(config.concurrency, len(todo))

    async def call_all() -> None:
        if client is not None:
            await asyncio.gather(*(take_turns(client) for _ in range(turns)))
            return
        async with make_async_client(config) as own:
            await asyncio.gather(*(take_turns(own) for _ in range(turns)))

    try:
        asyncio.run(call_all())
    except BaseException as exc:  # noqa: B036 - handed to the writer, which raises it
        answers.put(exc)
    finally:
        answers.put(_ALL_ANSWERED)


def _record(con, config: JudgeConfig, key: str, verdict: Verdict, now: datetime,
            contexts: Sequence[str]) -> None:
    with transaction(con):
        run_script(con, "record_judge_verdict", {
            "verdict_key": key, "model": config.model,
            "prompt_version": config.prompt_version, "lang": config.lang,
            "claims": list(verdict.claims),
            "attributed": list(verdict.attributed) if verdict.attributed is not None else None,
            "reasons": list(verdict.reasons) if verdict.reasons is not None else None,
            "tokens": verdict.tokens, "calls": verdict.calls, "status": verdict.status,
            "error": verdict.error, "created_at": now, "contexts": list(contexts)})
