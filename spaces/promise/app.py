"""ProMISe explorer: you play the user. State an intent and a first question; the agent offers four suggested
questions with answers and the snippets they come from; pick one, say none helps, or say your intent is
satisfied. Beside your choice: what the trained user simulator predicted for the same turn, and a chart of its
probability for each choice.

Environment: CONVOHUB_PROMISE_AGENT (the agent LLM: ``smollm2``, the default, ``local:/folder`` or an endpoint
``http://host:8000/v1#model``), CONVOHUB_PROMISE_TASK1_MODEL and CONVOHUB_PROMISE_TASK2_MODEL (the trained
Task 1 and Task 2 classifiers, Hub ids or folders), CONVOHUB_PROMISE_PASSAGES (a passage collection file to
search instead of convohub's own). ``demo`` is built at import; it launches only when run as a script.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import gradio as gr

from convohub.promise.retrieval import configured_collection
from convohub.promise.space import (
    CHOICE_LABELS,
    CHOICES,
    EXAMPLE_INTENT,
    EXAMPLE_QUESTION,
    choose,
    history,
    new_state,
    next_turn,
    probability_frame,
    table,
)

AGENT = os.environ.get("CONVOHUB_PROMISE_AGENT", "smollm2")
TASK1_MODEL = os.environ.get("CONVOHUB_PROMISE_TASK1_MODEL", "convohub/promise-task1-minilm-tiny")
TASK2_MODEL = os.environ.get("CONVOHUB_PROMISE_TASK2_MODEL", "convohub/promise-task2-minilm-tiny")
HEADERS = ["choice", "suggested question", "answer", "snippet"]
#: the passages the agent searches: ``CONVOHUB_PROMISE_PASSAGES`` (a collection file), else convohub's own
COLLECTION = configured_collection()


@lru_cache(maxsize=1)
def _agent() -> tuple[Any, Any]:
    """The agent LLM (answers cached on disk: a repeated question is answered at once) and the retriever."""
    from convohub.llm import make_backend
    from convohub.promise.retrieval import offline_retriever

    cache = Path(tempfile.gettempdir()) / "convohub-promise-space-cache"
    return (make_backend(AGENT, cache_dir=cache, **({"batch_size": 4} if AGENT == "smollm2" else {})),
            offline_retriever(COLLECTION))


@lru_cache(maxsize=1)
def _simulator() -> Any:
    """The trained Task 1 and Task 2 classifiers; a visitor whose Space cannot find them is told which
    settings name them (a failed load is not cached, so fixing the settings and restarting is enough)."""
    from convohub.promise.simulators import EncoderSimulator

    try:
        return EncoderSimulator({"task1": TASK1_MODEL, "task2": TASK2_MODEL})
    except (OSError, ValueError) as exc:
        raise gr.Error(f"The trained user simulator could not be loaded: {exc}. Set CONVOHUB_PROMISE_TASK1_MODEL "
                       "and CONVOHUB_PROMISE_TASK2_MODEL to the Task 1 and Task 2 model folders or Hub ids "
                       f"(now {TASK1_MODEL!r} and {TASK2_MODEL!r}).") from exc


def start(intent: str, question: str) -> tuple[list[list[str]], str, dict[str, Any]]:
    """A new dialogue: the first turn's suggestions, the dialogue so far, and the session state."""
    try:
        data = next_turn(new_state(intent, question), *_agent())
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    return table(data), history(data), json.dumps(data)


def pick(choice: str, data: str | None) -> tuple[str, Any, list[list[str]], str, dict[str, Any]]:
    """Your choice beside the simulator's prediction and probabilities, then the next turn (unless it ended)."""
    if not data:
        raise gr.Error("start a dialogue first")
    data = json.loads(data)
    action = next((a for a, label in CHOICE_LABELS.items() if label == choice), choice)
    simulator = _simulator()  # outside the try: its gr.Error (a ValueError too) names the settings as it is
    try:
        data, probabilities, predicted = choose(data, action, simulator, *_agent())
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc
    verdict = "agrees with you" if predicted == action else "predicted something else"
    text = (f"You chose: {CHOICE_LABELS[action]}. The simulator predicted: {CHOICE_LABELS[predicted]} "
            f"(p = {probabilities[predicted]:.2f}); it {verdict}.")
    return text, probability_frame(probabilities, action), table(data), history(data), json.dumps(data)


with gr.Blocks(title="ProMISe explorer") as demo:
    gr.Markdown("# ProMISe explorer\nYou play the user of a *proactive multi-turn information-seeking dialogue*: "
                "state what you want to find out and a short first question. At each turn the agent (which never "
                f"sees your intent; `{AGENT}` with BM25, re-ranked by MiniLM, over the {len(COLLECTION)}-passage "
                f"collection `{COLLECTION.name}`) suggests four "
                "questions, each asked for the snippet sentence closest to your query (its answer). Pick one, say "
                "none helps, or say your intent is satisfied; the trained user simulator's prediction for the same "
                "turn is shown beside your choice. "
                "Offline models are tiny (SmolLM2-135M, MiniLM): a demonstration of the setting, not of quality.")
    with gr.Row():
        intent = gr.Textbox(label="your intent", value=EXAMPLE_INTENT, lines=2)
        question = gr.Textbox(label="your first question", value=EXAMPLE_QUESTION)
    suggestions = gr.Dataframe(headers=HEADERS, interactive=False, wrap=True, label="suggested questions",
                               column_widths=["8%", "30%", "31%", "31%"])  # the snippets fit without a scroll
    dialogue = gr.Markdown()
    # The dialogue so far (a JSON-ready dict) is kept in the page, not in a server-side gr.State: API users
    # hand it back to /choose (any dialogue can be continued), and a browser sees when a turn has fully arrived
    # (it comes ~1.5 s after the suggestions table is drawn; a Choose clicked before that had no dialogue).
    state = gr.Textbox(label="dialogue state (JSON; the API's /choose takes it back)", lines=2, max_lines=4)
    start_button = gr.Button("Start", variant="primary")
    choice = gr.Radio([CHOICE_LABELS[a] for a in CHOICES], value=CHOICE_LABELS["sq1"], label="your choice")
    comparison = gr.Textbox(label="you vs the simulator")
    chart = gr.BarPlot(x="choice", y="probability", color="who", y_lim=[0, 1],
                       sort=[CHOICE_LABELS[a] for a in CHOICES], elem_id="simulator-chart",
                       label="the simulator's probability for each choice")
    choose_button = gr.Button("Choose")
    choose_button.click(pick, [choice, state], [comparison, chart, suggestions, dialogue, state], api_name="choose")
    # Choose waits while a Start runs: a choice made then would continue the previous dialogue's state.
    (start_button.click(lambda: gr.Button(interactive=False), None, choose_button, queue=False,
                        api_visibility="private")
     .then(start, [intent, question], [suggestions, dialogue, state], api_name="start")
     .then(lambda: gr.Button(interactive=True), None, choose_button, queue=False, api_visibility="private"))

# One request at a time (one shared model on a CPU Space); up to 128 visitors wait in the queue instead of
# being refused. benchmarks/bench_spaces.py checks that 50 concurrent clients all get answers.
demo.queue(default_concurrency_limit=1, max_size=128)

if __name__ == "__main__":
    demo.launch()
