"""The retrieval simulation: who asks what and when, and what the retriever ranks for each
request. The story lives here: as the index grows, distractor chunks push gold chunks down the
ranking until the rebuild resets the count."""

from dataclasses import dataclass

import numpy as np

from pipeline.demo.catalogue import Golden, IndexTimeline
from pipeline.demo.shape import (
    CANDIDATES,
    DIFFICULTY_SIGMA,
    FRESH_DISTRACTOR_SHARE,
    MAX_GOLD_CHUNKS,
    MEAN_DISTRACTORS_AT_BUILD,
    MEAN_DISTRACTORS_PER_1000_ADDED,
    N_GOLDENS,
    SERVED_K,
    SESSION_GAP_SECONDS,
    SHARE_ACME,
    SHARE_AGENTIC,
    SHARE_NOVEL_QUERIES,
    SHARE_SESSION_GROUPS,
    SHARE_WITH_GOLD_ID,
)
from pipeline.demo.vocabulary import NOVEL_QUERIES

NOT_LISTED = 1_000_000  # the rank of a gold chunk that is not among the candidates


@dataclass(frozen=True)
class Requests:
    """Per request (all days, in write order) plus the second step of agentic requests."""

    day: np.ndarray
    seconds: np.ndarray  # into the UTC day
    golden: np.ndarray  # index into goldens, -1 for a novel query
    with_gold_id: np.ndarray
    session: np.ndarray  # number within the day, -1 when not in a session
    turn: np.ndarray
    acme: np.ndarray
    agentic: np.ndarray
    query_variant: np.ndarray  # how the question is mangled when it has no gold_id
    variant_draw: np.ndarray  # randomness for the mangling
    novel_query: np.ndarray
    ranked: np.ndarray  # (n, CANDIDATES) chunk numbers, best first
    scores: np.ndarray  # (n, CANDIDATES), descending
    main_fact_served: np.ndarray
    second_step_row: np.ndarray  # row in second_ranked for agentic requests, else -1
    second_ranked: np.ndarray
    second_scores: np.ndarray


@dataclass(frozen=True)
class _Corpus:
    """What the retriever ranks: each golden's gold chunks, and the chunks that are no one's."""

    gold_matrix: np.ndarray  # (N_GOLDENS, MAX_GOLD_CHUNKS) chunk numbers, -1 past the last
    difficulty: np.ndarray  # per gold chunk, lognormal with mean 1
    is_deleted: np.ndarray  # per gold chunk
    distractor_pool: np.ndarray  # every non-gold chunk number, ascending
    n_gold_chunks: int


def simulate_requests(
    rng: np.random.Generator, goldens: list[Golden], deleted: set[int], timeline: IndexTimeline,
    per_day: int,
) -> Requests:
    """Every request of every day: its time, session, tenant and question, and what the retriever
    ranked for it."""
    days = len(timeline.sizes)
    n = days * per_day
    day = np.repeat(np.arange(days), per_day)
    seconds, session, turn, acme = (
        np.concatenate(parts)
        for parts in zip(*[_day_sessions(rng, per_day) for _ in range(days)], strict=True)
    )

    # Popularity is mildly skewed: some questions are asked far more often than others.
    popularity = 1.0 / (rng.permutation(N_GOLDENS) + 20.0)
    golden = rng.choice(N_GOLDENS, size=n, p=popularity / popularity.sum())
    novel = rng.random(n) < SHARE_NOVEL_QUERIES
    golden[novel] = -1
    with_gold_id = (rng.random(n) < SHARE_WITH_GOLD_ID) & ~novel
    agentic = (rng.random(n) < SHARE_AGENTIC) & (day % 2 == 0)
    corpus = _corpus(rng, goldens, deleted, int(timeline.allocated[-1]))

    # The second step of an agentic request is one more retrieval for the same question.
    second = np.flatnonzero(agentic)
    sim_golden = np.concatenate([golden, golden[second]])
    sim_day = np.concatenate([day, day[second]])
    ranked, scores, gold_rank = _rank_candidates(rng, sim_golden, sim_day, corpus, timeline)
    second_step_row = np.full(n, -1)
    second_step_row[second] = np.arange(len(second))

    return Requests(
        day=day,
        seconds=seconds,
        golden=golden,
        with_gold_id=with_gold_id,
        session=session,
        turn=turn,
        acme=acme,
        agentic=agentic,
        query_variant=rng.integers(0, 7, size=n),
        variant_draw=rng.integers(0, 2**31, size=(n, 2)),
        novel_query=rng.integers(0, len(NOVEL_QUERIES), size=n),
        ranked=ranked[:n],
        scores=scores[:n],
        main_fact_served=(golden >= 0) & (gold_rank[:n, 0] <= SERVED_K),
        second_step_row=second_step_row,
        second_ranked=ranked[n:],
        second_scores=scores[n:],
    )


def _day_sessions(
    rng: np.random.Generator, per_day: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Seconds into the day, session number (-1: none), turn and tenant of each request."""
    is_session = rng.random(per_day) < SHARE_SESSION_GROUPS
    lengths = np.where(is_session, rng.integers(2, 5, size=per_day), 1)
    ends = np.cumsum(lengths)
    n_groups = int(np.searchsorted(ends, per_day)) + 1
    lengths = lengths[:n_groups]
    lengths[-1] -= ends[n_groups - 1] - per_day  # the day ends mid-session
    group = np.repeat(np.arange(n_groups), lengths)
    first_of_group = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    turn = np.arange(per_day) - first_of_group[group] + 1

    in_session = lengths[group] >= 2
    session_number = np.cumsum(lengths >= 2) - 1
    session = np.where(in_session, session_number[group], -1)

    # Leave room at the end of the day for the longest session's follow-up turns.
    latest_start = 86_400 - 3 * SESSION_GAP_SECONDS[1] - 1
    group_start = np.sort(rng.integers(0, latest_start, size=n_groups))
    gaps = rng.integers(SESSION_GAP_SECONDS[0], SESSION_GAP_SECONDS[1] + 1, size=per_day)
    gaps[turn == 1] = 0
    elapsed = np.cumsum(gaps)
    elapsed -= elapsed[first_of_group][group]
    seconds = group_start[group] + elapsed
    acme = (rng.random(n_groups) < SHARE_ACME)[group]
    return seconds, session, turn, acme


def _corpus(
    rng: np.random.Generator, goldens: list[Golden], deleted: set[int], n_allocated: int,
) -> _Corpus:
    gold_matrix = np.full((N_GOLDENS, MAX_GOLD_CHUNKS), -1, dtype=np.int64)
    for i, g in enumerate(goldens):
        gold_matrix[i, : len(g.chunk_numbers)] = g.chunk_numbers
    difficulty = rng.lognormal(-DIFFICULTY_SIGMA**2 / 2, DIFFICULTY_SIGMA, gold_matrix.shape)
    gold_numbers = np.sort(gold_matrix[gold_matrix > 0])
    all_numbers = np.arange(1, n_allocated + 1)
    return _Corpus(
        gold_matrix=gold_matrix,
        difficulty=difficulty,
        is_deleted=np.isin(gold_matrix, sorted(deleted)),
        distractor_pool=all_numbers[~np.isin(all_numbers, gold_numbers)],
        n_gold_chunks=len(gold_numbers),
    )


def _rank_candidates(
    rng: np.random.Generator, golden: np.ndarray, day: np.ndarray, corpus: _Corpus,
    timeline: IndexTimeline,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranked candidate lists (chunk numbers and scores) and each gold chunk's rank in them."""
    gold, gold_rank = _gold_ranks(rng, golden, day, corpus, timeline)
    ranked = np.full((len(golden), CANDIDATES), -1, dtype=np.int64)
    rows, slots = np.nonzero(gold_rank <= CANDIDATES)
    ranked[rows, gold_rank[rows, slots] - 1] = gold[rows, slots]
    _fill_with_distractors(rng, ranked, day, corpus, timeline)
    return ranked, _descending_scores(rng, len(golden)), gold_rank


def _gold_ranks(
    rng: np.random.Generator, golden: np.ndarray, day: np.ndarray, corpus: _Corpus,
    timeline: IndexTimeline,
) -> tuple[np.ndarray, np.ndarray]:
    """Each request's gold chunk numbers and their ranks (NOT_LISTED past the candidates): gold
    chunks sink as distractors accumulate since the build."""
    has_golden = golden >= 0
    row_golden = np.where(has_golden, golden, 0)
    gold = corpus.gold_matrix[row_golden]
    real_gold = (gold > 0) & has_golden[:, None]

    version = timeline.version_of_day[day]
    allocated = timeline.allocated
    added_thousands = (allocated[day] - allocated[timeline.build_day[day]]) / 1000.0
    base = np.array([MEAN_DISTRACTORS_AT_BUILD[v] for v in (0, 1)])[version]
    slope = np.array([MEAN_DISTRACTORS_PER_1000_ADDED[v] for v in (0, 1)])[version]
    mean_ahead = (base + slope * added_thousands)[:, None] * corpus.difficulty[row_golden]
    distractors_ahead = rng.geometric(1.0 / (1.0 + mean_ahead)) - 1
    distractors_ahead = np.where(real_gold, distractors_ahead, NOT_LISTED)
    # Gold chunks also outrank each other: the j-th best of them sits below j other gold
    # chunks, which keeps ranks distinct. Ties are broken at random.
    order = np.argsort(distractors_ahead + rng.random(gold.shape), axis=1)
    rank_in_order = (np.take_along_axis(distractors_ahead, order, axis=1)
                     + 1 + np.arange(MAX_GOLD_CHUNKS))
    gold_rank = np.empty_like(rank_in_order)
    np.put_along_axis(gold_rank, order, rank_in_order, axis=1)
    # A deleted chunk cannot be retrieved; the distractor behind it moves up into its slot.
    shown = real_gold & ~corpus.is_deleted[row_golden] & (gold_rank <= CANDIDATES)
    return gold, np.where(shown, gold_rank, NOT_LISTED)


def _fill_with_distractors(
    rng: np.random.Generator, ranked: np.ndarray, day: np.ndarray, corpus: _Corpus,
    timeline: IndexTimeline,
) -> None:
    """Fill the empty slots (-1) of `ranked` in place with distinct distractors.

    Distractors come from the non-gold chunks live on that day; a share of them from the chunks
    added since the build. Gold chunks all predate day 1, so the live non-gold chunks are a
    prefix of the pool.
    """
    live = timeline.allocated[day] - corpus.n_gold_chunks
    live_at_build = timeline.allocated[timeline.build_day[day]] - corpus.n_gold_chunks
    empty = ranked < 0
    while empty.any():  # redraw the rare repeats until every list names distinct chunks
        rows = np.nonzero(empty)[0]
        fresh = rng.random(len(rows)) < FRESH_DISTRACTOR_SHARE
        fresh &= live[rows] > live_at_build[rows]
        low = np.where(fresh, live_at_build[rows], 0)
        picks = low + (rng.random(len(rows)) * (live[rows] - low)).astype(np.int64)
        ranked[empty] = corpus.distractor_pool[picks]
        empty = _repeated_in_row(ranked)


def _repeated_in_row(ranked: np.ndarray) -> np.ndarray:
    """Marks every later occurrence of a chunk already listed higher in the same row."""
    order = np.argsort(ranked, axis=1, kind="stable")
    ordered = np.take_along_axis(ranked, order, axis=1)
    repeat = np.zeros(ranked.shape, dtype=bool)
    repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    marks = np.empty_like(repeat)
    np.put_along_axis(marks, order, repeat, axis=1)
    return marks


def _descending_scores(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, CANDIDATES) retriever scores, strictly falling down each list."""
    top = rng.uniform(0.78, 0.93, size=n)
    drops = rng.uniform(0.004, 0.035, size=(n, CANDIDATES - 1))
    return np.round(top[:, None] - np.concatenate([np.zeros((n, 1)), drops.cumsum(1)], 1), 4)
