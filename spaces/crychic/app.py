"""CRyCHIc demo: paste a conversation (or pick one of WildChatTree's test conversations) and see its chat tree
reconstructed turn by turn, drawn beside the gold tree, with each turn's deciding module and score and the
filtered history of the last prompt.

Environment: CONVOHUB_MODELS (a local hub root a release wrote, e.g. ``hub_release``, or the Hub namespace
of the published crychic-*-<profile> models; default ``convohub``), CONVOHUB_PROFILE (``tiny`` or
``paper``), CONVOHUB_DATASET (a built wildchat-tree folder or its Hub id, for the test conversations).
Everything runs on CPU; offline with a local hub root. `demo` is built at import; it launches only when run
as a script.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import gradio as gr

from convohub.crychic import space
from convohub.crychic.components import pipeline_factory
from convohub.crychic.conversation_input import conversation_from_text
from convohub.crychic.display import DECISION_HEADERS

MODELS = os.environ.get("CONVOHUB_MODELS", "convohub")
PROFILE = os.environ.get("CONVOHUB_PROFILE", "tiny")
DATASET = os.environ.get("CONVOHUB_DATASET", "convohub/wildchat-tree")


@lru_cache(maxsize=1)
def _pipeline() -> Any:
    return pipeline_factory(space.resolve_models(MODELS, PROFILE))


@lru_cache(maxsize=1)
def _conversations() -> dict[str, Any]:
    from convohub.hub import resolve_folder

    return space.split_conversations(resolve_folder(DATASET, "dataset"))


def conversations() -> list[str]:
    """Conversation ids of the test split offered in the dropdown."""
    return list(_conversations())


def show(conversation_id: str) -> str:
    """The picked test conversation as a transcript (the pasted text stays when none is picked)."""
    if conversation_id in (None, "", space.PASTED):
        return gr.update()
    return space.transcript(_conversations()[conversation_id])


def reconstruct(conversation_id: str, text: str) -> tuple[str, str, list[list[Any]], str]:
    """Reconstructed tree (SVG), gold tree (SVG or a note), per-turn decisions, history of the last prompt."""
    try:
        if conversation_id and conversation_id != space.PASTED:
            conversation = _conversations()[conversation_id]
        else:
            conversation = conversation_from_text(text)
        return space.reconstruct(_pipeline(), conversation)
    except (ValueError, KeyError, FileNotFoundError) as err:
        raise gr.Error(str(err)) from err


def _choices() -> list[str]:
    try:
        return [space.PASTED, *conversations()]
    except (FileNotFoundError, OSError, ValueError):  # no dataset reachable: pasted conversations still work
        return [space.PASTED]


_CHOICES = _choices()
with gr.Blocks(title="CRyCHIc: chat-tree reconstruction") as demo:
    gr.Markdown("# CRyCHIc: which earlier turn does each prompt build on?\nEvery new prompt of a conversation "
                "gets a parent turn (or starts a tree of its own): the implicit follow-up classifier, the prompt "
                "simplifier and the follow-up judge decide in turn. Models: `" + MODELS + "` (" + PROFILE
                + " profile); test conversations: `" + DATASET + "`.")
    with gr.Row():
        picked_in = gr.Dropdown(_CHOICES, value=_CHOICES[0], label="conversation", allow_custom_value=True)
        run = gr.Button("Reconstruct", variant="primary")
    text_in = gr.Textbox(label="conversation text (User: / Assistant: lines, or JSON)", value=space.EXAMPLE,
                         lines=8)
    with gr.Row():
        picture_out = gr.HTML(label="reconstructed tree", elem_id="tree-picture")
        gold_out = gr.HTML(label="gold tree", elem_id="gold-picture")
    decisions_out = gr.Dataframe(headers=DECISION_HEADERS, label="each turn's decision", interactive=False)
    history_out = gr.Markdown(label="filtered history of the last prompt", elem_id="history")
    picked_in.change(show, picked_in, text_in, api_name=False)
    run.click(reconstruct, [picked_in, text_in], [picture_out, gold_out, decisions_out, history_out],
              api_name="reconstruct")
    gr.Button("List conversations", visible=False).click(conversations, None, gr.JSON(visible=False),
                                                         api_name="conversations")

# One reconstruction at a time (the loaded models are shared, and on a CPU Space a second worker only splits
# the same cores); up to 128 visitors wait in the queue. benchmarks/bench_spaces.py checks 50 concurrent clients.
demo.queue(default_concurrency_limit=1, max_size=128)

if __name__ == "__main__":
    demo.launch()
