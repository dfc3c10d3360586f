"""Registers the metric modules as a release system: every ``evaluation/<name>/`` folder is exported as
a metric Space (module + card + app), which is how ``evaluate.load("<namespace>/<name>")`` finds it on
the Hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.registry import Step, System


def metric_folders(repo: Path) -> list[Path]:
    """Every metric folder: one with ``<name>.py`` and a README card."""
    root = repo / "evaluation"
    return sorted(p for p in root.iterdir() if (p / f"{p.name}.py").is_file() and (p / "README.md").is_file())


def _export_metric_spaces(ctx: Any) -> dict[str, Any]:
    from convohub.hub import write_space

    written = [write_space(ctx.target, folder.name, folder, extra_front_matter={"tags": ["evaluate", "metric",
                                                                                        "convohub"]})
               for folder in metric_folders(ctx.repo)]
    return {"metric_spaces": len(written), "metric_spaces_dir": written[0].parent}


SYSTEM = System(
    name="metrics",
    title="Evaluation metrics (evaluate modules)",
    steps=(Step("space", "metric-spaces", _export_metric_spaces),),
    cost=0.1,
)
