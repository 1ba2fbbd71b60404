"""What the demo deployment holds before any request arrives: the index growing day by day, the
gold set with its gold chunks, the gold chunks deleted from the index, and the text, ID and
content hash of every chunk ever indexed."""

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline.demo.shape import (
    DAILY_GROWTH_RANGE,
    GOLD_CHUNK_COUNT_WEIGHTS,
    INITIAL_INDEX_SIZE,
    MAX_GOLD_CHUNKS,
    N_DELETED_GOLD_CHUNKS,
    N_GOLDENS,
    N_GOLDENS_WITHOUT_EVIDENCE,
    REBUILD_AFTER_DAYS,
)
from pipeline.demo.vocabulary import (
    APP_MENUS,
    ATTRIBUTES,
    BRANCH_EVENTS,
    CHANNELS,
    CITIES,
    MONTHS,
    NOVEL_QUERIES,
    PRODUCTS,
    QUESTION_TEMPLATES,
    SEGMENTS,
    TASKS,
    TEAMS,
    TRAININGS,
    WEEKDAYS,
)
from pipeline.warehouse import normalize_text


@dataclass(frozen=True)
class IndexTimeline:
    """Per day of the world, how big the index is and which version serves it."""

    sizes: np.ndarray  # live chunks
    # Chunk numbers are handed out in order of addition; the deleted gold chunks keep their
    # numbers, so chunks 1..allocated[d] minus the deleted ones are the index on day d.
    allocated: np.ndarray
    version_of_day: np.ndarray  # 0 for idx-v1, 1 for idx-v2
    build_day: np.ndarray  # the day that version was built


@dataclass(frozen=True)
class Golden:
    gold_id: str
    question: str
    reference: str | None
    claims: tuple[str, ...]  # the reference's sentences, one claim each (the claims route)
    chunk_numbers: tuple[int, ...]
    passages: tuple[str, ...]  # the texts of its gold chunks
    gold_passages: tuple[str, ...]  # the same facts as the gold set words them
    answer: str  # what the assistant says when it found the main fact


@dataclass(frozen=True)
class Chunks:
    """chunk_id, text and content hash by chunk number (position 0 is an unused filler)."""

    ids: pa.Array
    texts: pa.Array
    hashes: pa.Array


def index_timeline(rng: np.random.Generator, days: int) -> IndexTimeline:
    """The index keeps growing straight through the rebuild."""
    growth = rng.integers(DAILY_GROWTH_RANGE[0], DAILY_GROWTH_RANGE[1] + 1, size=days)
    growth[0] = 0
    sizes = INITIAL_INDEX_SIZE + np.cumsum(growth)
    version_of_day = (np.arange(days) >= REBUILD_AFTER_DAYS).astype(np.int64)
    return IndexTimeline(
        sizes=sizes,
        allocated=sizes + N_DELETED_GOLD_CHUNKS,
        version_of_day=version_of_day,
        build_day=np.where(version_of_day == 0, 0, REBUILD_AFTER_DAYS),
    )


def make_goldens(rng: np.random.Generator, chunks_on_day_one: int) -> list[Golden]:
    """One golden per (product, segment, attribute) picked, asking for that attribute's value."""
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
        passages, gold_passages, claims = _evidence(rng, n, product, seg, attr, value, answer)
        goldens.append(Golden(
            gold_id=f"g-{i + 1:03d}",
            question=question,
            reference=" ".join(claims) if n else None,
            claims=tuple(claims) if n else (),
            chunk_numbers=tuple(int(c) for c in chunk_numbers[used:used + n]),
            passages=tuple(passages) if n else (),
            gold_passages=tuple(gold_passages) if n else (),
            answer=answer,
        ))
        used += n
    questions = {normalize_text(g.question) for g in goldens}
    assert len(questions) == N_GOLDENS
    assert not {normalize_text(q) for q in NOVEL_QUERIES} & questions
    return goldens


def _with_article(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _value_text(rng: np.random.Generator, kind: str) -> str:
    if kind == "fee":
        return f"${int(rng.integers(1, 41))}"
    if kind == "rate":
        return f"{rng.integers(5, 450) / 100:.2f}%"
    return f"${int(rng.integers(2, 200)) * 50:,}"


def _evidence(
    rng: np.random.Generator, n: int, product: str, seg: str, attr: str, value: str, answer: str,
) -> tuple[list[str], list[str], list[str]]:
    """The passages of a golden's n chunks, the gold passages that state them, and the
    reference sentence each one supports.

    A gold passage is its chunk's text lightly reworded, as a person writing a gold set would:
    its similarity to its own chunk (1 - normalized Levenshtein) lies between ~0.77 and ~0.95,
    above the passages route's 0.5, and to the golden's other chunks below 0.5
    (tests/test_demo.py checks both), so the passages route finds the chunks the ids route
    does. It draws from `rng` even when n is 0: skipping those draws would change every golden
    after a golden without evidence, and so the files a seed writes.
    """
    # Each extra chunk states one more fact; every passage names product, segment and
    # attribute, so no two chunks share a text (content hashes stay unique).
    passages = [f"{product.capitalize()}, {seg} branches: the {attr} is {value}."]
    gold_passages = [f"{product.capitalize()} at {seg} branches: its {attr} is {value}."]
    claims = [answer]
    notice, months = int(rng.integers(2, 9)) * 7, int(rng.choice([3, 6, 12]))
    menu = APP_MENUS[int(rng.integers(len(APP_MENUS)))]
    extra = [
        (f"Changes to the {attr} need {notice} days' notice ({seg} {product}).",
         f"Changes to the {attr} are announced {notice} days ahead ({seg} {product}).",
         f"Changes to this {attr} require {notice} days' notice."),
        (f"Reviewed every {months} months: {attr}, {product}, {seg} branches.",
         f"Reviewed each {months} months: {attr}, {product}, {seg} branch network.",
         f"The {attr} is reviewed every {months} months."),
        (f"In the app, {menu} shows the {attr} for {seg} {product} holders.",
         f"In the mobile app, the {menu} screen shows the {attr} for {seg} {product} holders.",
         f"Customers can find it in the app under {menu}."),
    ]
    for j in rng.permutation(len(extra))[: max(n - 1, 0)]:
        passages.append(extra[j][0])
        gold_passages.append(extra[j][1])
        claims.append(extra[j][2])
    return passages, gold_passages, claims


def choose_deleted_chunks(rng: np.random.Generator, goldens: list[Golden]) -> set[int]:
    """One gold chunk each from six different goldens with evidence."""
    with_evidence = [g for g in goldens if g.chunk_numbers]
    victims = rng.choice(len(with_evidence), size=N_DELETED_GOLD_CHUNKS, replace=False)
    return {int(rng.choice(with_evidence[v].chunk_numbers)) for v in victims}


def chunk_catalogue(goldens: list[Golden], n_chunks: int) -> Chunks:
    """Every chunk number up to `n_chunks`: a gold passage where a golden owns it, else a
    distractor."""
    texts = [""] + [_distractor_text(n) for n in range(1, n_chunks + 1)]
    for g in goldens:
        for number, passage in zip(g.chunk_numbers, g.passages, strict=True):
            texts[number] = passage
    hashes = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
    chunk_ids = [f"c-{n:06d}" for n in range(n_chunks + 1)]
    return Chunks(ids=pa.array(chunk_ids), texts=pa.array(texts), hashes=pa.array(hashes))


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
