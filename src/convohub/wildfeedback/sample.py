"""Write small files in the released WildFeedback layout (``dataset_scripts/wildfeedback/sample/``) from an
offline pipeline run, so the ``--source`` path is exercised without the 1.6 GB release.

    python -m convohub.wildfeedback.sample dataset_scripts/wildfeedback/sample
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from convohub.hub import atomic_write_text


def _sharegpt(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{"from": "human" if m["role"] == "user" else "gpt", "value": m["content"]} for m in messages]


def write_sample(dest: Path, n_users: int = 12, max_rows: int = 12, seed: int = 0) -> dict[str, int]:
    """Write the three files under ``dest``; returns rows written per file."""
    from convohub.wildfeedback.dataset import annotation_rows, preference_rows, sample_conversations
    from convohub.wildfeedback.pipeline import Settings, run_pipeline

    with tempfile.TemporaryDirectory() as work:
        result = run_pipeline(sample_conversations(n_users, seed), Path(work), settings=Settings(seed=seed),
                              log=lambda _: None)
    pairs = (result.train + result.test)[:max_rows]
    wf = [{"conversations": _sharegpt(r["prompt"]), "chosen": {"from": "gpt", "value": r["chosen"]},
           "rejected": {"from": "gpt", "value": r["rejected"]}} for r in pairs]
    keep = {r["conversation_id"] for r in pairs[: max_rows // 2]}
    ann: list[dict[str, Any]] = [
        {"conversation_id": a["conversation_id"], "UtterranceId": a["utterance_id"], "TurnId": a["turn_id"],
         "Role": "User" if a["role"] == "user" else "Agent", "Content": a["content"], "State": a["state"],
         "Preceeding": a["preceding_topical_relation"], "Satisfaction": a["sat"], "Disatisfaction": a["dsat"]}
        for a in annotation_rows(result) if a["conversation_id"] in keep]
    prefs = [{"conversation_id": p["conversation_id"], "conversations": _sharegpt(p["prompt"]), "query": p["query"],
              "preferences": p["preferences"]} for p in preference_rows(result)[:max_rows]]
    dest.mkdir(parents=True, exist_ok=True)
    atomic_write_text(dest / "wildfeedback.json", json.dumps(wf, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(dest / "sat_dsat_annotation.json", json.dumps(ann, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(dest / "user_preference.json",
                      "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prefs))  # JSON Lines on purpose
    return {"wildfeedback.json": len(wf), "sat_dsat_annotation.json": len(ann), "user_preference.json": len(prefs)}


if __name__ == "__main__":
    print(write_sample(Path(sys.argv[1] if len(sys.argv) > 1 else "dataset_scripts/wildfeedback/sample")))
