"""Registers ReQAP as a release system over the PerQA release: the EXTRACT seq2seq, the two RETRIEVE
cross-encoders (patterns: 3 classes, events: 2 classes) and the QUD decomposer (SmolLM2 + LoRA) are trained,
each by its script under ``accelerate launch`` (:func:`convohub.training.runs.run_recipe`), each measured on
the test personas (exact match; accuracy/macro-F1 and retrieval recall vs BM25; tree exact match and
end-to-end Hit@1), published with those numbers in their cards, and the Space is exported.
``convohub reqap execute|ask|evaluate`` come from here (RAG/CodeGen baselines need an LLM: ``reqap evaluate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.model_spec import release_steps
from convohub.registry import Step, System
from convohub.reqap.release import extract, qud, retrieve

#: In release order (the event retriever's evaluation uses the pattern model trained before it). The QUD
#: model is measured with the BM25 first stage and the lookup extractor in the engine: the tiny
#: cross-encoders recall less than BM25 (see their cards).
MODELS = (extract.SPEC, retrieve.PATTERNS, retrieve.EVENTS, qud.SPEC)


def _perqa_dir(ctx: Any) -> Path:
    """The PerQA folder of this run, or of an earlier run into the same root; built if absent."""
    if "perqa_dir" in ctx.artifacts:
        return Path(ctx.artifacts["perqa_dir"])
    folder = ctx.target.repo_dir("datasets", "perqa")
    if (folder / "README.md").is_file():
        return folder
    from convohub.perqa.system import _build_dataset

    return _build_dataset(ctx, None)


def _step_space(ctx: Any) -> dict[str, Any]:
    from convohub.reqap.space import export_space

    models = [ctx.target.repo_id(spec.repo_name(ctx.profile)) for spec in MODELS]
    path = export_space(ctx.target, ctx.repo, dataset_id=ctx.target.repo_id("perqa"), models=models)
    return {"reqap_space_dir": path}


def _add_cli(subparsers: Any) -> None:
    from convohub.reqap.cli import add_cli

    add_cli(subparsers)


SYSTEM = System(
    name="reqap",
    title="ReQAP: operator trees over personal data (QUD, RETRIEVE cross-encoders, EXTRACT, engine, Space)",
    steps=(
        *(step for spec in MODELS for step in release_steps(spec, system="reqap", dataset=_perqa_dir)),
        Step("space", "reqap-space", _step_space),
    ),
    space="reqap",
    add_cli=_add_cli,
)
