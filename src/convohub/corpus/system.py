"""Registers the shared corpus as a release system: dataset -> chat LM training -> perplexity -> card ->
Space (a corpus explorer and PII-scrubber demo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.corpus import chat_lm
from convohub.corpus.dataset import DATASET_NAME, build_wildchat_sample
from convohub.model_spec import release_steps
from convohub.registry import DatasetBuilder, Step, System

SPACE_NAME = "wildchat-sample-explorer"
PAPER_SOURCE = "allenai/WildChat-1M"


def _build_dataset(ctx: Any, source: Path | None) -> Path:
    if source is None and ctx.profile == "paper":
        source = PAPER_SOURCE  # type: ignore[assignment]
    return build_wildchat_sample(ctx.target, ctx.repo, source=source, seed=ctx.seed)


def _step_build(ctx: Any) -> dict[str, Any]:
    return {"dataset_dir": _build_dataset(ctx, None)}


def _step_space(ctx: Any) -> dict[str, Any]:
    from convohub.hub import write_space

    front = {"datasets": [ctx.target.repo_id(DATASET_NAME)],
             "models": [ctx.target.repo_id(chat_lm.SPEC.repo_name(ctx.profile))]}
    path = write_space(ctx.target, SPACE_NAME, ctx.repo / "spaces" / "corpus", extra_front_matter=front)
    return {"space_dir": path}


SYSTEM = System(
    name="corpus",
    title="WildChat-format corpus and chat LM",
    steps=(
        Step("build", DATASET_NAME, _step_build),
        *release_steps(chat_lm.SPEC, system="corpus", dataset=lambda ctx: Path(ctx.artifacts["dataset_dir"]),
                      dataset_reads=("dataset_dir",)),
        Step("space", SPACE_NAME, _step_space),
    ),
    datasets=(DatasetBuilder(DATASET_NAME, "WildChat-format conversations, PII-scrubbed, split by user",
                             _build_dataset),),
    space="corpus",
    cost=2.9,
)
