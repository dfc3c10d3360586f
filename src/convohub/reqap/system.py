"""Registers ReQAP as a release system over the PerQA release: the EXTRACT seq2seq, the two RETRIEVE
cross-encoders (patterns: 3 classes, events: 2 classes) and the QUD decomposer (SmolLM2 + LoRA) are trained,
each by its script under ``accelerate launch`` (:func:`convohub.training.runs.run_recipe`), each measured on
the test personas (exact match; accuracy/macro-F1 and retrieval recall vs BM25; tree exact match and
end-to-end Hit@1), published with those numbers in their cards, and the Space is exported. Before the QUD card
is written, the trained chain is compared end to end with RAG and CodeGen on the release's LLM, with McNemar's
tests (:mod:`convohub.reqap.release.comparison`); the card reports it.
``convohub reqap execute|ask|evaluate`` come from here (RAG/CodeGen baselines need an LLM: ``reqap evaluate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.model_spec import card_step, evaluate_step, release_steps, train_step
from convohub.registry import Step, System
from convohub.reqap.release import extract, qud, retrieve

#: In release order (the event retriever's evaluation uses the pattern model trained before it). The QUD
#: model is measured with the BM25 first stage and the lookup extractor in the engine: the tiny
#: cross-encoders recall less than BM25 (see their cards).
MODELS = (extract.SPEC, retrieve.PATTERNS, retrieve.EVENTS, qud.SPEC)


#: the artifacts :func:`_perqa_dir` looks up
PERQA_READS = ("perqa_dir",)


def _perqa_dir(ctx: Any) -> Path:
    """The PerQA folder of this run, or of an earlier run into the same root; built if absent."""
    if "perqa_dir" in ctx.artifacts:
        return Path(ctx.artifacts["perqa_dir"])
    folder = ctx.target.repo_dir("datasets", "perqa")
    if (folder / "README.md").is_file():
        return folder
    from convohub.perqa.system import _build_dataset

    return _build_dataset(ctx, None)


def _step_end_to_end(ctx: Any) -> dict[str, Any]:
    """ReQAP (the trained chain) against RAG and CodeGen with the release's LLM on the same test questions,
    with McNemar's tests (:func:`convohub.reqap.release.comparison.compare_for_release`); the QUD card
    reports it."""
    from convohub.reqap.release.comparison import compare_for_release
    from convohub.reqap.release.models import chain_specs

    folders = {kind: Path(ctx.artifacts[spec.artifact("dir")]) for kind, spec in chain_specs().items()}
    path, results = compare_for_release(_perqa_dir(ctx), folders, ctx.chat_llm(), ctx.scratch("reqap", "end-to-end"),
                                        profile=ctx.profile, seed=ctx.seed)
    return {"reqap_end_to_end_path": path,
            **{f"reqap_end_to_end_{name}": r["hit@1"] for name, r in results["systems"].items()}}


def _end_to_end(ctx: Any) -> dict[str, Any]:
    """The QUD card's extra results: the end-to-end comparison."""
    from convohub.hub import read_json

    return {"end_to_end": read_json(Path(ctx.artifacts["reqap_end_to_end_path"]))}


def _steps() -> tuple[Step, ...]:
    """Each model's train -> evaluate -> card; the QUD card waits for the end-to-end comparison, which
    needs all four trained models."""
    from convohub.reqap.release.models import chain_specs

    others = (spec for spec in MODELS if spec is not qud.SPEC)
    data = {"system": "reqap", "dataset": _perqa_dir, "dataset_reads": PERQA_READS}
    chain = tuple(spec.artifact("dir") for spec in chain_specs().values())
    return (*(step for spec in others for step in release_steps(spec, **data)),
            train_step(qud.SPEC, **data), evaluate_step(qud.SPEC, **data),
            Step("evaluate", "reqap-end-to-end", _step_end_to_end, reads=(*chain, *PERQA_READS)),
            card_step(qud.SPEC, extra=_end_to_end, extra_reads=("reqap_end_to_end_path",)))


def _space_examples(ctx: Any) -> list[dict[str, Any]]:
    """The Space's examples (:func:`convohub.reqap.space.space_examples`) from the end-to-end run of the trained
    chain and the QUD evaluation, as far as this release has them (none: the app offers the dataset's)."""
    from convohub.hub import read_json
    from convohub.reqap.release.comparison import run_predictions
    from convohub.reqap.space import space_examples

    end_to_end = ctx.artifacts.get("reqap_end_to_end_path")
    chain = run_predictions(Path(end_to_end).parent) if end_to_end else []
    evaluation = ctx.artifacts.get(qud.SPEC.artifact("eval_path"))
    return space_examples(chain, read_json(Path(evaluation)).get("predictions", []) if evaluation else [])


def _step_space(ctx: Any) -> dict[str, Any]:
    """Export the Space, with example questions the trained chain answers (:func:`_space_examples`)."""
    from convohub.reqap.space import export_space

    models = [ctx.target.repo_id(spec.repo_name(ctx.profile)) for spec in MODELS]
    examples = _space_examples(ctx)
    path = export_space(ctx.target, ctx.repo, dataset_id=ctx.target.repo_id("perqa"), models=models,
                        examples=examples)
    return {"reqap_space_dir": path}


def _add_cli(subparsers: Any) -> None:
    from convohub.reqap.cli import add_cli

    add_cli(subparsers)


SYSTEM = System(
    name="reqap",
    title="ReQAP: operator trees over personal data (QUD, RETRIEVE cross-encoders, EXTRACT, engine, Space)",
    steps=(
        *_steps(),
        Step("space", "reqap-space", _step_space),
    ),
    space="reqap",
    add_cli=_add_cli,
    needs=("perqa",),
    cost=23.3,
)
