"""The CRyCHIc Space's logic (``spaces/crychic/app.py`` is a thin Gradio layer over it) and its export.

Paste a conversation (``User:`` / ``Assistant:`` lines, a JSON list of messages, or a WildChatTree record)
or pick one of WildChatTree's test conversations; the release's three models reconstruct its tree turn by
turn. The page draws the reconstructed tree beside the gold tree (when the input carries one, turns whose
parent differs are amber), lists each turn's decision (module, score, rule) and shows the filtered history
of the last prompt: what an LLM would receive with it.

Models come from a local hub root a release wrote (offline) or from the Hub under a namespace
(:mod:`convohub.crychic.published`); the test conversations from a built ``wildchat-tree`` folder or its
Hub id (:func:`convohub.hub.resolve_folder`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.crychic.conversation_input import ConversationInput

SPACE_NAME = "crychic-demo"
#: the dropdown entry that reconstructs the pasted text instead of a test conversation
PASTED = "(pasted conversation)"
EXAMPLE = """User: Write a short poem about the sea.
Assistant: Waves roll in and out, the grey sea sighs, gulls circle over the harbour.
User: What is the boiling point of water at high altitude?
Assistant: It is lower than 100 °C: about 90 °C at 3,000 m.
User: Make the poem rhyme.
Assistant: The waves roll in, the waves roll out, the gulls above them wheel about.
User: Thanks! Now translate it into French."""


def resolve_models(spec: str, profile: str = "tiny") -> dict[str, Path]:
    """task -> model folder: ``spec`` is a local hub root a release wrote, or a Hub namespace."""
    from convohub.crychic.published import hub_models, local_models

    path = Path(spec).expanduser()
    return local_models(path, profile=profile) if path.is_dir() else hub_models(spec, profile)


def split_conversations(dataset_dir: Path, limit: int = 50) -> dict[str, ConversationInput]:
    """The first ``limit`` test conversations of a built WildChatTree folder, by conversation id, with their
    gold parents."""
    from convohub.crychic.evaluate import load_trees

    out = {}
    for row in load_trees(Path(dataset_dir))[:limit]:
        turns = row["turns"]
        out[row["conversation_id"]] = ConversationInput(
            row["conversation_id"], [(t["user_prompt"], t["assistant_response"]) for t in turns],
            [int(t["parent"]) for t in turns])
    return out


def transcript(conversation: ConversationInput) -> str:
    """The conversation as ``User:`` / ``Assistant:`` lines (what the textbox shows for a picked one)."""
    lines = []
    for prompt, response in conversation.exchanges:
        lines.append(f"User: {prompt}")
        if response:
            lines.append(f"Assistant: {response}")
    return "\n".join(lines)


def reconstruct(make_builder: Any, conversation: ConversationInput) -> tuple[str, str, list[list[Any]], str]:
    """(reconstructed tree SVG, gold tree SVG or a note, decision rows, filtered history of the last prompt)."""
    from convohub.crychic.display import decision_rows, history_markdown, tree_picture
    from convohub.crychic.reconstruct import reconstruct as replay

    builder = replay(conversation.exchanges, make_builder)
    prompts = conversation.prompts
    gold = conversation.gold
    notes = [d.module + (f" {d.score:.2f}" if d.score is not None else "") for d in builder.decisions]
    differs = [g != p for g, p in zip(gold, builder.parents, strict=True)] if gold else None
    picture = tree_picture(builder.parents, prompts, notes=notes, differs=differs, title="reconstructed chat tree")
    if gold:
        gold_picture = tree_picture(gold, prompts, title="gold chat tree")
        right = sum(not d for d in differs or [])
        gold_picture = (f"<p>Gold tree: {right} of {len(gold)} reconstructed parents match (amber turns differ)."
                        f"</p>{gold_picture}")
    else:
        gold_picture = ("<p>No gold tree for a pasted conversation: pick a test conversation, or paste a "
                        "WildChatTree record (JSON with <code>turns</code> and their <code>parent</code>).</p>")
    last = len(builder.turns) - 1
    return picture, threshold_note(builder) + gold_picture, decision_rows(builder, gold), history_markdown(builder, last)


def threshold_note(builder: Any) -> str:
    """The judge's root threshold and where it came from, for a visitor reading the judge's scores (empty for a
    builder without a judge)."""
    origin = getattr(builder, "threshold_origin", None)
    if origin is None:
        return ""
    implicit = (f" The IFQC calls a prompt an implicit follow-up of the most recent turn above "
                f"{builder.implicit_threshold} ({builder.implicit_threshold_origin})."
                if getattr(builder, "ifqc", None) is not None else "")
    return (f"<p>The judge's threshold is {builder.threshold} ({origin}): the best-scoring earlier "
            f"turn becomes the parent only above it, else the prompt starts a new tree.{implicit}</p>")


def export_space(target: Any, repo: Path, *, dataset_id: str, models: list[str], name: str = SPACE_NAME) -> Path:
    """Write ``spaces/crychic`` as a Space folder under ``target`` (pushed when the target pushes), with this
    release's dataset and model ids in the README front matter."""
    from convohub.hub import write_space

    return write_space(target, name, Path(repo) / "spaces" / "crychic",
                       extra_front_matter={"datasets": [dataset_id], "models": list(models)})
