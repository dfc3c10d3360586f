"""Gradio Space for the sq_quality metric.

Importing this file only builds ``demo`` (so tests can import it); ``python app.py`` serves it.
"""

from pathlib import Path

from convohub.metrics._space import build_metric_demo

demo = build_metric_demo(
    Path(__file__).resolve().parent,
    title="Suggested-question quality (ProMISe)",
    description="Self-BLEU, MS-TTR, BLEU and BERTScore of suggested questions against the user's intent (ProMISe).",
    example_predictions=[["What drones cost under $100?", "Which cheap drone has a camera?"]],
    example_references=["buy a cheap drone with a camera"],
    example_kwargs={},
)

if __name__ == "__main__":
    demo.launch()
