"""Registers the shared corpus as a release system: dataset -> chat LM training -> perplexity -> card ->
Space (a corpus explorer and PII-scrubber demo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.corpus import chat_lm
from convohub.corpus.dataset import DATASET_NAME, build_wildchat_sample
from convohub.hub import read_json
from convohub.registry import DatasetBuilder, Step, System

SPACE_NAME = "wildchat-sample-explorer"
PAPER_SOURCE = "allenai/WildChat-1M"


def _build_dataset(ctx: Any, source: Path | None) -> Path:
    if source is None and ctx.profile == "paper":
        source = PAPER_SOURCE  # type: ignore[assignment]
    return build_wildchat_sample(ctx.target, ctx.repo, source=source, seed=ctx.seed)


def _step_build(ctx: Any) -> dict[str, Any]:
    return {"dataset_dir": _build_dataset(ctx, None)}


def _step_train(ctx: Any) -> dict[str, Any]:
    out = ctx.scratch("corpus", f"chat_lm-{ctx.profile}")
    chat_lm.train(ctx.repo, ctx.profile, Path(ctx.artifacts["dataset_dir"]), out, ctx.seed,
                  overrides=ctx.train_overrides(), log_file=ctx.scratch("corpus") / "chat_lm_train.log")
    return {"chat_lm_dir": out}


def _step_evaluate(ctx: Any) -> dict[str, Any]:
    from convohub.hub import atomic_write_text, dump_json

    results = chat_lm.evaluate(Path(ctx.artifacts["chat_lm_dir"]), Path(ctx.artifacts["dataset_dir"]))
    path = ctx.scratch("corpus") / "chat_lm_eval.json"
    atomic_write_text(path, dump_json(results))
    return {"chat_lm_eval_path": path, "perplexity_base": results["perplexity_base"],
            "perplexity": results["perplexity_trained"]}


def _step_card(ctx: Any) -> dict[str, Any]:
    results = read_json(Path(ctx.artifacts["chat_lm_eval_path"]))
    path = chat_lm.publish(ctx.target, ctx.profile, Path(ctx.artifacts["chat_lm_dir"]), results,
                           chat_lm.recipe_path(ctx.repo, ctx.profile))
    return {"model_dir": path}


def _step_space(ctx: Any) -> dict[str, Any]:
    from convohub.hub import write_space

    front = {"datasets": [ctx.target.repo_id(DATASET_NAME)],
             "models": [ctx.target.repo_id(chat_lm.model_name(ctx.profile))]}
    path = write_space(ctx.target, SPACE_NAME, ctx.repo / "spaces" / "corpus", extra_front_matter=front)
    return {"space_dir": path}


SYSTEM = System(
    name="corpus",
    title="WildChat-format corpus and chat LM",
    steps=(
        Step("build", DATASET_NAME, _step_build),
        Step("train", "chat-lm", _step_train),
        Step("evaluate", "chat-lm-perplexity", _step_evaluate),
        Step("card", "chat-lm-card", _step_card),
        Step("space", SPACE_NAME, _step_space),
    ),
    datasets=(DatasetBuilder(DATASET_NAME, "WildChat-format conversations, PII-scrubbed, split by user",
                             _build_dataset),),
    space="corpus",
)
