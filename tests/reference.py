"""Plain-Python reference definitions of the chunk-ID metrics (the README's "What recall means
here"), written independently of the SQL scorer so that tests can compare the two."""

from __future__ import annotations


def best_ranks(steps: list[list[tuple[str, int]]]) -> dict[str, int]:
    """chunk_id -> best place over all steps (a chunk retrieved twice counts once). Each step
    is a list of (chunk_id, logged rank) in logged order; a chunk's place is its position once
    the step is ordered by logged rank, ties kept in logged order (a stable sort)."""
    best: dict[str, int] = {}
    for step in steps:
        ordered = sorted(step, key=lambda item: item[1])  # stable: ties keep logged order
        for place, (chunk_id, _) in enumerate(ordered, start=1):
            best[chunk_id] = min(place, best.get(chunk_id, place))
    return best


def recall_at(gold: list[str], steps, k: int, cutoff: int) -> float:
    gold_set = set(gold)
    ranks = best_ranks(steps)
    depth = min(cutoff, k)
    return sum(1 for g in gold_set if ranks.get(g, depth + 1) <= depth) / len(gold_set)


def precision_at(gold: list[str], steps, k: int, cutoff: int) -> float | None:
    ranks = best_ranks(steps)
    depth = min(cutoff, k)
    served = {c for c, r in ranks.items() if r <= depth}
    if not served:
        return None
    return len(served & set(gold)) / len(served)


def hit_at(gold: list[str], steps, k: int, cutoff: int) -> bool:
    return recall_at(gold, steps, k, cutoff) > 0
