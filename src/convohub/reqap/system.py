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

from convohub.hub import read_json
from convohub.registry import Step, System


def _perqa_dir(ctx: Any) -> Path:
    """The PerQA folder of this run, or of an earlier run into the same root; built if absent."""
    if "perqa_dir" in ctx.artifacts:
        return Path(ctx.artifacts["perqa_dir"])
    folder = ctx.target.repo_dir("datasets", "perqa")
    if (folder / "README.md").is_file():
        return folder
    from convohub.perqa.system import _build_dataset

    return _build_dataset(ctx, None)


def _step_train_extract(ctx: Any) -> dict[str, Any]:
    from convohub.reqap import extract_model

    out = ctx.scratch("reqap", f"extract-{ctx.profile}")
    extract_model.train(ctx.repo, ctx.profile, _perqa_dir(ctx), out, ctx.seed, extra=ctx.train_overrides())
    return {"extract_model_dir": out}


def _step_evaluate_extract(ctx: Any) -> dict[str, Any]:
    from convohub.hub import atomic_write_text, dump_json
    from convohub.reqap import extract_model

    results = extract_model.evaluate(Path(ctx.artifacts["extract_model_dir"]), _perqa_dir(ctx), "test")
    path = ctx.scratch("reqap") / "extract_eval.json"
    atomic_write_text(path, dump_json(results))
    return {"extract_eval_path": path, "extract_exact_match": results["exact_match"]}


def _step_card_extract(ctx: Any) -> dict[str, Any]:
    from convohub.reqap import extract_model

    results = read_json(Path(ctx.artifacts["extract_eval_path"]))
    path = extract_model.publish(ctx.target, ctx.profile, Path(ctx.artifacts["extract_model_dir"]), results,
                                 extract_model.recipe_path(ctx.repo, ctx.profile))
    return {"extract_card_dir": path}


def _train_retrieve(task: str) -> Any:
    def run(ctx: Any) -> dict[str, Any]:
        from convohub.reqap import retrieve_model

        out = ctx.scratch("reqap", f"retrieve-{task}-{ctx.profile}")
        retrieve_model.train(ctx.repo, ctx.profile, _perqa_dir(ctx), out, ctx.seed, task,
                             extra=ctx.train_overrides())
        return {f"retrieve_{task}_dir": out}

    return run


def _evaluate_retrieve(task: str) -> Any:
    def run(ctx: Any) -> dict[str, Any]:
        from convohub.hub import atomic_write_text, dump_json
        from convohub.reqap import retrieve_model

        patterns = ctx.artifacts.get("retrieve_patterns_dir") if task == "events" else None
        results = retrieve_model.evaluate(Path(ctx.artifacts[f"retrieve_{task}_dir"]), _perqa_dir(ctx), "test",
                                          task=task, pattern_model_dir=Path(patterns) if patterns else None)
        path = ctx.scratch("reqap") / f"retrieve_{task}_eval.json"
        atomic_write_text(path, dump_json(results))
        return {f"retrieve_{task}_eval_path": path}

    return run


def _card_retrieve(task: str) -> Any:
    def run(ctx: Any) -> dict[str, Any]:
        from convohub.reqap import retrieve_model

        results = read_json(Path(ctx.artifacts[f"retrieve_{task}_eval_path"]))
        path = retrieve_model.publish(ctx.target, ctx.profile, Path(ctx.artifacts[f"retrieve_{task}_dir"]), results,
                                      retrieve_model.recipe_path(ctx.repo, ctx.profile, task))
        return {f"retrieve_{task}_card_dir": path}

    return run


def _step_train_qud(ctx: Any) -> dict[str, Any]:
    from convohub.reqap import qud_model

    out = ctx.scratch("reqap", f"qud-{ctx.profile}")
    qud_model.train(ctx.repo, ctx.profile, _perqa_dir(ctx), out, ctx.seed, extra=ctx.train_overrides())
    return {"qud_model_dir": out}


def _step_evaluate_qud(ctx: Any) -> dict[str, Any]:
    """Step/tree exact match and end-to-end Hit@1 of the base model and of the trained QUD on the same seeded
    sample of test questions (:data:`~convohub.reqap.qud_model.RELEASE_QUESTIONS`), executed with the BM25
    first stage and the lookup extractor (the tiny cross-encoders recall less than BM25; see their cards)."""
    from convohub.hub import atomic_write_text, dump_json
    from convohub.reqap import qud_model

    results = qud_model.evaluate_with_base(Path(ctx.artifacts["qud_model_dir"]), _perqa_dir(ctx), "test",
                                           seed=ctx.seed)
    path = ctx.scratch("reqap") / "qud_eval.json"
    atomic_write_text(path, dump_json(results))
    return {"qud_eval_path": path}


def _step_card_qud(ctx: Any) -> dict[str, Any]:
    from convohub.reqap import qud_model

    results = read_json(Path(ctx.artifacts["qud_eval_path"]))
    path = qud_model.publish(ctx.target, ctx.profile, Path(ctx.artifacts["qud_model_dir"]), results,
                             qud_model.recipe_path(ctx.repo, ctx.profile))
    return {"qud_card_dir": path}


def _step_space(ctx: Any) -> dict[str, Any]:
    from convohub.reqap import extract_model, qud_model, retrieve_model
    from convohub.reqap.space import export_space

    models = [ctx.target.repo_id(extract_model.model_name(ctx.profile)),
              ctx.target.repo_id(qud_model.model_name(ctx.profile)),
              *(ctx.target.repo_id(retrieve_model.model_name(ctx.profile, task)) for task in ("patterns", "events"))]
    path = export_space(ctx.target, ctx.repo, dataset_id=ctx.target.repo_id("perqa"), models=models)
    return {"reqap_space_dir": path}


def _add_cli(subparsers: Any) -> None:
    from convohub.reqap.cli import add_cli

    add_cli(subparsers)


SYSTEM = System(
    name="reqap",
    title="ReQAP: operator trees over personal data (QUD, RETRIEVE cross-encoders, EXTRACT, engine, Space)",
    steps=(
        Step("train", "reqap-extract", _step_train_extract),
        Step("evaluate", "reqap-extract-exact-match", _step_evaluate_extract),
        Step("card", "reqap-extract-card", _step_card_extract),
        Step("train", "reqap-retrieve-patterns", _train_retrieve("patterns")),
        Step("train", "reqap-retrieve-events", _train_retrieve("events")),
        Step("evaluate", "reqap-retrieve-patterns-accuracy", _evaluate_retrieve("patterns")),
        Step("evaluate", "reqap-retrieve-events-recall", _evaluate_retrieve("events")),
        Step("card", "reqap-retrieve-patterns-card", _card_retrieve("patterns")),
        Step("card", "reqap-retrieve-events-card", _card_retrieve("events")),
        Step("train", "reqap-qud", _step_train_qud),
        Step("evaluate", "reqap-qud-hit-at-1", _step_evaluate_qud),
        Step("card", "reqap-qud-card", _step_card_qud),
        Step("space", "reqap-space", _step_space),
    ),
    space="reqap",
    add_cli=_add_cli,
)
