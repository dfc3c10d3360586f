"""Run a tree builder (CRyCHIc, an ablation or a baseline) over WildChatTree and score its parents.

Scores come from :func:`convohub.metrics.tree_reconstruction_scores`, over all turns and without each
conversation's first turn (always a root, so it inflates accuracy); micro and per-conversation macro. The
result also counts which rule decided how many turns and how often each rule was right, which is where the
error analysis starts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from convohub.crychic.reconstruct import TreeBuilder, reconstruct

METRICS = ("accuracy", "precision", "recall", "f1")


def load_trees(folder: Path) -> list[dict[str, Any]]:
    """The test conversations of a built ``wildchat-tree`` dataset folder (read from its Parquet shards)."""
    from convohub.crychic.dataset import CONFIG, SPLIT
    from convohub.hub import load_local

    folder = Path(folder)
    if not (folder / "README.md").is_file():
        raise FileNotFoundError(f"{folder} is not a dataset folder (no README.md); build one with "
                                "`convohub datasets build wildchat-tree --out DIR` and pass "
                                "DIR/datasets/<namespace>/wildchat-tree")
    return list(load_local(folder, CONFIG, SPLIT))


def evaluate_trees(rows: Iterable[Mapping[str, Any]], make_builder: Callable[[], TreeBuilder]) -> dict[str, Any]:
    """Reconstruct every conversation with a fresh builder and score it against the gold parents."""
    from convohub.metrics import tree_reconstruction_scores

    predictions, golds, conversations = [], [], []
    decided: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for row in rows:
        turns = row["turns"]
        builder = reconstruct([(t["user_prompt"], t["assistant_response"]) for t in turns], make_builder)
        gold = [int(t["parent"]) for t in turns]
        for decision, parent in zip(builder.decisions, gold, strict=True):
            decided[decision.rule] += 1
            right[decision.rule] += decision.parent == parent
        predictions.append(builder.parents)
        golds.append(gold)
        conversations.append({"conversation_id": row["conversation_id"], "gold": gold,
                              "predicted": builder.parents,
                              "decisions": [d.to_dict() for d in builder.decisions]})
    if not predictions:
        raise ValueError("no conversations to evaluate")
    return {
        "conversations": len(predictions),
        "turns": sum(len(g) for g in golds),
        "scores": {"all_turns": tree_reconstruction_scores(predictions, golds),
                   "without_first_turns": tree_reconstruction_scores(predictions, golds, exclude_first_turn=True)},
        "rules": {rule: {"turns": n, "correct": right[rule], "accuracy": right[rule] / n}
                  for rule, n in sorted(decided.items())},
        "per_conversation": conversations,
    }


def format_report(header: str, result: Mapping[str, Any]) -> str:
    """A plain-text table: one row per (turn set, averaging), one column per metric, then the rule counts."""
    lines = [header, f"{result['conversations']} conversations, {result['turns']} turns", "",
             f"{'turns':<22}{'averaging':<10}" + "".join(f"{m:>11}" for m in METRICS)]
    for turns, scores in result["scores"].items():
        for averaging, prefix in (("micro", ""), ("macro", "macro_")):
            lines.append(f"{turns.replace('_', ' '):<22}{averaging:<10}"
                         + "".join(f"{scores[prefix + m]:>11.3f}" for m in METRICS))
    lines += ["", f"{'rule':<24}{'turns':>7}{'accuracy':>9}"]
    lines += [f"{rule:<24}{stats['turns']:>7}{stats['accuracy']:>9.3f}" for rule, stats in result["rules"].items()]
    return "\n".join(lines)
