"""ReQAP demo: ask a question about a persona's personal data and see the answer, the operator tree that
produced it and what every operator received and returned.

Environment: CONVOHUB_DATASET (PerQA dataset id or local folder). The trained chain runs by default (QUD ->
RETRIEVE cross-encoders -> EXTRACT), its models taken from the release folder CONVOHUB_HUB (default
hub_release) or the Hub namespace CONVOHUB_NAMESPACE; CONVOHUB_DECOMPOSER / CONVOHUB_RETRIEVER /
CONVOHUB_EXTRACTOR name other components with the CLI's specs (gold is the ORACLE, said on the page).
Everything runs on CPU. `demo` is built at import; it launches only
when run as a script.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import gradio as gr

from convohub.hub import resolve_folder
from convohub.reqap import space

DATASET = os.environ.get("CONVOHUB_DATASET", "convohub/perqa")
SPLIT = "test"
UPLOAD = "(uploaded file)"
try:  # the trained chain by default, like `convohub reqap ask`; stand-ins only when named (CONVOHUB_*)
    SPECS, SOURCE = space.component_specs(os.environ)
    PROBLEM = None
except FileNotFoundError as err:  # no release reachable: the page says what to configure
    SPECS, SOURCE, PROBLEM = {}, None, str(err)


@lru_cache(maxsize=1)
def _dataset() -> Any:
    return resolve_folder(DATASET, "dataset")


@lru_cache(maxsize=1)
def _system() -> Any:
    from convohub.reqap.components.build import make_system

    if PROBLEM:
        raise gr.Error(PROBLEM)
    return make_system("reqap", **SPECS, budget_s=120.0)


def _components_markdown() -> str:
    from convohub.reqap.components.build import describe_components, header

    if PROBLEM:
        return f"**No components configured:** {PROBLEM}"
    lines = header(describe_components("reqap", **SPECS, source=SOURCE)).splitlines()
    return "\n".join(f"- **{line}**" if line.startswith("ORACLE") else f"- {line}" for line in lines)


@lru_cache(maxsize=8)
def _persona(persona_id: str) -> Any:
    from convohub.reqap.data.perqa import load_persona

    store, questions, _ = load_persona(_dataset(), persona_id, canonical=False)
    decomposer, extractor = _system().decomposer, _system().extractor
    if hasattr(decomposer, "add"):
        for q in questions:
            decomposer.add(q)
    if hasattr(extractor, "use_persona"):  # the trained EXTRACT model reads the persona's names
        from convohub.reqap.data.perqa import persona_record

        extractor.use_persona(persona_record(_dataset(), persona_id))
    return store


def personas() -> list[str]:
    """Persona ids of the test split."""
    from convohub.reqap.data.perqa import persona_ids

    return persona_ids(_dataset(), SPLIT)


def answer(persona_id: str, upload: Any, question: str) -> tuple[str, str, str, list[list[Any]]]:
    """Answer, operator tree (drawn as SVG and as a Markdown outline) and per-node trace rows for the chosen
    persona or upload."""
    try:
        if persona_id == UPLOAD or (upload and not persona_id):
            if not upload:
                raise ValueError("upload a CSV ({p}_obs.csv layout) or .ics file first")
            path = str(getattr(upload, "name", upload))
            store = space.events_from_ics(path) if path.lower().endswith(".ics") else space.events_from_csv(path)
        else:
            store = _persona(persona_id)
        text, tree, rows, result = space.ask(_system(), question, store)
    except (ValueError, KeyError, FileNotFoundError) as err:
        raise gr.Error(str(err)) from err
    return text, space.tree_picture(result["tree"]), tree, rows


def _choices() -> list[str]:
    try:
        return [*personas(), UPLOAD]
    except (FileNotFoundError, OSError, ValueError):  # no dataset reachable: uploads still work
        return [UPLOAD]


def _examples() -> tuple[list[list[str]], str]:
    """(persona, question) examples and a line saying where they come from: those the release picked for the
    trained chain (examples.json beside this file), else test questions the gold trees cover."""
    picked = space.read_examples(Path(__file__).parent)
    if picked:
        return [[r["persona_id"], r["question"]] for r in picked], space.examples_note(picked)
    try:
        found = [[p, q] for p, q in space.example_questions(_dataset(), SPLIT)]
    except (FileNotFoundError, OSError, ValueError):
        found = []
    return found, "Examples: test questions, one per template (the trained QUD may write no tree for some)."


_CHOICES = _choices()
_EXAMPLES, _EXAMPLES_NOTE = _examples()
_PERSONA = _EXAMPLES[0][0] if _EXAMPLES and _EXAMPLES[0][0] in _CHOICES else _CHOICES[0]
_QUESTION = _EXAMPLES[0][1] if _EXAMPLES else "How many hours have I spent watching TV series altogether?"
with gr.Blocks(title="ReQAP: operator trees over personal data") as demo:
    gr.Markdown("# ReQAP: question answering over personal data\nQuestions are decomposed into an operator "
                "tree (RETRIEVE, EXTRACT, FILTER, JOIN, GROUP_BY, ...), which runs over the persona's calendar, "
                "mails, posts, streams, purchases and workouts from `" + DATASET + "`.\n\n" + _components_markdown())
    with gr.Row():
        persona_in = gr.Dropdown(_CHOICES, value=_PERSONA, label="persona", allow_custom_value=True)
        upload_in = gr.File(label="or upload events (.csv in the {p}_obs.csv layout, or .ics)",
                            file_types=[".csv", ".ics"])
    question_in = gr.Textbox(label="question", value=_QUESTION)
    run = gr.Button("Answer", variant="primary")
    answer_out = gr.Textbox(label="answer")
    picture_out = gr.HTML(label="operator tree", elem_id="tree-picture")
    tree_out = gr.Markdown(label="operator tree (outline)")
    trace_out = gr.Dataframe(headers=space.TRACE_HEADERS, label="per-node inputs and outputs", interactive=False)
    if _EXAMPLES:
        gr.Markdown(_EXAMPLES_NOTE)
        gr.Examples(_EXAMPLES, [persona_in, question_in])
    run.click(answer, [persona_in, upload_in, question_in], [answer_out, picture_out, tree_out, trace_out],
              api_name="answer")
    gr.Button("List personas", visible=False).click(personas, None, gr.JSON(visible=False), api_name="personas")

# One question at a time (the cached system and persona stores are shared, and on a CPU Space a second worker
# only splits the same cores); up to 128 visitors wait in the queue instead of being refused.
# benchmarks/bench_spaces.py checks that 50 concurrent clients all get answers.
demo.queue(default_concurrency_limit=1, max_size=128)

if __name__ == "__main__":
    demo.launch()
