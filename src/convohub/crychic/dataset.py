"""Build the ``wildchat-tree`` dataset repository: config ``trees``, split ``test``, one row per conversation.

With a source the rows are annotated conversations (:mod:`convohub.crychic.source`); without one they are
constructed from the sample corpus with parents known by construction (:mod:`convohub.crychic.construct`).
Either way every prompt and reply is PII-scrubbed and the card reports the paper's statistics (conversations,
turns, roots, depth) per source, computed from the rows written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from convohub.conversations.pii import NOT_SCRUBBED, SCRUB_SCOPE
from convohub.corpus.dataset import WILDCHAT_CITATION
from convohub.hub import DatasetCardInfo, HubTarget, markdown_table, write_dataset

if TYPE_CHECKING:  # pragma: no cover
    import datasets

DATASET_NAME = "wildchat-tree"
CONFIG = "trees"
SPLIT = "test"
SOURCES = ("mixmc", "single", "annotated")
#: bibliographic facts from the paper (seed 002): an anonymous ACL submission, no authors or year given
CRYCHIC_CITATION = """@misc{crychic,
  title  = {{CRyCHIc}: Chat Reconstruction Using Tree in the Context of Human-AI Interaction},
  author = {Anonymous},
  note   = {Anonymous ACL submission}
}"""


def tree_features() -> datasets.Features:
    """Column types of the ``trees`` config, fixed so that every build loads with the same schema."""
    import datasets

    string, integer = datasets.Value("string"), datasets.Value("int64")
    turn = {"turn_index": integer, "user_prompt": string, "assistant_response": string, "parent": integer,
            "tree_id": integer, "thread": integer}
    return datasets.Features({"conversation_id": string, "source": string, "turns": datasets.List(turn),
                              "n_turns": integer, "n_roots": integer, "depth": integer})


def annotated_records(source: Path) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Rows of an annotated source (validated, PII-scrubbed) and the PII replacements made."""
    from convohub.crychic.construct import scrub_exchanges
    from convohub.crychic.source import read_annotated
    from convohub.crychic.trees import tree_record

    pii: Counter[str] = Counter()
    records = []
    for conv in read_annotated(source):
        turns = conv["turns"]
        exchanges = scrub_exchanges(((t["user_prompt"], t["assistant_response"]) for t in turns), pii)
        records.append(tree_record(conv["conversation_id"], "annotated", exchanges, [t["parent"] for t in turns]))
    return records, pii


def _row(label: str, records: Sequence[dict[str, Any]]) -> list[Any]:
    turns = [r["n_turns"] for r in records]
    roots = sum(r["n_roots"] for r in records)
    depth = [r["depth"] for r in records]
    return [label, len(records), sum(turns), roots, sum(turns) - roots, f"{sum(turns) / len(records):.2f}",
            max(turns), max(depth), f"{sum(depth) / len(records):.2f}"]


def statistics(records: Sequence[dict[str, Any]]) -> str:
    """The card's statistics table (per source, then all) and, for mixed conversations, threads per mix."""
    header = ["source", "conversations", "turns", "roots", "turns with a parent", "turns / conv.",
              "max turns", "max depth", "mean depth"]
    rows = [_row(source, [r for r in records if r["source"] == source])
            for source in SOURCES if any(r["source"] == source for r in records)]
    rows.append(_row("all", records))
    text = markdown_table(header, rows)
    threads = Counter(len({t["thread"] for t in r["turns"]}) for r in records if r["source"] == "mixmc")
    if threads:
        text += "\n\nSource conversations per mixed conversation: " + ", ".join(
            f"{n} threads: {count}" for n, count in sorted(threads.items()))
    return text


def _pii_line(pii: Counter[str]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(pii.items()) if n) or "none"


def build_wildchat_tree(target: HubTarget, repo: Path, *, source: Path | None = None, seed: int = 0) -> Path:
    """Write the dataset folder (from ``source`` when given, else constructed with ``seed``) and return it."""
    import datasets

    if source is not None:
        records, pii = annotated_records(Path(source))
        provenance = (f"Read from `{Path(source).name}` (annotated conversations in WildChatTree's schema) by "
                      f"`convohub datasets build {DATASET_NAME} --source ...`: {len(records)} conversations, "
                      "validated and PII-scrubbed, parents as annotated.")
    else:
        from convohub.crychic.construct import MIN_USER_TURNS, generate_trees

        records, report = generate_trees(seed)
        pii = report.pii
        dropped = ", ".join(f"{reason} {n}" for reason, n in sorted(report.dropped.items())) or "none"
        provenance = (
            f"Constructed offline by `convohub datasets build {DATASET_NAME}` (seed {seed}) from "
            f"`convohub.conversations.generate_wildchat_sample(with_plan=True)`: synthetic WildChat-format "
            f"conversations written from convohub's own templates, no real user data. Of {report.rows} sample "
            f"conversations, {report.eligible} are English with at least {MIN_USER_TURNS} user turns and not "
            f"re-submissions (dropped: {dropped}); {report.sources_used} of them were drawn for this split. "
            "The parents are known by construction, not annotated by people.")
    body = Template((repo / "dataset_scripts" / "wildchat_tree" / "card.md").read_text(encoding="utf-8"))
    card = DatasetCardInfo(
        pretty_name="WildChatTree: conversation trees of human-LLM chats (convohub)",
        license="odc-by",
        description=body.substitute(provenance=provenance, statistics=statistics(records), pii=_pii_line(pii),
                                     pii_scope=SCRUB_SCOPE, not_scrubbed=NOT_SCRUBBED),
        citation=CRYCHIC_CITATION + "\n\n" + WILDCHAT_CITATION,
        task_categories=("text-classification",),
        tags=("convohub", "crychic", "wildchat", "conversation-trees", "chat-logs"),
    )
    configs = {CONFIG: {SPLIT: datasets.Dataset.from_list(records, features=tree_features())}}
    return write_dataset(target, DATASET_NAME, configs, card)

