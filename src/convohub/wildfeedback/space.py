"""The WildFeedback Space's logic (``spaces/wildfeedback/app.py`` is a thin Gradio layer over it) and its export.

Paste a conversation -> per-user-turn SAT/DSAT labels (:func:`convohub.wildfeedback.identify.identify`) and
the summarised preferences (:func:`convohub.wildfeedback.preferences.summarise`); then the base and the
aligned model answer the query the preferences are about, and the checklist judge compares the answers in
both orders with the preferences as the checklist. Offline everything runs on convohub's stand-ins (rule
labeller and summariser, tiny models, the lexical judge) and the page says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SPACE_NAME = "wildfeedback-explorer"
EXAMPLE = """User: Write a short poem about the sea.
Assistant: The sea is big and blue, it is wet and cold, and it is very old, and the sea is very big.
User: That is too long and boring. Make it shorter and make it rhyme please.
Assistant: Waves roll, the sea is old.
User: Thanks, perfect!"""


def label_rows(turns: Sequence[Mapping[str, str]], result: Any) -> list[list[str]]:
    """One table row per user turn: id, utterance, SAT labels, DSAT labels, state."""
    users = [t["content"] for t in turns if t["role"] == "user"]
    rows = []
    for k, (utterance, label) in enumerate(zip(users, result.turns, strict=False), 1):
        rows.append([f"T-{k}", utterance[:200], ", ".join(label.satisfaction), ", ".join(label.dissatisfaction),
                     label.state])
    return rows


#: colours of :func:`feedback_marks`' labels (``gr.HighlightedText(color_map=...)``)
FEEDBACK_COLOURS = {"SAT": "#16a34a", "DSAT": "#dc2626", "SAT + DSAT": "#d97706"}


def feedback_marks(turns: Sequence[Mapping[str, str]], result: Any) -> list[tuple[str, str | None]]:
    """The conversation as text pieces for ``gr.HighlightedText``: each user turn marked ``SAT``, ``DSAT`` or
    ``SAT + DSAT`` by its labels (unmarked when it has neither: both ``N/A``), assistant turns unmarked, so a visitor sees
    at a glance where the user was pleased or unhappy."""
    labels = iter(result.turns)
    marks: list[tuple[str, str | None]] = []
    for turn in turns:
        if turn["role"] == "system":
            continue
        if turn["role"] != "user":
            marks.append((f"Assistant: {turn['content'][:200]}\n", None))
            continue
        label = next(labels, None)
        kinds = [name for name, found in (("SAT", label and label.satisfaction),
                                           ("DSAT", label and label.dissatisfaction))
                 if any(category != "N/A" for category in found or ())]
        marks.append((f"User: {turn['content'][:200]}", " + ".join(kinds) or None))
        marks.append(("\n", None))
    return marks


def analyse(turns: list[dict[str, str]], backend: Any = None) -> dict[str, Any]:
    """Labels and preference summary of one conversation (rules when ``backend`` is None)."""
    from convohub.wildfeedback.identify import identify
    from convohub.wildfeedback.preferences import summarise

    result = identify([t for t in turns if t["role"] != "system"], backend)
    summary = summarise([t for t in turns if t["role"] != "system"], result, backend)
    return {"result": result, "rows": label_rows(turns, result), "marks": feedback_marks(turns, result),
            "summary": summary,
            "labeller": result.labeller, "sat": result.sat, "dsat": result.dsat}


def query_prompt(turns: Sequence[Mapping[str, str]], summary: Sequence[Mapping[str, Any]]) -> tuple[list[dict], list[str]]:
    """The prompt to answer (the conversation up to the query user turn the first summary names, else up to
    the last user turn) and the checklist (that summary's preferences, else none)."""
    user_positions = [i for i, t in enumerate(turns) if t["role"] == "user"]
    position, checklist = user_positions[-1], []
    if summary:
        k = int(summary[0]["query"])
        if 1 <= k <= len(user_positions):
            position, checklist = user_positions[k - 1], [str(p) for p in summary[0]["preferences"]]
    return [dict(t) for t in turns[: position + 1]], checklist


def compare(turns: list[dict[str, str]], base: Any, aligned: Any, judge: Any, *, max_new_tokens: int = 64,
            summary: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Base vs aligned answers to the query and the judge's verdicts (with checklist, both orders)."""
    from convohub.metrics.checklist_judge import judge_pairs
    from convohub.wildfeedback.evaluation import generate_responses

    if summary is None:
        summary = analyse(turns)["summary"]
    prompt, checklist = query_prompt(turns, summary)
    answers = [generate_responses(b, [prompt], max_new_tokens=max_new_tokens, max_prompt_length=384)[0]
               for b in (base, aligned)]
    [j] = judge_pairs([answers[1]], [answers[0]], [prompt[:-1]], [prompt[-1]["content"]], [checklist], judge,
                      with_checklist=True)
    outcome = {"win": "aligned model wins", "lose": "base model wins", "tie": "tie", None: "judge output unparseable"}
    verdict = {"outcome": outcome[j.outcome], "aligned_reward": j.reward,
               "verdicts (aligned as A, aligned as B)": list(j.verdicts),
               "rewards (aligned as A, aligned as B)": list(j.rewards), "checklist": checklist,
               "judge": judge.model_id}
    return {"prompt": prompt, "base": answers[0], "aligned": answers[1], "verdict": verdict}


def verdict_frame(verdict: Mapping[str, Any]) -> Any:
    """How many of the two judging orders favoured each side, as bars (aligned better / tie / base better).

    The judge sees each pair twice, with the answers swapped, so the picture shows at a glance who won and
    whether the two orders agree; every category is present (zeros included) so a tie is a visible bar of 2,
    not an empty chart. An order whose verdict could not be parsed counts as "unparsed".
    """
    import pandas as pd

    counts = {"aligned better": 0, "tie": 0, "base better": 0}
    for reward in verdict["rewards (aligned as A, aligned as B)"]:
        key = ("unparsed" if reward is None else "aligned better" if reward > 0
               else "base better" if reward < 0 else "tie")
        counts[key] = counts.get(key, 0) + 1
    return pd.DataFrame(list(counts.items()), columns=["verdict", "judging orders"])


def export_space(target: Any, profile: str = "tiny", repo: Path | None = None) -> Path:
    """Write the Space folder from ``spaces/wildfeedback`` with this release's model and dataset ids."""
    from convohub.hub import write_space
    from convohub.paths import repo_root
    from convohub.wildfeedback.alignment import DATASET_REPO, model_name

    repo = Path(repo) if repo is not None else repo_root()
    front = {"datasets": [target.repo_id(DATASET_REPO)], "models": [target.repo_id(model_name(profile))]}
    return write_space(target, SPACE_NAME, repo / "spaces" / "wildfeedback", extra_front_matter=front)
