"""The LLM judge against a real OpenAI-compatible server on loopback (tests/judge_server.py):
verdicts, faults ending in a correct verdict or `failed`, the warehouse cache (call counts come
from the server's log), the budget, dry runs, the concurrency limit, and the API key kept out
of every log, output and table."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import (  # noqa: E402
    WORKED_CLAIMS,
    Fault,
    JudgeServer,
    script,
    words_judge,
    wrong_claims,
)

from pipeline.errors import RecallwatchError, mask_secrets  # noqa: E402
from pipeline.judge import (  # noqa: E402
    PROMPTS,
    JudgeConfig,
    estimate_tokens,
    judge_claims,
    judge_many,
    prompt_messages,
    verdict_key,
)

SECRET = "sk-test-RECALLWATCH-5f3a9c0e7d"
NOW = datetime(2026, 11, 2, 3, 0)

CLAIMS = WORKED_CLAIMS
CONTEXTS = [
    "Urban branches require a minimum balance of 5000 rupees.",
    "A fee of 50 rupees applies when the balance falls below the minimum.",
    "Opening an account needs KYC documents: an identity proof and an address proof.",
    "Semi-urban branches require a minimum balance of 2500 rupees.",
]


def config(server: JudgeServer, **overrides) -> JudgeConfig:
    settings = {"model": "judge-model", "base_url": server.url, "api_key": SECRET,
                "timeout": 2.0, "backoff": 0.01, "max_backoff": 0.05, **overrides}
    return JudgeConfig(**settings)


def items(n: int, distinct: int) -> list[tuple[list[str], list[str]]]:
    """n items over `distinct` keys: claim i is attributed to context i when i is even."""
    out = []
    for i in range(n):
        key = i % distinct
        claim = f"Branch {key} opens at {key % 12 + 1} o'clock."
        context = claim if key % 2 == 0 else f"Branch {key} is closed on Sundays."
        out.append(([claim], [context]))
    return out


def calls_in(con) -> int:
    return con.execute("SELECT count(*) FROM judge_verdicts").fetchone()[0]


def test_ragas_worked_example_three_of_four_claims_attributed(con):
    with JudgeServer(api_key=SECRET) as server:
        cfg = config(server)
        run = judge_many(con, cfg, [(CLAIMS, CONTEXTS)], now=NOW)
    assert (run.judged, run.failed, run.calls, server.calls) == (1, 0, 1, 1)
    verdict = run.verdicts[verdict_key(cfg, CLAIMS, CONTEXTS)]
    assert verdict.attributed == (True, True, False, True)
    assert verdict.recall == 0.75 and verdict.covered == 3
    assert "rural" in verdict.reasons[2]
    row = con.sql("SELECT claims, attributed, reasons, status, tokens, calls, created_at, model, "
                  "prompt_version, lang FROM judge_verdicts").fetchall()
    assert row == [(CLAIMS, [True, True, False, True], list(verdict.reasons), "ok",
                    verdict.tokens, 1, NOW, "judge-model", "v1", "en")]
    assert verdict.tokens > 0
    sent = server.log[0]
    assert sent["authorized"] and sent["temperature"] == 0 and sent["claims"] == CLAIMS
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["messages"][0]["content"] == PROMPTS[("v1", "en")]


@pytest.mark.parametrize("lang", ["de", "fr"])
def test_german_and_french_prompts_are_sent(con, lang):
    with JudgeServer() as server:
        verdict = judge_claims(config(server, lang=lang), CLAIMS, CONTEXTS)
    assert verdict.attributed == (True, True, False, True)
    assert server.log[0]["messages"][0]["content"] == PROMPTS[("v1", lang)]
    assert prompt_messages(config(server, lang=lang), CLAIMS, CONTEXTS)[1]["content"] \
        != prompt_messages(config(server), CLAIMS, CONTEXTS)[1]["content"]


def test_429_waits_as_long_as_retry_after_says_then_succeeds():
    with JudgeServer(reply=script(Fault("429", retry_after=1))) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.attributed == (True, True, False, True)
    assert server.calls == 2 and verdict.calls == 2
    waited = server.log[1]["at"] - server.log[0]["at"]
    assert 0.9 <= waited < 3.0


def test_a_503_asking_to_wait_an_hour_fails_at_once_as_a_429_does_never_a_hang():
    # a 503 (overloaded, maintenance) with Retry-After is waited for as a 429's, within
    # MAX_RETRY_AFTER; beyond it the call is given up, not slept on for an hour per retry
    outcome = {}
    with JudgeServer(reply=lambda request: Fault("503", retry_after=3600)) as server:
        worker = threading.Thread(target=lambda: outcome.update(verdict=judge_claims(
            config(server), CLAIMS, CONTEXTS)), daemon=True)
        worker.start()
        worker.join(timeout=15)
    assert not worker.is_alive(), "the judge slept on a 503's Retry-After of an hour"
    verdict = outcome["verdict"]
    assert verdict.status == "failed" and verdict.attributed is None and server.calls == 1
    assert "HTTP 503, asked to wait 3600 s" in verdict.error
    with JudgeServer(reply=script(Fault("503", retry_after=1))) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and server.calls == 2
    assert 0.9 <= server.log[1]["at"] - server.log[0]["at"] < 3.0


def test_a_one_letter_api_key_leaves_a_failure_readable_and_a_key_standing_alone_masked():
    # a local server takes any key, as the README says; masking every "k" of the key "k" made
    # each stored reason "as***ed to wait" and showed where the letter occurs
    with JudgeServer(reply=lambda request: Fault("429", retry_after=3600),
                     api_key="k") as server:
        verdict = judge_claims(config(server, api_key="k"), CLAIMS, CONTEXTS)
    assert verdict.status == "failed" and verdict.error.endswith("(HTTP 429), asked to wait 3600 s")
    assert mask_secrets("key k refused; asked with k=k", ["k"]) == (
        "key *** refused; asked with ***=***")
    assert mask_secrets("https://judge:hunter2@host/v1 hunter22", ["hunter2"]) == (
        "https://judge:***@host/v1 hunter22")
    assert mask_secrets(f"x{SECRET}y", [SECRET, ""]) == "x***y"


def test_500_then_ok_is_retried():
    with JudgeServer(reply=script(Fault("500"))) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 2


def test_a_hang_past_the_timeout_is_retried():
    with JudgeServer(reply=script(Fault("hang", seconds=3))) as server:
        verdict = judge_claims(config(server, timeout=0.5), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 2


def test_an_answer_trickled_past_the_timeout_is_a_timeout_retried_never_a_hold():
    # each byte comes within the timeout, the whole answer does not: the client's timeout
    # bounds one read, and a call held 40+ s (and a run, without end) with timeout 0.5
    with JudgeServer(reply=script(Fault("trickle", seconds=0.1))) as server:
        started = time.monotonic()
        verdict = judge_claims(config(server, timeout=0.5), CLAIMS, CONTEXTS)
        took = time.monotonic() - started
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 2
    assert took < 5, took


def test_a_408_request_timeout_is_retried_as_a_timeout_is():
    # a proxy or gateway that timed the request out answers 408: a timeout, retried, not a
    # refusal that fails the request at once
    with JudgeServer(reply=script(Fault("408"))) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 2


def test_persistent_5xx_fails_after_the_retries_never_a_guess():
    with JudgeServer(reply=lambda request: Fault("500")) as server:
        verdict = judge_claims(config(server, max_retries=2), CLAIMS, CONTEXTS)
    assert verdict.status == "failed" and verdict.attributed is None and verdict.recall is None
    assert server.calls == 3 and "HTTP 500 on all 3 tries" in verdict.error


@pytest.mark.parametrize("body", ["cut body", "html", "bytes", "no message", "null message",
                                  "choice text", "usage text"])
def test_a_200_that_is_no_chat_completion_is_retried_then_failed_never_a_crash(body):
    # besides bodies that are no completion at all: a content filter's choice without a
    # message, a null message, a choice that is text, a token count that is no number
    with JudgeServer(reply=script(Fault(body))) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 2
    with JudgeServer(reply=lambda request: Fault(body)) as server:
        verdict = judge_claims(config(server, max_retries=1), CLAIMS, CONTEXTS)
    assert verdict.status == "failed" and verdict.recall is None and server.calls == 2
    if body in ("cut body", "html", "bytes"):
        assert "not a chat completion" in verdict.error


@pytest.mark.parametrize("body", ["no message", "null message"])
def test_a_content_filters_choice_is_retried_with_backoff_not_asked_again_once(body):
    # a choice without a message was taken as a reply cut off: asked again once, so two in a
    # row failed the request although retries were left
    with JudgeServer(reply=script(Fault(body), Fault(body))) as server:
        verdict = judge_claims(config(server, max_retries=4), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 3


def test_malformed_json_twice_fails():
    with JudgeServer(reply=script(Fault("malformed"), Fault("malformed"))) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "failed" and verdict.attributed is None
    assert "not valid JSON" in verdict.error and server.calls == 2


def test_malformed_json_once_is_asked_again():
    with JudgeServer(reply=script(Fault("malformed"))) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 2


def test_wrong_claims_once_is_asked_again_with_the_claims():
    with JudgeServer(reply=script(wrong_claims)) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.attributed == (True, True, False, True)
    assert server.calls == 2
    again = server.log[1]["messages"]
    assert again[-2]["role"] == "assistant" and "not claim 1" in again[-1]["content"]
    assert server.log[1]["claims"] == CLAIMS


def test_wrong_claims_twice_fails():
    with JudgeServer(reply=script(wrong_claims, wrong_claims)) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "failed" and "unusable twice" in verdict.error
    assert server.calls == 2


def test_fewer_classifications_than_claims_fails_when_repeated():
    def short(request):
        reply = words_judge(request)
        reply["classifications"].pop()
        return reply

    with JudgeServer(reply=short) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "failed" and "classified 3 statements, not the 4" in verdict.error


def _with_half_a_character(request) -> str:
    # "\ud83d" alone in the JSON text: valid JSON that Python reads as a lone surrogate
    return json.dumps(words_judge(request)).replace('"the context states this"',
                                                    '"the context states this \\ud83d"')


def test_half_a_character_in_a_reason_is_kept_as_the_replacement_character(con):
    # it reached DuckDB as given, which refused it: every run paid for the call and stopped
    with JudgeServer(reply=_with_half_a_character) as server:
        first = judge_many(con, config(server), [(CLAIMS, CONTEXTS)], now=NOW)
        again = judge_many(con, config(server), [(CLAIMS, CONTEXTS)], now=NOW)
    assert (first.judged, first.failed, again.cached, server.calls) == (1, 0, 1, 1)
    ((attributed, reasons),) = con.sql(
        "SELECT attributed, reasons FROM judge_verdicts").fetchall()
    assert attributed == [True, True, False, True]
    assert reasons[0] == "the context states this \ufffd"


def test_a_reply_nested_past_reading_is_asked_again_then_failed():
    deep = '{"classifications": ' + "[" * 100_000
    with JudgeServer(reply=script(deep)) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "ok" and verdict.covered == 3 and server.calls == 2
    with JudgeServer(reply=lambda request: deep) as server:
        verdict = judge_claims(config(server), CLAIMS, CONTEXTS)
    assert verdict.status == "failed" and "not valid JSON" in verdict.error
    assert server.calls == 2


def test_a_token_count_too_large_to_store_is_taken_as_the_estimate(con):
    with JudgeServer(total_tokens=10**30) as server:
        run = judge_many(con, config(server), [(CLAIMS, CONTEXTS)], now=NOW)
    estimate = estimate_tokens(config(server), CLAIMS, CONTEXTS)
    assert (run.judged, run.failed, run.tokens) == (1, 0, estimate)
    assert con.sql("SELECT status, tokens FROM judge_verdicts").fetchall() == [("ok", estimate)]


def test_asking_again_counts_the_unusable_reply_against_the_token_budget(con):
    def long_and_wrong(request):
        reply = words_judge(request)
        for row in reply["classifications"]:
            row["statement"], row["reason"] = "something else", "x" * 1500
        return reply

    with JudgeServer(reply=script(long_and_wrong)) as server:
        free = judge_claims(config(server), CLAIMS, CONTEXTS)
    # as the server counts tokens: the prompt's characters and the reply's, each / 4
    prompt = sum(len(m["content"]) for m in prompt_messages(config(server), CLAIMS, CONTEXTS))
    first = prompt // 4 + len(json.dumps(long_and_wrong(_Asked()))) // 4
    assert free.status == "ok" and free.tokens > first + estimate_tokens(
        config(server), CLAIMS, CONTEXTS)
    # room for the second ask by the first prompt's estimate, not for the reply it carries
    cap = first + estimate_tokens(config(server), CLAIMS, CONTEXTS)
    with JudgeServer(reply=script(long_and_wrong)) as server:
        run = judge_many(con, config(server, max_tokens=cap), [(CLAIMS, CONTEXTS)], now=NOW)
    assert run.tokens <= cap and server.calls == 1
    assert con.sql("SELECT status, error LIKE '%no room to ask again' FROM judge_verdicts"
                   ).fetchall() == [("failed", True)]


class _Asked:
    """The request the first ask of the worked example makes, as the reply functions read it."""

    claims = CLAIMS
    context = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(CONTEXTS, 1))


def test_a_concurrency_far_above_the_items_starts_no_idle_calls(con):
    # one item under a limit of a million: a task per unit of the limit took some 1 KiB each
    # (a limit of fifty million ran out of memory)
    import tracemalloc

    with JudgeServer() as server:
        tracemalloc.start()
        try:
            run = judge_many(con, config(server, concurrency=1_000_000), [(CLAIMS, CONTEXTS)],
                             now=NOW)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert (run.judged, run.failed, server.calls) == (1, 0, 1)
    assert peak < 64 << 20


def test_empty_retrieval_is_a_real_zero_without_a_call():
    with JudgeServer() as server:
        verdict = judge_claims(config(server), CLAIMS, [])
    assert verdict.status == "ok" and verdict.recall == 0.0 and server.calls == 0


def test_failed_verdicts_are_stored_and_judged_again_by_the_next_run(con):
    with JudgeServer(reply=script(Fault("malformed"), Fault("malformed"))) as server:
        cfg = config(server)
        first = judge_many(con, cfg, [(CLAIMS, CONTEXTS)], now=NOW)
        assert (first.judged, first.failed) == (1, 1)
        assert con.sql("SELECT status, attributed FROM judge_verdicts").fetchall() == [
            ("failed", None)]
        second = judge_many(con, cfg, [(CLAIMS, CONTEXTS)], now=NOW)
    assert (second.cached, second.judged, second.failed) == (0, 1, 0)
    assert server.calls == 3
    assert con.sql("SELECT status FROM judge_verdicts").fetchall() == [("ok",)]


def test_a_second_run_over_the_same_items_makes_no_call(con):
    with JudgeServer() as server:
        cfg = config(server)
        first = judge_many(con, cfg, items(40, 40), now=NOW)
        second = judge_many(con, cfg, items(40, 40), now=NOW)
    assert (first.judged, first.calls, second.cached, second.judged, second.calls) == (
        40, 40, 40, 0, 0)
    assert server.calls == 40
    assert second.verdicts == first.verdicts


def test_a_thousand_items_over_fifty_keys_make_fifty_calls(con):
    with JudgeServer() as server:
        run = judge_many(con, config(server), items(1000, 50), now=NOW)
    assert (run.items, run.distinct, run.judged, run.calls, server.calls) == (
        1000, 50, 50, 50, 50)
    assert calls_in(con) == 50
    assert sorted(v.covered for v in run.verdicts.values()) == [0] * 25 + [1] * 25


def test_a_budget_stops_new_calls_and_a_rerun_makes_the_missing_ones(con):
    with JudgeServer(latency=0.02) as server:
        cfg = config(server, concurrency=5)
        first = judge_many(con, config(server, concurrency=5, max_calls=20), items(50, 50),
                           now=NOW)
        assert (first.judged, first.calls, first.skipped_budget, first.failed) == (20, 20, 30, 0)
        assert server.calls == 20 and calls_in(con) == 20
        second = judge_many(con, cfg, items(50, 50), now=NOW)
    assert (second.cached, second.judged, second.calls) == (20, 30, 30)
    assert server.calls == 50


def test_a_token_budget_stops_new_calls(con):
    with JudgeServer() as server:
        run = judge_many(con, config(server, concurrency=1, max_tokens=300), items(10, 10),
                         now=NOW)
    assert run.tokens <= 300 and run.judged == server.calls and 0 < run.judged < 10
    assert run.skipped_budget == 10 - run.judged and run.failed == 0


@pytest.mark.parametrize("concurrency", [1, 10])
@pytest.mark.parametrize(("first", "latency"), [(None, 0.0), (Fault("500"), 0.0),
                                                (Fault("500"), 0.3)])
def test_a_token_budget_holds_when_calls_cost_more_than_estimated(con, concurrency, first,
                                                                   latency):
    # the estimate is characters / 4; a model counting 5 times that (its reasoning tokens, a
    # script of a token per letter) took max_tokens 1500 to 2000 tokens one call at a time,
    # and to 7000 with 10 calls started together on the estimate alone; a first call that
    # failed released the others before any answer had told what a call costs, and its retry
    # started beside the next call while that one was still answering (2000)
    with JudgeServer(total_tokens=1000, latency=latency,
                     reply=script(first) if first else words_judge) as server:
        run = judge_many(con, config(server, concurrency=concurrency, max_tokens=1500,
                                     max_retries=1),
                         items(20, 20), now=NOW)
    assert run.tokens <= 1500 and run.judged - run.failed == 1
    assert run.judged + run.skipped_budget == 20


def test_a_run_interrupted_midway_keeps_its_verdicts_and_a_rerun_calls_for_the_rest(con):
    # the server answers the first 20 calls at once and holds the rest until the run is
    # interrupted, so the interrupt always comes with 4 calls (the concurrency) in flight
    interrupted = threading.Event()

    def held_after_20(request):
        if request.n >= 20:
            interrupted.wait(timeout=30)
        return words_judge(request)

    def stop_after_20(description, done, total):
        if done == 20:
            interrupted.set()
            raise KeyboardInterrupt

    with JudgeServer(reply=held_after_20) as server:
        # a held call must not time out and be sent again
        cfg = config(server, concurrency=4, timeout=60.0)
        with pytest.raises(KeyboardInterrupt):
            judge_many(con, cfg, items(50, 50), now=NOW, progress=stop_after_20)
        kept = calls_in(con)
        # the 4 calls in flight are written; a call may start in the instant between the
        # release and the stop, never more than one per slot
        assert 24 <= kept <= 28 and server.calls == kept
        rerun = judge_many(con, cfg, items(50, 50), now=NOW)
    assert (rerun.cached, rerun.calls) == (kept, 50 - kept)
    assert server.calls == 50 and calls_in(con) == 50


def test_a_second_ctrl_c_stops_waiting_for_calls_a_hung_server_holds(con, caplog):
    # Ctrl-C during a run waits for the calls in flight so that their verdicts are written;
    # against a server that holds them (here for up to 30 s; a hung one, for the timeout and
    # every retry: minutes) a second Ctrl-C went unheard until they came back
    released = threading.Event()

    def held(request):
        released.wait(timeout=30)
        return words_judge(request)

    def press_ctrl_c_twice(server):
        while server._in_flight < 2:
            if released.wait(timeout=0.01):
                return
        for _ in range(2):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            released.wait(timeout=0.5)

    with JudgeServer(reply=held) as server:
        presser = threading.Thread(target=press_ctrl_c_twice, args=(server,))
        presser.start()
        try:
            with caplog.at_level(logging.WARNING, logger="pipeline.judge"), \
                    pytest.raises(KeyboardInterrupt):
                judge_many(con, config(server, concurrency=2, timeout=60.0), items(4, 4),
                           now=NOW)
            # it stopped while the server still held both calls: nothing came back to write
            assert not released.is_set() and calls_in(con) == 0
        finally:
            released.set()
            presser.join()
    assert "Ctrl-C again to stop without them" in caplog.text



def test_dry_run_makes_no_call_and_estimates(con):
    with JudgeServer() as server:
        cfg = config(server)
        judge_many(con, cfg, items(10, 10), now=NOW)
        dry = judge_many(con, cfg, items(30, 30), now=NOW, dry_run=True)
    assert server.calls == 10 and calls_in(con) == 10
    assert (dry.dry_run, dry.cached, dry.calls, dry.judged) == (True, 10, 20, 0)
    assert dry.tokens > 20 * 50


def test_a_dry_run_estimates_what_the_budget_lets_a_run_make(con):
    # --dry-run counted every call, whatever --max-calls or --max-tokens: it said 30 calls
    # where the run, bounded, would make 12
    with JudgeServer() as server:
        cfg = config(server)
        one = judge_many(con, cfg, items(1, 1), now=NOW, dry_run=True).tokens
        for bound in ({"max_calls": 12}, {"max_tokens": one * 12 + one // 2}):
            dry = judge_many(con, config(server, **bound), items(30, 30), now=NOW,
                             dry_run=True)
            assert (dry.calls, dry.skipped_budget) == (12, 18), bound
            assert dry.tokens <= one * 12 + one // 2
        assert server.calls == 0
        real = judge_many(con, config(server, max_calls=12), items(30, 30), now=NOW)
    assert (real.calls, real.skipped_budget) == (12, 18)


def test_the_concurrency_limit_is_respected(con):
    with JudgeServer(latency=0.1) as server:
        run = judge_many(con, config(server, concurrency=3), items(15, 15), now=NOW)
    assert run.judged == 15 and server.max_in_flight == 3


def test_a_refused_key_is_one_clear_error(con):
    with JudgeServer(api_key="sk-other") as server:
        with pytest.raises(RecallwatchError, match="refused the API key .* OPENAI_API_KEY") \
                as caught:
            judge_many(con, config(server), items(5, 5), now=NOW)
    assert SECRET not in str(caught.value)


def test_from_env_reads_model_endpoint_and_key():
    env = {"RECALLWATCH_JUDGE_MODEL": "gpt-x", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "OPENAI_API_KEY": SECRET}
    cfg = JudgeConfig.from_env(env, lang="de", concurrency=4)
    assert (cfg.model, cfg.base_url, cfg.api_key, cfg.lang, cfg.concurrency) == (
        "gpt-x", "http://127.0.0.1:9/v1", SECRET, "de", 4)
    assert SECRET not in repr(cfg)
    with pytest.raises(RecallwatchError, match="RECALLWATCH_JUDGE_MODEL"):
        JudgeConfig.from_env({"OPENAI_API_KEY": SECRET})
    with pytest.raises(RecallwatchError, match="OPENAI_API_KEY"):
        JudgeConfig.from_env({"RECALLWATCH_JUDGE_MODEL": "gpt-x"})
    with pytest.raises(RecallwatchError, match="language 'es'"):
        JudgeConfig.from_env(env, lang="es")


@pytest.mark.parametrize("url", ["user:PASS-41c7@127.0.0.1:9/v1", "127.0.0.1:9/v1",
                                 "http://user:PASS-41c7@127.0.0.1:abc/v1",
                                 "http://127.0.0.1:99999/v1", "ftp://127.0.0.1/v1"])
def test_an_endpoint_the_client_cannot_use_is_one_sentence_that_shows_no_password(url):
    env = {"RECALLWATCH_JUDGE_MODEL": "gpt-x", "OPENAI_BASE_URL": url, "OPENAI_API_KEY": SECRET}
    with pytest.raises(RecallwatchError, match="must be an http:// or https:// URL") as refused:
        JudgeConfig.from_env(env)
    assert "PASS-41c7" not in str(refused.value) and SECRET not in str(refused.value)


@pytest.mark.parametrize("key", [SECRET + "\n", " " + SECRET, SECRET + "é", "sk-a\nb",
                                 "sk-a b", "sk-a\tb", "sk-a\x00b"])
def test_a_key_no_http_header_can_carry_is_one_sentence(key):
    env = {"RECALLWATCH_JUDGE_MODEL": "gpt-x", "OPENAI_API_KEY": key}
    with pytest.raises(RecallwatchError, match="OPENAI_API_KEY holds a space") as refused:
        JudgeConfig.from_env(env)
    assert SECRET not in str(refused.value)


def test_the_api_key_appears_in_no_log_output_or_table(con, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    faults = script(Fault("429", retry_after=0.05), Fault("500"), wrong_claims,
                    Fault("malformed"), Fault("malformed"))
    with JudgeServer(reply=faults, api_key=SECRET) as server:
        cfg = config(server)
        run = judge_many(con, cfg, items(6, 6) + [(CLAIMS, CONTEXTS)], now=NOW)
        judge_many(con, config(server, max_retries=0), [(["x"], ["y"])], now=NOW)
        print(run, cfg, json.dumps(server.log))
    assert all(entry["authorized"] for entry in server.log)
    out, err = capsys.readouterr()
    assert out and SECRET not in out + err
    assert caplog.records and SECRET not in caplog.text
    assert not any(SECRET in str(r.args) for r in caplog.records)
    for (table,) in con.sql("SELECT table_name FROM duckdb_tables()").fetchall():
        assert SECRET not in repr(con.sql(f'SELECT * FROM "{table}"').fetchall()), table
    assert SECRET not in repr([v for v in run.verdicts.values()])
