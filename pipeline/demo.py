"""Generate the demo world that `recallwatch demo` ingests and scores: a seeded, fully synthetic
bank-support RAG deployment written to disk in the public data contract (DESIGN.md §2). It holds
a gold set of ~300 goldens (10 of them without evidence), index manifests for two index versions
(idx-v1, rebuilt as idx-v2 with better embeddings 20 days in), and 30 days of request logs as
hive partitions alternating JSON Lines and Parquet. The story is built into the retrieval
simulation: as the index grows, distractor chunks push gold chunks down the ranking, so recall@5
falls from ~0.87 to ~0.6, jumps back at the rebuild and then drifts down slowly again. Six gold
chunks are missing from the index, ~30% of requests carry no gold_id and must join by normalized
question text, ~2% ask questions no golden covers, ~1% are agentic (two retrieval steps) and five
records are deliberately malformed so quarantine has something to show. The same seed writes
byte-identical files; nothing reads the clock.
"""

import hashlib
import io
import json
import unicodedata
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

# --- shape of the world -------------------------------------------------------------------

N_GOLDENS = 300
N_GOLDENS_WITHOUT_EVIDENCE = 10
N_DELETED_GOLD_CHUNKS = 6
MAX_GOLD_CHUNKS = 4
# Probabilities of a golden needing 1, 2, 3 or 4 chunks.
GOLD_CHUNK_COUNT_WEIGHTS = (0.30, 0.35, 0.20, 0.15)

INITIAL_INDEX_SIZE = 100_000
DAILY_GROWTH_RANGE = (2_700, 3_300)  # chunks added per day, inclusive bounds
REBUILD_AFTER_DAYS = 20
INDEX_VERSIONS = ("idx-v1", "idx-v2")

CANDIDATES = 10  # ranked candidates logged per retrieval
SERVED_K = 5  # of which the generator is served the top k

# Retrieval model: the number of distractors that outrank a gold chunk is geometric with mean
# (base + per_1000_added * chunks added since the version's build, in thousands) x the chunk's
# own difficulty. idx-v2's better embeddings degrade at half the rate. Tuned so mean
# recall@5 reads ~0.87 on day 1, ~0.6 on day 20, ~0.87 after the rebuild, ~0.8 at day 30.
MEAN_DISTRACTORS_AT_BUILD = {0: 1.1, 1: 1.1}
MEAN_DISTRACTORS_PER_1000_ADDED = {0: 0.056, 1: 0.025}
# Per gold chunk difficulty (lognormal, mean 1): some goldens are consistently hard to find.
DIFFICULTY_SIGMA = 0.5
# Share of distractors drawn from chunks added since the version's build: fresh content is
# what crowds out the old gold chunks.
FRESH_DISTRACTOR_SHARE = 0.4

SHARE_WITH_GOLD_ID = 0.71  # of requests that ask a golden's question (~70% of all requests)
SHARE_NOVEL_QUERIES = 0.02
SHARE_AGENTIC = 0.01  # of requests on JSON Lines days
SHARE_ACME = 0.6
# A group is a single request or a session of 2-4 turns; 1 group in 8 being a session puts
# ~30% of requests in sessions.
SHARE_SESSION_GROUPS = 0.125
SESSION_GAP_SECONDS = (15, 180)
RETRIEVER = "hybrid-v2"
N_BAD_RECORDS = 5

NO_ANSWER_RESPONSE = "Sorry, I could not find that in our documents."

# --- vocabulary ---------------------------------------------------------------------------

PRODUCTS = (
    "everyday checking account", "premier checking account", "student account",
    "basic savings account", "high-yield savings account", "small business account",
    "joint account", "youth savings account", "classic credit card", "platinum credit card",
    "debit card", "travel card",
)
SEGMENTS = ("urban", "semi-urban", "rural", "metro")
# (attribute, kind of value)
ATTRIBUTES = (
    ("monthly fee", "fee"), ("minimum balance", "amount"), ("overdraft limit", "amount"),
    ("interest rate", "rate"), ("daily ATM withdrawal limit", "amount"),
    ("card replacement fee", "fee"), ("foreign transaction fee", "rate"),
    ("late payment fee", "fee"), ("international wire transfer fee", "fee"),
    ("opening deposit", "amount"), ("cash deposit fee", "fee"), ("paper statement fee", "fee"),
)
QUESTION_TEMPLATES = (
    "What is the {attr} for the {product} at {seg} branches?",
    "How much is the {attr} on {a_product} at {a_seg} branch?",
    "What {attr} applies to {a_product} opened at {a_seg} branch?",
    "At {seg} branches, what is the {attr} of the {product}?",
    "Can you tell me the {attr} for {a_product} held at {a_seg} branch?",
)
APP_MENUS = ("Accounts > Fees", "Cards > Limits", "Help > Pricing", "Settings > Statements",
             "Accounts > Details")
# The novel queries share the domain but not the phrasing of any golden question.
NOVEL_QUERIES = tuple(
    f"{opening} {task}?"
    for opening in ("How do I", "Can I", "Where can I", "Is it possible to")
    for task in (
        "reset my online banking password", "open a joint account online",
        "change my registered phone number", "close an account I no longer use",
        "add a beneficiary from abroad", "get a bank reference letter",
        "freeze my card temporarily", "dispute a card transaction",
        "order a new cheque book", "switch my salary to this bank",
    )
)
# Distractor vocabulary is deliberately unlike the gold passages, so the passages route
# (string similarity) does not mistake a distractor for a gold chunk.
CITIES = ("Lakeview", "Brookfield", "Hillcrest", "Riverside", "Oakmont", "Pinegate",
          "Maple Ridge", "Stonebridge", "Fairhaven", "Elmwood", "Westport", "Cedar Falls")
BRANCH_EVENTS = ("closes early", "opens late", "hosts a community day", "has extended hours",
                 "is shut for maintenance", "runs a budgeting workshop")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
TEAMS = ("Compliance", "Branch operations", "Customer support", "Mortgage desk", "Treasury",
         "IT security")
TRAININGS = ("anti-fraud", "privacy", "accessibility", "complaints handling", "data retention")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
TASKS = ("update your mailing address", "order a cheque book", "set up a standing order",
         "download tax documents", "register a new device", "change your PIN",
         "report a lost phone")
CHANNELS = ("mobile app", "web portal", "phone line", "branch kiosk")

PARQUET_COMPRESSION = "zstd"
RANKED_CHUNK = pa.struct([
    ("chunk_id", pa.string()), ("rank", pa.int32()), ("score", pa.float64()),
    ("text", pa.string()),
])
LOG_SCHEMA = pa.schema([
    ("request_id", pa.string()), ("timestamp", pa.string()), ("query", pa.string()),
    ("gold_id", pa.string()), ("index_version", pa.string()), ("index_size", pa.int64()),
    ("k", pa.int32()), ("retrieved", pa.list_(RANKED_CHUNK)),
    ("retrieval_steps", pa.list_(pa.list_(RANKED_CHUNK))), ("session_id", pa.string()),
    ("turn", pa.int32()), ("response", pa.string()),
    ("tags", pa.struct([("tenant", pa.string()), ("retriever", pa.string())])),
])


@dataclass(frozen=True)
class DemoWorld:
    """Where the demo world was written and what it contains."""

    root: Path
    logs_dir: Path
    gold_path: Path
    gold_version: str
    index_manifests: dict[str, Path]  # index_version -> manifest Parquet file
    rebuild_day: date  # first day served by idx-v2
    start: date
    end: date  # exclusive
    n_requests: int  # log records written, bad ones included
    n_bad_records: int
    deleted_chunk_ids: tuple[str, ...]  # gold chunks missing from every index version


@dataclass(frozen=True)
class _Golden:
    gold_id: str
    question: str
    reference: str | None
    chunk_numbers: tuple[int, ...]
    passages: tuple[str, ...]
    answer: str  # what the assistant says when it found the main fact


def generate_demo_world(
    out_dir: Path,
    *,
    seed: int = 7,
    days: int = 30,
    start: date = date(2026, 10, 1),
    requests_per_day: int = 1800,
) -> DemoWorld:
    """Write gold set, index manifests and request logs under `out_dir`; same seed, same bytes."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}.")
    if requests_per_day < 10:
        raise ValueError(f"requests_per_day must be at least 10, got {requests_per_day}.")
    out_dir = Path(out_dir)
    _remove_previous_world(out_dir)
    rng = np.random.default_rng(seed)

    index_sizes = _index_sizes(rng, days)
    # Chunk numbers are handed out in order of addition; the deleted gold chunks keep their
    # numbers, so chunks 1..allocated[d] minus the deleted ones are the index on day d.
    allocated = index_sizes + N_DELETED_GOLD_CHUNKS
    version_of_day = (np.arange(days) >= REBUILD_AFTER_DAYS).astype(np.int64)
    build_day = np.where(version_of_day == 0, 0, REBUILD_AFTER_DAYS)

    goldens = _make_goldens(rng, allocated[0])
    deleted = _choose_deleted_chunks(rng, goldens)
    chunk_ids, texts, hashes = _chunk_catalogue(goldens, int(allocated[-1]))

    logs = _simulate_requests(
        rng, goldens, deleted, days, requests_per_day, allocated, version_of_day, build_day,
    )

    gold_version = f"gold-{start:%Y-%m}"
    gold_path = out_dir / "gold" / "gold.jsonl"
    _write_gold(gold_path, goldens, chunk_ids)

    manifests = {}
    for version in sorted(set(version_of_day.tolist())):
        last_day = int(np.flatnonzero(version_of_day == version)[-1])
        name = INDEX_VERSIONS[version]
        manifests[name] = out_dir / "index" / f"{name}.parquet"
        _write_manifest(manifests[name], name, int(allocated[last_day]), deleted, chunk_ids,
                        texts, hashes)

    logs_dir = out_dir / "logs"
    n_bad = _write_logs(rng, logs_dir, logs, start, days, requests_per_day, index_sizes,
                        version_of_day, goldens, chunk_ids, texts)
    return DemoWorld(
        root=out_dir,
        logs_dir=logs_dir,
        gold_path=gold_path,
        gold_version=gold_version,
        index_manifests=manifests,
        rebuild_day=start + timedelta(days=REBUILD_AFTER_DAYS),
        start=start,
        end=start + timedelta(days=days),
        n_requests=days * requests_per_day + n_bad,
        n_bad_records=n_bad,
        deleted_chunk_ids=tuple(f"c-{n:06d}" for n in sorted(deleted)),
    )


def _remove_previous_world(out_dir: Path) -> None:
    """Delete the files an earlier demo world left here, and nothing else.

    A partition left over from a longer or differently dated world would otherwise be ingested
    with the new one.
    """
    stale = [out_dir / "gold" / "gold.jsonl"]
    stale += [out_dir / "index" / f"{version}.parquet" for version in INDEX_VERSIONS]
    stale += sorted(out_dir.glob("logs/dt=*/requests.jsonl"))
    stale += sorted(out_dir.glob("logs/dt=*/requests.parquet"))
    for path in stale:
        path.unlink(missing_ok=True)
    for partition in sorted(out_dir.glob("logs/dt=*")):
        if partition.is_dir() and not any(partition.iterdir()):
            partition.rmdir()


# --- gold set and index -------------------------------------------------------------------

def _index_sizes(rng: np.random.Generator, days: int) -> np.ndarray:
    """Live chunks per day: the index keeps growing straight through the rebuild."""
    growth = rng.integers(DAILY_GROWTH_RANGE[0], DAILY_GROWTH_RANGE[1] + 1, size=days)
    growth[0] = 0
    return INITIAL_INDEX_SIZE + np.cumsum(growth)


def _with_article(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _value_text(rng: np.random.Generator, kind: str) -> str:
    if kind == "fee":
        return f"${int(rng.integers(1, 41))}"
    if kind == "rate":
        return f"{rng.integers(5, 450) / 100:.2f}%"
    return f"${int(rng.integers(2, 200)) * 50:,}"


def _make_goldens(rng: np.random.Generator, chunks_on_day_one: int) -> list[_Golden]:
    combos = [(p, s, a) for p in range(len(PRODUCTS)) for s in range(len(SEGMENTS))
              for a in range(len(ATTRIBUTES))]
    picked = rng.choice(len(combos), size=N_GOLDENS, replace=False)
    without_evidence = set(rng.choice(N_GOLDENS, size=N_GOLDENS_WITHOUT_EVIDENCE,
                                      replace=False).tolist())
    n_chunks = rng.choice(np.arange(1, MAX_GOLD_CHUNKS + 1), size=N_GOLDENS,
                          p=GOLD_CHUNK_COUNT_WEIGHTS)
    n_chunks[sorted(without_evidence)] = 0
    # Gold chunks were all indexed before day 1 and are never shared between goldens.
    chunk_numbers = rng.choice(chunks_on_day_one, size=int(n_chunks.sum()), replace=False) + 1
    template_of = rng.integers(0, len(QUESTION_TEMPLATES), size=N_GOLDENS)

    goldens, used = [], 0
    for i, combo in enumerate(picked):
        p, s, a = combos[combo]
        product, seg, (attr, kind) = PRODUCTS[p], SEGMENTS[s], ATTRIBUTES[a]
        question = QUESTION_TEMPLATES[template_of[i]].format(
            attr=attr, product=product, seg=seg, a_product=_with_article(product),
            a_seg=_with_article(seg))
        value = _value_text(rng, kind)
        answer = f"The {attr} for the {product} at {seg} branches is {value}."
        n = int(n_chunks[i])
        # Each extra chunk states one more fact; every passage names product, segment and
        # attribute, so no two chunks share a text (content hashes stay unique).
        passages = [f"{product.capitalize()}, {seg} branches: the {attr} is {value}."]
        claims = [answer]
        notice, months = int(rng.integers(2, 9)) * 7, int(rng.choice([3, 6, 12]))
        menu = APP_MENUS[int(rng.integers(len(APP_MENUS)))]
        extra = [
            (f"Changes to the {attr} need {notice} days' notice ({seg} {product}).",
             f"Changes to this {attr} require {notice} days' notice."),
            (f"Reviewed every {months} months: {attr}, {product}, {seg} branches.",
             f"The {attr} is reviewed every {months} months."),
            (f"In the app, {menu} shows the {attr} for {seg} {product} holders.",
             f"Customers can find it in the app under {menu}."),
        ]
        for j in rng.permutation(len(extra))[: max(n - 1, 0)]:
            passages.append(extra[j][0])
            claims.append(extra[j][1])
        goldens.append(_Golden(
            gold_id=f"g-{i + 1:03d}",
            question=question,
            reference=" ".join(claims) if n else None,
            chunk_numbers=tuple(int(c) for c in chunk_numbers[used:used + n]),
            passages=tuple(passages) if n else (),
            answer=answer,
        ))
        used += n
    assert len({_normalize(g.question) for g in goldens}) == N_GOLDENS
    assert not {_normalize(q) for q in NOVEL_QUERIES} & {_normalize(g.question) for g in goldens}
    return goldens


def _choose_deleted_chunks(rng: np.random.Generator, goldens: list[_Golden]) -> set[int]:
    """One gold chunk each from six different goldens with evidence."""
    with_evidence = [g for g in goldens if g.chunk_numbers]
    victims = rng.choice(len(with_evidence), size=N_DELETED_GOLD_CHUNKS, replace=False)
    return {int(rng.choice(with_evidence[v].chunk_numbers)) for v in victims}


def _distractor_text(n: int) -> str:
    # Cheap, deterministic and unique per chunk number; the multiplier decorrelates the words.
    h = (n * 2654435761) % 4294967296
    form = h % 3
    if form == 0:
        return (f"Notice {n}: the {CITIES[(h >> 3) % 12]} branch {BRANCH_EVENTS[(h >> 8) % 6]} "
                f"on {WEEKDAYS[(h >> 12) % 6]}s.")
    if form == 1:
        return (f"Memo {n}: {TEAMS[(h >> 3) % 6]} staff finish {TRAININGS[(h >> 8) % 5]} "
                f"training by {MONTHS[(h >> 12) % 12]}.")
    return f"Article {n}: how to {TASKS[(h >> 3) % 7]} with the {CHANNELS[(h >> 8) % 4]}."


def _chunk_catalogue(
    goldens: list[_Golden], n_chunks: int,
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """chunk_id, text and content hash per chunk number (position 0 is an unused filler)."""
    texts = [""] + [_distractor_text(n) for n in range(1, n_chunks + 1)]
    for g in goldens:
        for number, passage in zip(g.chunk_numbers, g.passages, strict=True):
            texts[number] = passage
    hashes = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
    chunk_ids = [f"c-{n:06d}" for n in range(n_chunks + 1)]
    return pa.array(chunk_ids), pa.array(texts), pa.array(hashes)


def _write_gold(path: Path, goldens: list[_Golden], chunk_ids: pa.Array) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for g in goldens:
        lines.append(json.dumps({
            "gold_id": g.gold_id,
            "question": g.question,
            "reference": g.reference,
            "gold_chunk_ids": [chunk_ids[n].as_py() for n in g.chunk_numbers],
            "gold_passages": list(g.passages),
        }))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_manifest(path: Path, version: str, n_allocated: int, deleted: set[int],
                    chunk_ids: pa.Array, texts: pa.Array, hashes: pa.Array) -> None:
    numbers = np.arange(1, n_allocated + 1)
    numbers = numbers[~np.isin(numbers, sorted(deleted))]
    table = pa.table({
        "index_version": pa.array(np.full(len(numbers), version, dtype=object), pa.string()),
        "chunk_id": chunk_ids.take(numbers),
        "content_hash": hashes.take(numbers),
        "text": texts.take(numbers),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression=PARQUET_COMPRESSION)


# --- requests -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Logs:
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


def _simulate_requests(
    rng: np.random.Generator, goldens: list[_Golden], deleted: set[int], days: int,
    per_day: int, allocated: np.ndarray, version_of_day: np.ndarray, build_day: np.ndarray,
) -> _Logs:
    n = days * per_day
    day = np.repeat(np.arange(days), per_day)

    seconds, session, turn, acme = [], [], [], []
    for _ in range(days):
        s, se, t, a = _day_sessions(rng, per_day)
        seconds.append(s)
        session.append(se)
        turn.append(t)
        acme.append(a)

    # Popularity is mildly skewed: some questions are asked far more often than others.
    popularity = 1.0 / (rng.permutation(N_GOLDENS) + 20.0)
    golden = rng.choice(N_GOLDENS, size=n, p=popularity / popularity.sum())
    novel = rng.random(n) < SHARE_NOVEL_QUERIES
    golden[novel] = -1
    with_gold_id = (rng.random(n) < SHARE_WITH_GOLD_ID) & ~novel
    agentic = (rng.random(n) < SHARE_AGENTIC) & (day % 2 == 0)

    gold_matrix = np.full((N_GOLDENS, MAX_GOLD_CHUNKS), -1, dtype=np.int64)
    for i, g in enumerate(goldens):
        gold_matrix[i, : len(g.chunk_numbers)] = g.chunk_numbers
    difficulty = rng.lognormal(-DIFFICULTY_SIGMA**2 / 2, DIFFICULTY_SIGMA, gold_matrix.shape)
    gold_numbers = np.sort(gold_matrix[gold_matrix > 0])
    all_numbers = np.arange(1, int(allocated[-1]) + 1)
    distractor_pool = all_numbers[~np.isin(all_numbers, gold_numbers)]
    is_deleted = np.isin(gold_matrix, sorted(deleted))

    # The second step of an agentic request is one more retrieval for the same question.
    second = np.flatnonzero(agentic)
    sim_golden = np.concatenate([golden, golden[second]])
    sim_day = np.concatenate([day, day[second]])
    ranked, scores, gold_rank = _rank_candidates(
        rng, sim_golden, sim_day, gold_matrix, difficulty, is_deleted, distractor_pool,
        len(gold_numbers), allocated, version_of_day, build_day,
    )
    second_step_row = np.full(n, -1)
    second_step_row[second] = np.arange(len(second))

    return _Logs(
        day=day,
        seconds=np.concatenate(seconds),
        golden=golden,
        with_gold_id=with_gold_id,
        session=np.concatenate(session),
        turn=np.concatenate(turn),
        acme=np.concatenate(acme),
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


def _rank_candidates(
    rng: np.random.Generator, golden: np.ndarray, day: np.ndarray, gold_matrix: np.ndarray,
    difficulty: np.ndarray, is_deleted: np.ndarray, distractor_pool: np.ndarray,
    n_gold_chunks: int, allocated: np.ndarray, version_of_day: np.ndarray,
    build_day: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranked candidate lists: gold chunks sink as distractors accumulate since the build."""
    n = len(golden)
    has_golden = golden >= 0
    row_golden = np.where(has_golden, golden, 0)
    gold = gold_matrix[row_golden]
    real_gold = (gold > 0) & has_golden[:, None]

    version = version_of_day[day]
    added_thousands = (allocated[day] - allocated[build_day[day]]) / 1000.0
    base = np.array([MEAN_DISTRACTORS_AT_BUILD[v] for v in (0, 1)])[version]
    slope = np.array([MEAN_DISTRACTORS_PER_1000_ADDED[v] for v in (0, 1)])[version]
    mean_ahead = (base + slope * added_thousands)[:, None] * difficulty[row_golden]
    distractors_ahead = rng.geometric(1.0 / (1.0 + mean_ahead)) - 1
    distractors_ahead = np.where(real_gold, distractors_ahead, 1_000_000)
    # Gold chunks also outrank each other: the j-th best of them sits below j other gold
    # chunks, which keeps ranks distinct. Ties are broken at random.
    order = np.argsort(distractors_ahead + rng.random(gold.shape), axis=1)
    rank_in_order = (np.take_along_axis(distractors_ahead, order, axis=1)
                     + 1 + np.arange(MAX_GOLD_CHUNKS))
    gold_rank = np.empty_like(rank_in_order)
    np.put_along_axis(gold_rank, order, rank_in_order, axis=1)
    # A deleted chunk cannot be retrieved; the distractor behind it moves up into its slot.
    shown = real_gold & ~is_deleted[row_golden] & (gold_rank <= CANDIDATES)
    gold_rank = np.where(shown, gold_rank, 1_000_000)

    ranked = np.full((n, CANDIDATES), -1, dtype=np.int64)
    rows, slots = np.nonzero(shown)
    ranked[rows, gold_rank[rows, slots] - 1] = gold[rows, slots]

    # Distractors come from the non-gold chunks live on that day; a share of them from the
    # chunks added since the build. Gold chunks all predate day 1, so the live non-gold chunks
    # are a prefix of the pool.
    live = allocated[day] - n_gold_chunks
    live_at_build = allocated[build_day[day]] - n_gold_chunks
    empty = ranked < 0
    while empty.any():  # redraw the rare repeats until every list names distinct chunks
        rows = np.nonzero(empty)[0]
        fresh = rng.random(len(rows)) < FRESH_DISTRACTOR_SHARE
        fresh &= live[rows] > live_at_build[rows]
        low = np.where(fresh, live_at_build[rows], 0)
        picks = low + (rng.random(len(rows)) * (live[rows] - low)).astype(np.int64)
        ranked[empty] = distractor_pool[picks]
        empty = _repeated_in_row(ranked)

    top = rng.uniform(0.78, 0.93, size=n)
    drops = rng.uniform(0.004, 0.035, size=(n, CANDIDATES - 1))
    scores = np.round(top[:, None] - np.concatenate([np.zeros((n, 1)), drops.cumsum(1)], 1), 4)
    return ranked, scores, gold_rank


def _repeated_in_row(ranked: np.ndarray) -> np.ndarray:
    """Marks every later occurrence of a chunk already listed higher in the same row."""
    order = np.argsort(ranked, axis=1, kind="stable")
    ordered = np.take_along_axis(ranked, order, axis=1)
    repeat = np.zeros(ranked.shape, dtype=bool)
    repeat[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    marks = np.empty_like(repeat)
    np.put_along_axis(marks, order, repeat, axis=1)
    return marks


# --- writing logs -------------------------------------------------------------------------

def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _mangled(question: str, variant: int, draw: np.ndarray) -> str:
    """The question as a user typed it: same text after NFKC, casefold and whitespace collapse."""
    words = question.split(" ")
    i, j = int(draw[0]) % len(words), int(draw[1]) % len(words)
    if variant == 1:
        words[i] = words[i].upper()
        words[j] = words[j].upper()
    elif variant == 2:
        return question.lower()
    elif variant == 3:
        words[i % (len(words) - 1)] += " "  # double and triple spaces between words
        words[j % (len(words) - 1)] += "  "
    elif variant == 4:
        words[i] = _full_width(words[i])
        words[-1] = words[-1][:-1] + "\uff1f"  # full-width question mark
    elif variant == 5:
        # A no-break space between two words, which NFKC turns into a plain one.
        gap = i % (len(words) - 1)
        words[gap : gap + 2] = [words[gap] + "\u00a0" + words[gap + 1]]
    elif variant == 6:
        return "  ".join(words).upper()
    return " ".join(words)


def _ranked_values(ranked: np.ndarray, scores: np.ndarray, chunk_ids: pa.Array,
                   texts: pa.Array) -> pa.StructArray:
    flat = ranked.reshape(-1)
    ranks = np.tile(np.arange(1, ranked.shape[1] + 1, dtype=np.int32), ranked.shape[0])
    return pa.StructArray.from_arrays(
        [chunk_ids.take(flat), pa.array(ranks), pa.array(scores.reshape(-1)), texts.take(flat)],
        fields=list(RANKED_CHUNK),
    )


def _list_array(values: pa.Array, lengths: np.ndarray, present: np.ndarray) -> pa.ListArray:
    offsets = np.concatenate([[0], np.cumsum(np.where(present, lengths, 0))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(~present))


def _day_table(logs: _Logs, rows: np.ndarray, day_label: str, timestamps: list[str],
               index_size: int, version: str, goldens: list[_Golden], chunk_ids: pa.Array,
               texts: pa.Array) -> pa.Table:
    n = len(rows)
    queries, gold_ids, responses = [], [], []
    for r in rows:
        g = logs.golden[r]
        if g < 0:
            queries.append(NOVEL_QUERIES[logs.novel_query[r]])
            gold_ids.append(None)
            responses.append(NO_ANSWER_RESPONSE)
            continue
        golden = goldens[g]
        if logs.with_gold_id[r]:
            queries.append(golden.question)
            gold_ids.append(golden.gold_id)
        else:
            queries.append(_mangled(golden.question, int(logs.query_variant[r]),
                                    logs.variant_draw[r]))
            gold_ids.append(None)
        responses.append(golden.answer if logs.main_fact_served[r] else NO_ANSWER_RESPONSE)

    plain = ~logs.agentic[rows]
    plain_rows = rows[plain]
    retrieved = _list_array(
        _ranked_values(logs.ranked[plain_rows], logs.scores[plain_rows], chunk_ids, texts),
        np.full(n, CANDIDATES), plain,
    )
    agentic_rows = rows[~plain]
    second = logs.second_step_row[agentic_rows]
    both_steps = np.stack([logs.ranked[agentic_rows], logs.second_ranked[second]], axis=1)
    both_scores = np.stack([logs.scores[agentic_rows], logs.second_scores[second]], axis=1)
    steps = _list_array(
        _ranked_values(both_steps.reshape(-1, CANDIDATES), both_scores.reshape(-1, CANDIDATES),
                       chunk_ids, texts),
        np.full(2 * len(agentic_rows), CANDIDATES), np.ones(2 * len(agentic_rows), bool),
    )
    retrieval_steps = _list_array(steps, np.full(n, 2), ~plain)

    numbers = np.arange(1, n + 1)
    session = logs.session[rows]
    return pa.table([
        pa.array([f"r-{day_label}-{i:05d}" for i in numbers]),
        pa.array(timestamps),
        pa.array(queries),
        pa.array(gold_ids, pa.string()),
        pa.array([version] * n),
        pa.array(np.full(n, index_size, dtype=np.int64)),
        pa.array(np.full(n, SERVED_K, dtype=np.int32)),
        retrieved,
        retrieval_steps,
        pa.array([f"s-{day_label}-{s:04d}" if s >= 0 else None for s in session], pa.string()),
        pa.array(logs.turn[rows].astype(np.int32)),
        pa.array(responses),
        pa.StructArray.from_arrays(
            [pa.array(np.where(logs.acme[rows], "acme", "globex")), pa.array([RETRIEVER] * n)],
            fields=list(LOG_SCHEMA.field("tags").type),
        ),
    ], schema=LOG_SCHEMA)


def _bad_records(template: dict, day_label: str, first_number: int, kinds: list[int]) -> list:
    """The deliberately broken lines: each fails validation for one stated reason."""
    lines = []
    for offset, kind in enumerate(kinds):
        record = json.loads(json.dumps(template))
        record["request_id"] = f"r-{day_label}-{first_number + offset:05d}"
        if kind == 0:  # a write cut short: invalid JSON
            text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
            lines.append(text[: len(text) // 2])
            continue
        if kind == 1:
            del record["timestamp"]
        elif kind == 2:
            record["timestamp"] = "yesterday-ish"
        elif kind == 3:
            record["retrieved"] = ",".join(c["chunk_id"] for c in record["retrieved"])
        else:
            record["retrieved"][2]["chunk_id"] = None
        lines.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
    return lines


def _write_logs(rng: np.random.Generator, logs_dir: Path, logs: _Logs, start: date, days: int,
                per_day: int, index_sizes: np.ndarray, version_of_day: np.ndarray,
                goldens: list[_Golden], chunk_ids: pa.Array, texts: pa.Array) -> int:
    """One hive partition per day: JSON Lines on even days, Parquet on odd ones."""
    json_days = list(range(0, days, 2))
    # Spread the bad records over the JSON Lines days after the first one when there are any.
    bad_days = [json_days[min(i + 1, len(json_days) - 1)] for i in range(N_BAD_RECORDS)]
    for d in range(days):
        day = start + timedelta(days=d)
        day_label = f"{day:%Y%m%d}"
        rows = np.arange(d * per_day, (d + 1) * per_day)
        instants = (np.datetime64(day.isoformat(), "s")
                    + logs.seconds[rows].astype("timedelta64[s]"))
        timestamps = [t + "Z" for t in np.datetime_as_string(instants, unit="s").tolist()]
        table = _day_table(logs, rows, day_label, timestamps, int(index_sizes[d]),
                           INDEX_VERSIONS[version_of_day[d]], goldens, chunk_ids, texts)
        partition = logs_dir / f"dt={day.isoformat()}"
        partition.mkdir(parents=True, exist_ok=True)
        if d % 2:
            pq.write_table(table, partition / "requests.parquet", compression=PARQUET_COMPRESSION)
            continue
        buffer = io.BytesIO()
        pl.from_arrow(table).write_ndjson(buffer)
        # Producers that have no gold_id omit the key; JSON escaping keeps this pattern out of
        # string values.
        lines = buffer.getvalue().replace(b',"gold_id":null', b"").decode().splitlines()
        kinds = [k for k, bad_day in enumerate(bad_days) if bad_day == d]
        if kinds:
            template = next(json.loads(line) for line in lines if '"retrieved":[' in line)
            bad = _bad_records(template, day_label, per_day + 1, kinds)
            for line in bad:
                lines.insert(int(rng.integers(0, len(lines) + 1)), line)
        (partition / "requests.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return N_BAD_RECORDS
