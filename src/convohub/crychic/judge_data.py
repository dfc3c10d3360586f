"""Follow-up judge training pairs from the sample corpus, labelled by construction (no LLM).

The sample generator plans every user turn before writing it, and :func:`convohub.crychic.construct.plan_parents`
turns that plan into each turn's parent (the same rule that gives WildChatTree's offline test set its gold
parents). So:

* positives: (parent turn, follow-up prompt) for every turn with a parent;
* same-theme negatives: (another earlier turn of the same conversation, that prompt) -- same user, often
  the same topic, but not the turn the prompt builds on;
* different-theme negatives: (a turn of another conversation, that prompt).

As in the paper's Wikipedia pairs, half the pairs are positive and the negatives are split evenly between
the two kinds (fewer same-theme negatives exist in short conversations; different-theme ones fill the gap),
all drawn with a seeded generator. The corpus is drawn with :data:`TRAIN_CORPUS_SEED`, not the test set's
seed, so the judge never trains on a WildChatTree test conversation (the generator's phrasings recur,
though; the test set is a stand-in, not independent data). Held-out pairs are those of held-out
conversations. Rows name their source (``produced_by``): the generator's plan.

The held-out conversations also come whole, as tree records (``judge/heldout_trees.jsonl``, the WildChatTree
schema, MixMC rows mixed in the test split's share; :func:`convohub.crychic.construct.mixed_like_test`): the
pipeline compares the *best* of up to 20 candidate turns with its root threshold, which pairs cannot
calibrate (:mod:`convohub.crychic.threshold`).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from convohub.crychic.data_common import TRAIN_CORPUS_SEED, split_of
from convohub.stages import stage

if TYPE_CHECKING:  # pragma: no cover
    from convohub.crychic.construct import SourceConversation

PRODUCED_BY = "construction:sample-plan"
#: the held-out conversations as whole trees, beside the pair files of ``judge/``
TREES_FILE = "heldout_trees.jsonl"


@dataclass
class JudgeSettings:
    """Everything that changes the pairs (part of the stage fingerprint)."""

    n_users: int = 40
    corpus_seed: int = TRAIN_CORPUS_SEED
    max_positives: int | None = 600
    same_theme_share: float = 0.5
    heldout_fraction: float = 0.2
    seed: int = 0


def _pair(source: SourceConversation, turn: int, other: SourceConversation, candidate: int, kind: str,
          settings: JudgeSettings) -> dict[str, Any]:
    prompt, _ = source.exchanges[turn]
    history_prompt, history_response = other.exchanges[candidate]
    return {"prompt": prompt, "history_prompt": history_prompt, "history_response": history_response,
            "label": 1 if kind == "positive" else 0, "kind": kind, "conversation_id": source.conversation_id,
            "turn_index": turn, "candidate_conversation_id": other.conversation_id, "candidate_index": candidate,
            "produced_by": PRODUCED_BY,
            "split": split_of(source.conversation_id, settings.heldout_fraction, settings.seed)}


def make_judge_data(settings: JudgeSettings) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """The pairs, their counts and the held-out conversations as tree records (module docstring)."""
    from convohub.crychic.construct import ConstructionReport, mixed_like_test, sample_sources

    if not 0.0 <= settings.same_theme_share <= 1.0:
        raise ValueError(f"same_theme_share must be in [0, 1], got {settings.same_theme_share}")
    report = ConstructionReport()
    sources = sample_sources(settings.n_users, settings.corpus_seed, report)
    if len(sources) < 2:
        raise ValueError(f"the sample corpus of {settings.n_users} users has {len(sources)} eligible "
                         "conversations; different-theme negatives need two or more")
    rng = random.Random(f"convohub.crychic.judge/{settings.seed}")
    positives = [(s, t) for s in sources for t, parent in enumerate(s.parents) if parent >= 0]
    rng.shuffle(positives)
    if settings.max_positives is not None:
        positives = positives[: settings.max_positives]
    rows: list[dict[str, Any]] = []
    same_wanted = round(len(positives) * settings.same_theme_share)
    same_made = 0
    for source, turn in positives:
        parent = source.parents[turn]
        rows.append(_pair(source, turn, source, parent, "positive", settings))
        others = [c for c in range(turn) if c != parent]
        if others and same_made < same_wanted:
            rows.append(_pair(source, turn, source, rng.choice(others), "same_theme", settings))
            same_made += 1
        else:
            other = rng.choice([s for s in sources if s is not source])
            rows.append(_pair(source, turn, other, rng.randrange(len(other.exchanges)), "different_theme",
                              settings))
    counts = {"conversations": len(sources), "pairs": len(rows), "by_kind": dict(Counter(r["kind"] for r in rows)),
              "by_split": dict(Counter(r["split"] for r in rows)), "corpus_seed": settings.corpus_seed,
              "corpus_dropped": dict(report.dropped)}
    heldout = [s for s in sources if split_of(s.conversation_id, settings.heldout_fraction, settings.seed) == "heldout"]
    trees = mixed_like_test(heldout, random.Random(f"convohub.crychic.judge-trees/{settings.seed}"))
    counts["heldout_trees"] = {"conversations": len(trees), "sources": len(heldout),
                               "turns": sum(len(t["turns"]) for t in trees),
                               "by_source": dict(Counter(t["source"] for t in trees))}
    return rows, counts, trees


def build_judge_data(settings: JudgeSettings | None = None, *, work: Path | None = None
                     ) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """:func:`make_judge_data` behind the ``judge`` stage file of ``work``: the pair rows, the record entry and
    the held-out tree records."""
    settings = settings or JudgeSettings()
    value = stage(work, "judge", {"settings": asdict(settings), "outputs": ["pairs", "heldout_trees"]},
                  lambda: dict(zip(("rows", "counts", "trees"), make_judge_data(settings), strict=True)))
    return value["rows"], {**value["counts"], "produced_by": PRODUCED_BY}, value["trees"]


def write_trees(folder: Path, trees: list[dict[str, Any]]) -> int:
    """Write the held-out tree records to ``<folder>/judge/heldout_trees.jsonl``; how many."""
    from convohub.hub import atomic_write_text

    atomic_write_text(Path(folder) / "judge" / TREES_FILE,
                      "".join(json.dumps(tree, ensure_ascii=False) + "\n" for tree in trees))
    return len(trees)


def read_trees(folder: str | Path) -> list[dict[str, Any]]:
    """The held-out tree records of a built training-data folder."""
    from convohub.jsonlines import jsonl_records

    path = Path(folder) / "judge" / TREES_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the training data predates the held-out trees; rebuild "
                                f"it (`convohub crychic training-data --task judge --out {folder}`)")
    return [tree for _, tree in jsonl_records(path, error=ValueError, expected="one tree record")]
