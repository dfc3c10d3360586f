"""Build the ``wildchat-sample`` dataset: WildChat-format conversations, normalised, PII-scrubbed,
de-duplicated and split by user (no user in two splits).

Without a source the rows come from convohub's seeded generator (offline, deterministic); with a source
(a local WildChat-1M export: .jsonl/.json/.parquet file or folder, or a Hub dataset id such as
``allenai/WildChat-1M`` read in streaming mode) the same code normalises the real data.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from string import Template
from typing import Any

from convohub.conversations.pii import NOT_SCRUBBED, SCRUB_SCOPE
from convohub.hub import DatasetCardInfo, HubTarget, markdown_table, write_dataset

DATASET_NAME = "wildchat-sample"
SPLITS = ("train", "validation", "test")
TINY_USERS = 40
WILDCHAT_CITATION = """@inproceedings{zhao2024wildchat,
  title     = {WildChat: 1M ChatGPT Interaction Logs in the Wild},
  author    = {Wenting Zhao and Xiang Ren and Jack Hessel and Claire Cardie and Yejin Choi and Yuntian Deng},
  booktitle = {The Twelfth International Conference on Learning Representations},
  year      = {2024}
}"""


def split_of(user_id: str) -> str:
    """Deterministic user-level split: 80% train, 10% validation, 10% test."""
    bucket = int(hashlib.sha256(user_id.encode("utf-8")).hexdigest(), 16) % 10
    return "test" if bucket == 0 else "validation" if bucket == 1 else "train"


def iter_source_rows(source: Path | str) -> Iterator[dict[str, Any]]:
    """WildChat-1M rows from a local export or (streaming) from a Hub dataset id."""
    from convohub.conversations import to_wildchat_row
    from convohub.conversations.wildchat import read_wildchat

    if Path(source).exists():
        for conv in read_wildchat(Path(source)):
            yield to_wildchat_row(conv)
        return
    import datasets

    yield from datasets.load_dataset(str(source), split="train", streaming=True)


def _content_key(conv: Any) -> str:
    text = "\x1f".join(t.content.strip().lower() for t in conv.turns)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise(rows: Iterable[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Rows -> scrubbed, de-duplicated records per split, plus the counts the card reports."""
    from convohub.conversations import from_wildchat_row, scrub_conversation_with_counts

    splits: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    seen: set[str] = set()
    stats: dict[str, Any] = {"rows_read": 0, "exact_duplicates_dropped": 0, "empty_dropped": 0}
    pii: Counter[str] = Counter()
    for index, row in enumerate(rows):
        stats["rows_read"] += 1
        conv = from_wildchat_row(row, index=index)
        if not conv.turns:
            stats["empty_dropped"] += 1
            continue
        key = _content_key(conv)
        if key in seen:
            stats["exact_duplicates_dropped"] += 1
            continue
        seen.add(key)
        clean, counts = scrub_conversation_with_counts(conv)
        pii.update(counts)
        splits[split_of(clean.user_id)].append(clean.to_dict())
    for records in splits.values():
        records.sort(key=lambda r: (str(r["timestamp"]), r["conversation_id"]))
    stats["pii_replaced"] = ", ".join(f"{k} {v}" for k, v in sorted(pii.items()) if v) or "none"
    return splits, stats


def _statistics(splits: dict[str, list[dict[str, Any]]]) -> str:
    rows = []
    for split, records in splits.items():
        users = {r["user_id"] for r in records}
        turns = [sum(1 for t in r["turns"] if t["role"] == "user") for r in records]
        rows.append([split, len(records), len(users), len({r["country"] for r in records}),
                     len({r["language"] for r in records}),
                     f"{sum(turns) / max(len(turns), 1):.2f}", sum(1 for t in turns if t > 1)])
    table = markdown_table(["split", "conversations", "users", "countries", "languages", "user turns / conv.",
                            "multi-turn"], rows)
    every = [r for records in splits.values() for r in records]
    countries = Counter(r["country"] for r in every).most_common(8)
    languages = Counter(r["language"] for r in every).most_common(8)
    return (table + "\n\nTop countries: " + ", ".join(f"{c} ({n})" for c, n in countries)
            + "\n\nLanguages: " + ", ".join(f"{lang} ({n})" for lang, n in languages))


def build_wildchat_sample(target: HubTarget, repo: Path, *, source: Path | str | None = None, seed: int = 0,
                          n_users: int = TINY_USERS) -> Path:
    """Write the dataset folder and return it."""
    import datasets

    from convohub.conversations import conversation_features, generate_wildchat_sample

    if source is None:
        rows: Iterable[dict[str, Any]] = generate_wildchat_sample(n_users=n_users, seed=seed)
        provenance = (f"Generated offline by `convohub.conversations.generate_wildchat_sample(n_users={n_users}, "
                      f"seed={seed})`: synthetic WildChat-1M-format rows written from convohub's own "
                      "templates (no real user data). Use it to run every pipeline end to end; build from "
                      "the real corpus with `--source`.")
        license_id = "cc-by-4.0"
    else:
        rows = iter_source_rows(source)
        shown = Path(source).name if Path(source).exists() else source  # no local absolute paths in cards
        provenance = (f"Normalised from `{shown}` (WildChat-1M format) by `convohub datasets build "
                      f"{DATASET_NAME} --source ...`.")
        license_id = "odc-by"
    splits, stats = normalise(rows)
    features = conversation_features()
    configs = {"conversations": {s: datasets.Dataset.from_list(r, features=features)
                                 for s, r in splits.items() if r}}
    template = Template((repo / "dataset_scripts" / "wildchat_sample" / "card.md").read_text(encoding="utf-8"))
    body = template.substitute(
        provenance=provenance,
        rows_read=stats["rows_read"],
        duplicates=stats["exact_duplicates_dropped"],
        empty=stats["empty_dropped"],
        pii=stats["pii_replaced"],
        pii_scope=SCRUB_SCOPE,
        not_scrubbed=NOT_SCRUBBED,
        statistics=_statistics(splits),
    )
    card = DatasetCardInfo(
        pretty_name="WildChat-format conversation sample (convohub)",
        license=license_id,
        description=body,
        citation=WILDCHAT_CITATION,
        language=("en", "es", "fr", "de", "zh", "ru", "pt"),
        task_categories=("text-generation",),
        tags=("convohub", "wildchat", "conversations", "chat-logs"),
    )
    return write_dataset(target, DATASET_NAME, configs, card)
