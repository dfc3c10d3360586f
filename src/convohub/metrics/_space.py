"""The small Gradio app shared by the metric Spaces in ``evaluation/<name>/app.py``.

``evaluate.utils.launch_gradio_widget`` calls ``launch()`` itself and uses Gradio 3 APIs, so it cannot be
imported in a test; this builder only *constructs* the interface and leaves launching to ``__main__``. The
metric module is loaded on the first request, so building the demo is cheap.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=8)
def _load(folder: str, config_name: str | None) -> Any:
    import evaluate

    return evaluate.load(folder, config_name) if config_name else evaluate.load(folder)


def build_metric_demo(
    folder: str | Path,
    title: str,
    description: str,
    example_predictions: Any,
    example_references: Any,
    example_kwargs: dict[str, Any] | None = None,
    config_names: tuple[str, ...] = (),
) -> Any:
    """A ``gr.Interface`` with three JSON text boxes (predictions, references, extra keyword arguments)
    and the metric's scores as JSON and as a bar chart. ``config_names`` adds a dropdown when the module has
    several. The queue serves one computation at a time and lets up to 128 visitors wait rather than refusing
    them (benchmarks/bench_spaces.py checks 50 concurrent clients)."""
    import gradio as gr

    folder = str(Path(folder).resolve())

    from convohub.charts import ZERO_BASED, score_frame

    def score(predictions: str, references: str, kwargs: str, config_name: str | None = None) -> tuple[dict, Any]:
        try:
            extra = json.loads(kwargs) if kwargs.strip() else {}
            metric = _load(folder, config_name or None)
            scores = metric.compute(predictions=json.loads(predictions), references=json.loads(references),
                                    **extra)
        except Exception as exc:  # shown to the Space user instead of a stack trace
            raise gr.Error(f"{type(exc).__name__}: {exc}") from exc
        return scores, score_frame(scores)

    inputs = [
        gr.Textbox(label="predictions (JSON)", lines=4, value=json.dumps(example_predictions)),
        gr.Textbox(label="references (JSON)", lines=4, value=json.dumps(example_references)),
        gr.Textbox(label="keyword arguments (JSON object)", lines=1, value=json.dumps(example_kwargs or {})),
    ]
    if config_names:
        inputs.append(gr.Dropdown(choices=list(config_names), value=config_names[0], label="configuration"))
    outputs = [gr.JSON(label="scores"), gr.BarPlot(x="score", y="value", y_lim=ZERO_BASED, label="scores",
                                                    elem_id="score-chart")]
    demo = gr.Interface(fn=score, inputs=inputs, outputs=outputs, title=title, description=description,
                        flagging_mode="never")
    return demo.queue(default_concurrency_limit=1, max_size=128)
