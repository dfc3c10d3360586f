"""A conversation's tree structure as a list of parents, and what follows from it.

``parents[t]`` is the index of the earlier turn that turn ``t`` builds on, or ``-1`` when ``t`` starts a tree
of its own (a root). Because a parent always comes earlier, one left-to-right pass gives every derived
quantity: the tree a turn belongs to (named by its root's index) and its depth (a root has depth 1).
"""

from __future__ import annotations

from collections.abc import Sequence


def check_parents(parents: Sequence[object]) -> str | None:
    """The first problem of a parent list (an English sentence naming the turn), or None when it is valid.

    Valid: every entry is an int (not a bool) that is -1 or the index of an earlier turn.
    """
    for t, parent in enumerate(parents):
        if not isinstance(parent, int) or isinstance(parent, bool):
            return f"turn {t}: parent must be an integer, got {type(parent).__name__}"
        if parent != -1 and not 0 <= parent < t:
            earlier = f"an earlier turn (0..{t - 1})" if t else "nothing earlier: turn 0 is always a root"
            return f"turn {t}: parent {parent} must be -1 (a root) or {earlier}"
    return None


def _checked(parents: Sequence[int]) -> Sequence[int]:
    problem = check_parents(parents)
    if problem:
        raise ValueError(problem)
    return parents


def tree_ids(parents: Sequence[int]) -> list[int]:
    """The tree of every turn, named by the index of its root (so a root's tree id is its own index)."""
    out: list[int] = []
    for t, parent in enumerate(_checked(parents)):
        out.append(t if parent == -1 else out[parent])
    return out


def depths(parents: Sequence[int]) -> list[int]:
    """Every turn's depth: the number of turns on the path from its root to it (a root has depth 1)."""
    out: list[int] = []
    for parent in _checked(parents):
        out.append(1 if parent == -1 else out[parent] + 1)
    return out


def tree_depth(parents: Sequence[int]) -> int:
    """The depth of the deepest tree of a conversation (0 for a conversation without turns)."""
    return max(depths(parents), default=0)


def tree_record(conversation_id: str, source: str, exchanges: Sequence[tuple[str, str]], parents: Sequence[int],
                threads: Sequence[int] | None = None) -> dict[str, object]:
    """One row of the ``trees`` config: the turns with their parents, tree ids and source threads, and the
    per-conversation counts (turns, roots, depth) the card's statistics add up.

    ``exchanges`` are (user prompt, assistant response) pairs in turn order; ``threads`` says which source
    conversation each turn came from (all 0 when the conversation was not mixed).
    """
    if len(exchanges) != len(parents):
        raise ValueError(f"conversation {conversation_id!r}: {len(exchanges)} turns but {len(parents)} parents")
    threads = list(threads) if threads is not None else [0] * len(parents)
    trees = tree_ids(parents)
    turns = [{"turn_index": t, "user_prompt": prompt, "assistant_response": response, "parent": int(parent),
              "tree_id": trees[t], "thread": int(threads[t])}
             for t, ((prompt, response), parent) in enumerate(zip(exchanges, parents, strict=True))]
    return {"conversation_id": conversation_id, "source": source, "turns": turns, "n_turns": len(turns),
            "n_roots": sum(1 for p in parents if p == -1), "depth": tree_depth(parents)}
