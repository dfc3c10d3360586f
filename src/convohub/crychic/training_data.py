"""Build the training data of CRyCHIc's three models into one folder (``convohub crychic training-data``).

* ``ifqc``: LLM-synthesised sentences (:mod:`convohub.crychic.ifqc_data`);
* ``simplifier``: corpus prompts with sentence labels (:mod:`convohub.crychic.simplifier_data`);
* ``judge``: parent / non-parent pairs known by construction (:mod:`convohub.crychic.judge_data`).

The folder is what the training scripts' ``--dataset_path`` names; its ``record.json`` says, per task, who
produced the rows (model or labeller), the counts, the rejections and retries, and the labeller agreement
that chose the simplifier's labeller. Intermediate state lives in ``<out>/work`` (LLM response cache and
stage files), so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convohub.crychic.data_common import update_record, write_rows
from convohub.crychic.ifqc_data import IFQCSettings, build_ifqc_data
from convohub.crychic.judge_data import JudgeSettings, build_judge_data, write_trees
from convohub.crychic.simplifier_data import AUTO, SimplifierSettings, build_simplifier_data
from convohub.llm import ChatBackend

TASKS = ("ifqc", "simplifier", "judge")


def build_training_data(out: str | Path, tasks: Sequence[str] = TASKS, *, llm: str | ChatBackend = "smollm2",
                        labeller: str = AUTO, ifqc: IFQCSettings | None = None,
                        simplifier: SimplifierSettings | None = None, judge: JudgeSettings | None = None,
                        work: Path | None = None, progress: bool = False) -> dict[str, Any]:
    """Build ``tasks`` into ``out``; returns the folder's record. ``llm`` synthesises the IFQC sentences and is
    the LLM candidate of the simplifier's labeller (``labeller``: ``auto``, ``rules:cues-v2`` or an LLM spec)."""
    out = Path(out)
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; known: {', '.join(TASKS)}")
    work = Path(work) if work is not None else out / "work"
    record: dict[str, Any] = {}
    if isinstance(llm, str) and ("ifqc" in tasks or ("simplifier" in tasks and labeller == AUTO)):
        from convohub.llm import make_backend

        # one backend for both tasks: a local model (the offline SmolLM2) loads its weights on construction
        llm = make_backend(llm)
    if "ifqc" in tasks:
        rows, entry = build_ifqc_data(llm, ifqc, work=work, progress=progress)  # a backend by now (above)
        record = update_record(out, "ifqc", {**entry, "rows": write_rows(out, "ifqc", rows)})
    if "simplifier" in tasks:
        rows, entry = build_simplifier_data(labeller, simplifier, work=work, llm=llm, progress=progress)
        record = update_record(out, "simplifier", {**entry, "rows": write_rows(out, "simplifier", rows)})
    if "judge" in tasks:
        rows, entry, trees = build_judge_data(judge, work=work)
        write_trees(out, trees)
        record = update_record(out, "judge", {**entry, "rows": write_rows(out, "judge", rows)})
    return record
