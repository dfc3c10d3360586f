"""Registers PerQA (the data half of ReQAP, issue 4) as a release system: one build step, one dataset.

The ``tiny`` profile generates the release-size PerQA offline (20 personas, ~6 years of events each,
1,000+ questions; it builds in well under a minute). The ``paper`` profile converts the authors'
release, found via ``--source`` or the ``CONVOHUB_PERQA_SOURCE`` environment variable. Calendar, mail
and social-media texts come from convohub's templates unless ``CONVOHUB_PERQA_VERBALISER=llm`` asks the
configured LLM backend to write them, and ``CONVOHUB_PERQA_TEMPLATES=FILE`` adds the templates that
``convohub reqap expand`` had an LLM write.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from convohub.perqa.dataset import DATASET_NAME, PAPER_DOWNLOAD, build_perqa
from convohub.registry import DatasetBuilder, Step, System
from convohub.scoring import Benchmark

SOURCE_ENV = "CONVOHUB_PERQA_SOURCE"
VERBALISER_ENV = "CONVOHUB_PERQA_VERBALISER"
#: ``CONVOHUB_PERQA_TEMPLATES=FILE``: add the LLM-written templates of ``convohub reqap expand`` to a generated build
TEMPLATES_ENV = "CONVOHUB_PERQA_TEMPLATES"


def _build_dataset(ctx: Any, source: Path | None) -> Path:
    if source is None and os.environ.get(SOURCE_ENV):
        source = Path(os.environ[SOURCE_ENV])
    if source is None and ctx.profile == "paper":
        raise FileNotFoundError(f"the paper profile builds PerQA from the authors' data: download {PAPER_DOWNLOAD}, "
                                f"then pass --source <DIR> or set {SOURCE_ENV}=<DIR>")
    if source is not None and not Path(source).is_dir():
        raise FileNotFoundError(f"PerQA source {source} is not a folder; expected {PAPER_DOWNLOAD}")
    llm = ctx.llm if os.environ.get(VERBALISER_ENV, "templates") == "llm" else None
    if llm is None and os.environ.get(VERBALISER_ENV) == "llm":
        raise RuntimeError(f"{VERBALISER_ENV}=llm but no LLM backend is configured (CONVOHUB_LLM_BASE_URL)")
    config = None
    if os.environ.get(TEMPLATES_ENV):
        if source is not None:
            raise ValueError(f"{TEMPLATES_ENV} adds templates to a generated PerQA; unset it to read {source}")
        from convohub.perqa.expand import read_templates
        from convohub.perqa.generate import PerQAConfig

        config = PerQAConfig(generated=tuple(read_templates(Path(os.environ[TEMPLATES_ENV]))))
    return build_perqa(ctx.target, ctx.repo, source=source, config=config, llm=llm)


def _step_build(ctx: Any) -> dict[str, Any]:
    return {"perqa_dir": _build_dataset(ctx, None)}


def _score_hit_at_1(predictions: list[Any], references: list[Any]) -> dict[str, float]:
    from convohub.metrics import hit_at_1

    return hit_at_1(predictions, references, relax=0.1)


#: ``convohub evaluate perqa SUBMISSION.jsonl``: one {"id": question id, "prediction": answer string or null
#: for a failed run} per test question; Hit@1 and Rlx-Hit@1 (10% slack) with the spec's matching rules.
BENCHMARK = Benchmark(
    name="perqa", description="PerQA test questions, Hit@1 / Rlx-Hit@1", dataset=DATASET_NAME,
    config="questions", split="test", id_field="id", task_type="question-answering",
    prediction_type=(str, type(None)), reference=lambda row: json.loads(row["answers"]), score=_score_hit_at_1,
)

SYSTEM = System(
    name="perqa",
    title="PerQA: persona-based questions over heterogeneous personal data (ReQAP's benchmark)",
    steps=(Step("build", DATASET_NAME, _step_build, settings=(SOURCE_ENV, VERBALISER_ENV, TEMPLATES_ENV)),),
    datasets=(DatasetBuilder(DATASET_NAME, "PerQA personas, personal events and SQL-grounded questions",
                             _build_dataset),),
    benchmarks=(BENCHMARK,),
    cost=0.2,
)
