"""A small WildFeedback-schema preference dataset for the training/evaluation/Space tests.

Built from convohub.conversations' generated WildChat sample (no network, deterministic): each
conversation's last user turn is the query, the original assistant answer is ``rejected`` and a revision
that follows a stated preference (concise, numbered steps, restating the topic) is ``chosen``. Users are
split between the train config and the ``test`` config, as the real data is split by user. The schema is
exactly the released rows' (id, conversation_id, user_id, variant, prompt, preferences, chosen, rejected,
sat_labels, dsat_labels, domain, intent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PREFERENCES = ("The response should be concise and give numbered steps.",
               "The response should restate the topic of the question before answering.")


def _chosen(query: str) -> str:
    topic = " ".join(query.split()[:8]).rstrip("?.!,")
    return (f"Concise numbered steps for the topic: {topic}. 1. Restate the topic. 2. Give the key step. "
            "3. Check the result.")


def fixture_rows(n_users: int = 16, seed: int = 0) -> list[dict[str, Any]]:
    from convohub.conversations import from_wildchat_row, generate_wildchat_sample

    rows = []
    for raw in generate_wildchat_sample(n_users=n_users, sessions_per_user=(3, 4), seed=seed):
        conv = from_wildchat_row(raw)
        turns = [{"role": t.role, "content": t.content} for t in conv.turns]
        last_user = max(i for i, t in enumerate(turns) if t["role"] == "user")
        if last_user + 1 >= len(turns):
            continue
        prompt, rejected = turns[: last_user + 1], turns[last_user + 1]["content"]
        rows.append({"id": f"wf-{conv.conversation_id[:12]}-{len(rows)}", "conversation_id": conv.conversation_id,
                     "user_id": conv.user_id, "variant": "expert", "prompt": prompt, "preferences": list(PREFERENCES),
                     "chosen": _chosen(prompt[-1]["content"]), "rejected": rejected,
                     "sat_labels": [], "dsat_labels": ["Revision"], "domain": "OTHER",
                     "intent": "INTENT:1-INFORMATION_SEEKING"})
    return rows


def write_fixture_dataset(root: Path, n_users: int = 16, test_users: int = 4) -> Path:
    """Write the dataset folder (configs ``wildfeedback``/train and ``test``/test); returns its path."""
    import datasets

    from convohub.hub import DatasetCardInfo, HubTarget, write_dataset

    rows = fixture_rows(n_users)
    users = sorted({r["user_id"] for r in rows})
    held = set(users[:test_users])
    train = [r for r in rows if r["user_id"] not in held]
    test = [r for r in rows if r["user_id"] in held]
    card = DatasetCardInfo(pretty_name="WildFeedback test fixture", license="odc-by",
                           description="Preference rows generated for tests.")
    return write_dataset(HubTarget(root=root), "wildfeedback",
                         {"wildfeedback": {"train": datasets.Dataset.from_list(train)},
                          "test": {"test": datasets.Dataset.from_list(test)}}, card)
