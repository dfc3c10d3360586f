"""Registers WildChat-AQA (issue 13) as a release system: the ``wildchat-aqa`` dataset, built by the
construction pipeline (:mod:`convohub.aqa.pipeline`) or read from the authors' release (``--source``).

Profiles: ``tiny`` runs the pipeline on the sample corpus with the offline SmolLM2 (and the MiniLM labeller
for closed-list choices, :mod:`convohub.aqa.settings` says why); ``paper`` runs it on WildChat-1M (the Hub's
``allenai/WildChat-1M``, or the local export or Hub id in ``CONVOHUB_WILDCHAT_AQA_CORPUS``) with the
configured LLM for every step. ``--llm rules`` keeps SmolLM2 for what only an LLM can write (summaries,
keywords, taxonomies: there is no rule stand-in for them, and the log says so), labels with MiniLM and words
the questions with the template. ``CONVOHUB_WILDCHAT_AQA_SOURCE`` points a release run at the authors'
datasets, as ``--source`` does for ``convohub datasets build wildchat-aqa``.

Steps (:data:`STEPS`): build the dataset; train, evaluate and publish the fine-tuned causal LM (method (c),
:mod:`convohub.aqa.model_specs`); rank every question with every method side by side and write the paper's
Table 3 layout into the dataset card (:func:`convohub.aqa.release_eval.evaluate_release`, which takes the
fine-tuned model's row from the step before); export the Space.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from convohub.aqa.benchmark import BENCHMARK
from convohub.aqa.cli import add_cli
from convohub.aqa.dataset import DATASET_NAME, build_dataset
from convohub.aqa.model_specs import SPEC
from convohub.model_spec import release_steps
from convohub.registry import DatasetBuilder, Step, System

SOURCE_ENV = "CONVOHUB_WILDCHAT_AQA_SOURCE"
CORPUS_ENV = "CONVOHUB_WILDCHAT_AQA_CORPUS"
PAPER_CORPUS = "allenai/WildChat-1M"


def backends_for(ctx: Any, settings: Any) -> Any:
    """The pipeline's backends for a release context (module doc)."""
    from convohub.aqa.pipeline import Backends

    writer = ctx.chat_llm()
    if ctx.use_rules:
        ctx.log(f"WildChat-AQA: summaries, keywords and taxonomies are written by {writer.name} (no rule stand-in "
                "writes them); labels by MiniLM, question wording by the template")
        return Backends(writer, None, None)
    labeller = writer if settings.labeller == "llm" else None
    return Backends(writer, labeller, writer)


def _corpus_rows(settings: Any) -> tuple[Any, str]:
    from convohub.aqa.corpus import sample_rows

    if settings.profile == "tiny":
        return sample_rows(settings), (f"sample(users={settings.sample_users}, sessions={settings.sample_sessions}, "
                                       f"weeks={settings.sample_weeks}, seed={settings.seed})")
    from convohub.corpus.dataset import iter_source_rows

    corpus = os.environ.get(CORPUS_ENV) or PAPER_CORPUS
    return iter_source_rows(corpus), str(corpus)


def build_wildchat_aqa(ctx: Any, source: Path | None = None) -> Path:
    """Write ``wildchat-aqa`` for a release context: from the authors' datasets under ``source``, else by the
    construction pipeline of ``ctx.profile``."""
    from convohub.aqa.corpus import tokenizer_label
    from convohub.aqa.settings import settings_for

    if source is None and os.environ.get(SOURCE_ENV):
        source = Path(os.environ[SOURCE_ENV])
    settings = settings_for(ctx.profile, seed=ctx.seed)
    if source is not None:
        from convohub.aqa.source import read_source

        data = read_source(Path(source))
        read = ", ".join(f"{k} {v}" for k, v in data.read.items())
        provenance = (f"Read from the authors' released datasets in `{Path(source).name}` by `convohub datasets "
                      f"build {DATASET_NAME} --source ...` ({read} rows), field by field; topic and subtopic ids "
                      "mapped to names, `support` recomputed from each question's conditions over the "
                      "conversations (empty when they were not given), conversations and summaries PII-scrubbed.")
        return build_dataset(ctx.target, ctx.repo, source_data=data, provenance=provenance, pii=data.pii,
                             tokenizer="the authors' (LLaMA-3)")
    from convohub.aqa.pipeline import run_pipeline

    rows, origin = _corpus_rows(settings)
    backends = backends_for(ctx, settings)
    work = ctx.scratch("aqa", f"build-{ctx.profile}")
    build = run_pipeline(rows, settings, work, backends, source=origin, log=ctx.log)
    if settings.profile == "tiny":
        provenance = (f"Constructed offline by `convohub datasets build {DATASET_NAME}` (tiny profile, seed "
                      f"{ctx.seed}) from convohub's sample corpus (`{origin}`): synthetic WildChat-format "
                      "conversations written from convohub's own templates, no real user data, annotated by the "
                      "models named below. It runs every step of the paper's construction at a small scale, with "
                      "the thresholds scaled as the settings table says; it is not the paper's benchmark "
                      "(build that with `--source` from the authors' release, or with the paper profile).")
    else:
        provenance = (f"Constructed by the paper profile of `convohub release` from `{origin}` with the models "
                      "named below.")
    return build_dataset(ctx.target, ctx.repo, build=build, settings=settings, provenance=provenance,
                         pii=build.report["corpus"]["pii"], tokenizer=tokenizer_label(settings.tokenizer))


def _step_build(ctx: Any) -> dict[str, Any]:
    return {"wildchat_aqa_dir": build_wildchat_aqa(ctx)}


def _dataset_dir(ctx: Any) -> Path:
    return Path(ctx.artifacts["wildchat_aqa_dir"])


def _step_methods(ctx: Any) -> dict[str, Any]:
    from convohub.aqa.release_eval import evaluate_release

    return evaluate_release(ctx, _dataset_dir(ctx))


def _step_space(ctx: Any) -> dict[str, Any]:
    from convohub.aqa.space import export_space

    dataset_id = ctx.target.repo_id(DATASET_NAME)
    model = ctx.artifacts.get(SPEC.artifact("card_dir"))
    models = [ctx.target.repo_id(Path(model).name)] if model else []
    return {"wildchat_aqa_space_dir": export_space(ctx.target, ctx.repo, dataset_id=dataset_id, models=models)}


STEPS: tuple[Step, ...] = (
    Step("build", DATASET_NAME, _step_build, settings=(SOURCE_ENV, CORPUS_ENV)),
    *release_steps(SPEC, system="aqa", dataset=_dataset_dir, dataset_reads=("wildchat_aqa_dir",)),
    Step("evaluate", "wildchat-aqa-methods", _step_methods),
    Step("space", "wildchat-aqa-space", _step_space),
)

SYSTEM = System(
    name="aqa",
    title="WildChat-AQA: aggregative question answering over chat logs",
    steps=STEPS,
    datasets=(DatasetBuilder(DATASET_NAME, "Aggregative questions over chat logs (questions, conversations, "
                             "summaries)", build_wildchat_aqa),),
    space="wildchat_aqa",
    add_cli=add_cli,
    benchmarks=(BENCHMARK,),
    cost=9.1,
)
