"""Build the ``promise`` dataset repository: configs ``dialogues``, ``task1_intent_satisfaction`` and
``task2_sq_selection``, splits ``validation`` and ``test`` (no train split, as in the paper).

The dialogues come from a source (:mod:`convohub.promise.source`) or from the simulation loop
(:mod:`convohub.promise.simulate`); every text goes through the PII scrubber; the task items are derived from
the dialogues (:func:`convohub.promise.records.task_items`). The card carries the paper's Table 2 computed
from the rows written, the per-turn suggested-question quality of Table 3 (``evaluation/sq_quality``) and,
for a generated build, who generated what and how often their answers passed the checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from convohub.hub import DatasetCardInfo, HubTarget, markdown_table, write_dataset
from convohub.promise.records import (
    OUTCOMES,
    SPLITS,
    TASK2_NAMES,
    task_items,
)

if TYPE_CHECKING:  # pragma: no cover
    import datasets

DATASET_NAME = "promise"
CONFIGS = {"dialogues": None, "task1_intent_satisfaction": "task1", "task2_sq_selection": "task2"}
TASK_CONFIG = {"task1": "task1_intent_satisfaction", "task2": "task2_sq_selection"}
PROMISE_CITATION = """@misc{butala2024promise,
  title  = {{ProMISe}: A Proactive Multi-turn Dialogue Dataset for Information-seeking Intent Resolution},
  author = {Butala, Yash Parag and Garg, Siddhant and Banerjee, Pratyay and Misra, Amita},
  year   = {2024}
}"""


def features(config: str) -> datasets.Features:
    """Column types of each config, fixed so that every build loads with the same schema."""
    import datasets

    string, integer = datasets.Value("string"), datasets.Value("int64")
    if config == "dialogues":
        qa = {"question": string, "answer": string, "snippet_index": integer}
        turn = {"turn_index": integer, "retrieval_query": string, "web_snippets": datasets.List(string),
                "suggested_qas": datasets.List(qa), "action": string}
        return datasets.Features({
            "dialogue_id": string, "topic": string, "intent": string, "initial_question": string,
            "outcome": string, "num_turns": integer, "agent_llm": string, "retrieval_backend": string,
            "user_simulator": string, "turns": datasets.List(turn)})
    return datasets.Features({"id": string, "dialogue_id": string, "turn_index": integer, "intent": string,
                              "context_questions": datasets.List(string), "candidate_sqs": datasets.List(string),
                              "label": integer})


def scrub(splits: Mapping[str, list[dict[str, Any]]]) -> Counter[str]:
    """Every text of every dialogue through :func:`convohub.conversations.scrub_pii_with_counts`, in place."""
    from convohub.conversations import scrub_pii_with_counts

    pii: Counter[str] = Counter()

    def clean(text: str) -> str:
        out, counts = scrub_pii_with_counts(text)
        pii.update(counts)
        return out

    for dialogues in splits.values():
        for d in dialogues:
            for key in ("topic", "intent", "initial_question"):
                d[key] = clean(d[key])
            for turn in d["turns"]:
                turn["retrieval_query"] = clean(turn["retrieval_query"])
                turn["web_snippets"] = [clean(s) for s in turn["web_snippets"]]
                for qa in turn["suggested_qas"]:
                    qa["question"], qa["answer"] = clean(qa["question"]), clean(qa["answer"])
    return pii


# ------------------------------------------------------------------------------------------------ statistics
def statistics(splits: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """The paper's Table 2 (validation / test / total) computed from the dialogues."""
    columns = list(SPLITS)

    def row(label: str, count: Any) -> list[Any]:
        values = [count(splits[s]) for s in columns]
        return [label, *values, sum(values)]

    def turns(ds: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [t for d in ds for t in d["turns"]]

    rows = [row(f"outcome: {o}", lambda ds, o=o: sum(d["outcome"] == o for d in ds)) for o in OUTCOMES]
    rows += [row("Task 1: intent not satisfied (turns)", lambda ds: sum(t["action"] != "done" for t in turns(ds))),
             row("Task 1: intent satisfied (turns)", lambda ds: sum(t["action"] == "done" for t in turns(ds)))]
    rows += [row(f"Task 2: {'choose ' + name.upper() if name != 'none' else 'no SQ helps'}",
                 lambda ds, a=name: sum(t["action"] == a for t in turns(ds))) for name in TASK2_NAMES]
    rows += [row("dialogues", len), row("turns", lambda ds: len(turns(ds))),
             row("SQA pairs", lambda ds: sum(len(t["suggested_qas"]) for t in turns(ds)))]
    mean = [f"{len(turns(splits[s])) / max(len(splits[s]), 1):.2f}" for s in columns]
    total = sum(len(splits[s]) for s in columns)
    rows.append(["mean turns per dialogue", *mean,
                 f"{sum(len(turns(splits[s])) for s in columns) / max(total, 1):.2f}"])
    return markdown_table(["", *columns, "total"], rows)


def sq_quality_rows(dialogues: Sequence[Mapping[str, Any]]) -> str:
    """Table 3's automatic metrics per turn position and pooled over all turns (not the mean of the rows),
    x100, with ``evaluation/sq_quality``'s functions (BERTScore on the bundled MiniLM, layer 5). BERTScore is a
    mean over turns, so its pooled value is the turn-weighted mean of the positions' (each pair scored once)."""
    from convohub.metrics.sq_quality import sq_quality

    by_turn: dict[int, list[tuple[list[str], str]]] = {}
    for d in dialogues:
        for t in d["turns"]:
            by_turn.setdefault(int(t["turn_index"]), []).append(([qa["question"] for qa in t["suggested_qas"]],
                                                                 str(d["intent"])))
    keys = ("self_bleu", "ms_ttr", "bleu", "bertscore")
    rows, weighted = [], 0.0
    for position in sorted(by_turn):
        pairs = by_turn[position]
        scores = sq_quality([q for q, _ in pairs], [i for _, i in pairs])
        weighted += len(pairs) * scores["bertscore"]
        rows.append([f"turn {position + 1}", len(pairs), *(f"{100 * scores[k]:.2f}" for k in keys)])
    pairs = [p for position in sorted(by_turn) for p in by_turn[position]]
    scores = sq_quality([q for q, _ in pairs], [i for _, i in pairs], with_bertscore=False)
    scores["bertscore"] = weighted / len(pairs)
    rows.append(["all turns (pooled)", len(pairs), *(f"{100 * scores[k]:.2f}" for k in keys)])
    return markdown_table(["", "turns", "Self-BLEU", "MS-TTR", "BLEU", "BERTScore"], rows)


# ------------------------------------------------------------------------------------------------ write
def tables(splits: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, datasets.Dataset]]:
    """The three configs' Datasets per split."""
    import datasets

    out: dict[str, dict[str, datasets.Dataset]] = {}
    for config, task in CONFIGS.items():
        out[config] = {split: datasets.Dataset.from_list(
            splits[split] if task is None else task_items(splits[split], task), features=features(config))
            for split in SPLITS}
    return out


def write_promise(target: HubTarget, repo: Path, splits: Mapping[str, list[dict[str, Any]]], *, provenance: str,
                  generation: str, pii: Counter[str], license: str) -> Path:
    """Write the dataset folder from validated, scrubbed dialogues and return it."""
    from convohub.conversations.pii import NOT_SCRUBBED, SCRUB_SCOPE
    from convohub.promise.prompts import GROUNDING

    quality = sq_quality_rows([d for s in SPLITS for d in splits[s]])
    body = Template((repo / "dataset_scripts" / "promise" / "card.md").read_text(encoding="utf-8"))
    card = DatasetCardInfo(
        pretty_name="ProMISe: proactive multi-turn information-seeking dialogues (convohub)",
        license=license,
        description=body.substitute(
            provenance=provenance, generation=generation, statistics=statistics(splits), sq_quality=quality,
            pii=", ".join(f"{k} {n}" for k, n in sorted(pii.items()) if n) or "none", pii_scope=SCRUB_SCOPE,
            not_scrubbed=NOT_SCRUBBED, grounding=f"{GROUNDING:.0%}"),
        citation=PROMISE_CITATION,
        task_categories=("text-classification", "question-answering"),
        tags=("convohub", "promise", "suggested-questions", "user-simulation", "information-seeking"),
    )
    return write_dataset(target, DATASET_NAME, tables(splits), card)
