"""ReQAP against its baselines end to end, the comparison the paper makes: the trained chain, RAG and CodeGen
with the same LLM, on the same test questions, with McNemar's test between ReQAP (SFT) and each baseline.

Why a release step: the QUD card's own Hit@1 says how often the trained chain answers, but whether
decomposing a question into an operator tree pays off only shows beside systems that answer the same
questions without one. Every system here is scored by :func:`convohub.reqap.release.evaluation.evaluate`
(Hit@1, Rlx-Hit@1, per category), each run is kept (``results.json`` + ``predictions.jsonl`` per system, so
``convohub reqap evaluate --compare`` reads them too) and the pairs are tested with
:func:`~convohub.reqap.release.evaluation.compare_runs`.

Systems (:data:`SYSTEMS`): ``reqap_sft`` -- the trained chain, QUD (SFT) -> RETRIEVE (BM25 first stage, the
two cross-encoders) -> EXTRACT (the trained model); ``reqap_icl`` -- the same chain with in-context QUD on
the LLM; ``rag`` -- the ``top_n`` events the event cross-encoder ranks highest among the first stage's
``rank_depth`` best, as JSON, to the LLM;
``codegen`` -- one DuckDB query written by the LLM from the schema and 8 ICL examples of the train split.
The tiny profile leaves ICL QUD out (:data:`PROFILE_SYSTEMS`): in-context QUD samples several options per
step and executes the candidate trees, which took SmolLM2-135M 7 min 20 s for 3 test questions on 2 CPU
cores (``convohub reqap evaluate --decomposer icl --llm smollm2`` runs it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convohub.reqap.engine.executor import DEFAULT_TIME_BUDGET

__all__ = ["COMPARISON_FILE", "PROFILE_BUDGET_S", "PROFILE_QUESTIONS", "PROFILE_SYSTEMS", "RAG_TOP_N", "SCORES_STAGE",
           "SYSTEMS", "compare_for_release", "compare_systems", "question_sample", "run_dir", "run_key",
           "run_predictions"]

#: system name -> (``evaluate``'s system, QUD spec kind): what each compared system runs.
SYSTEMS: dict[str, tuple[str, str | None]] = {
    "reqap_sft": ("reqap", "sft"), "reqap_icl": ("reqap", "icl"), "rag": ("rag", None), "codegen": ("codegen", None),
}
#: The system the baselines are tested against (the paper's ReQAP).
REFERENCE = "reqap_sft"
#: profile -> the systems the release compares.
PROFILE_SYSTEMS: dict[str, tuple[str, ...]] = {"tiny": ("reqap_sft", "rag", "codegen")}
DEFAULT_SYSTEMS = tuple(SYSTEMS)
#: profile -> test questions compared (a seeded sample): the tiny count keeps the step within the main job's 45
#: minutes. With 6 the step took 382 s on one CPU thread beside another system (2026-12-02: ReQAP 144 s, RAG
#: 100 s, CodeGen 122 s with SmolLM2-135M), all three systems without a hit, and the main job ran over its 45
#: minutes; 4 keep the comparison (and McNemar's test) running end to end for about two minutes less.
#: ``convohub reqap evaluate`` compares on every test question.
PROFILE_QUESTIONS: dict[str, int | None] = {"tiny": 4}
DEFAULT_QUESTIONS: int | None = None  # every test question
#: profile -> ReQAP's time per question (decoding and executing all its trees; otherwise the paper's
#: ``DEFAULT_TIME_BUDGET``): a trained chain whose trees retrieve thousands of events runs the EXTRACT model on
#: each, minutes on a CPU. Tiny: 40 s. In the 2026-12-01 release (one CPU thread beside another system) the 32-step
#: chain's answered questions took 8-31 s and its other two ran out of a 60 s budget at 88 and 107 s, all six
#: without a hit, so 40 s keeps every finished run and gives the main job back about a minute and a half.
PROFILE_BUDGET_S: dict[str, float] = {"tiny": 40.0}
#: The release's comparison results, written in the comparison's folder beside the systems' runs.
COMPARISON_FILE = "comparison.json"
#: Events RAG gives the LLM: the paper's setting for its 1B-parameter LLM (100 overflow SmolLM2's 8k context).
RAG_TOP_N = 10


def question_sample(dataset_dir: Path, n: int | None, seed: int, split: str = "test") -> list[str]:
    """Ids of a seeded sample of ``n`` questions of ``split`` (all of them for None), in dataset order."""
    from convohub.reqap.data.perqa import load_questions, sample_questions

    questions = load_questions(dataset_dir, split)
    if not questions:
        raise ValueError(f"{dataset_dir}: split {split!r} has no questions")
    return [q["id"] for q in sample_questions(questions, n, seed)]


def _specs(system: str, components: Mapping[str, str]) -> dict[str, str]:
    """The component specs ``system`` runs: the trained ones, with in-context QUD for ``reqap_icl``."""
    return {**components, "decomposer": components["decomposer"] if SYSTEMS[system][1] == "sft" else "icl"}


#: The :func:`convohub.stages.stage` of each system's run: its scores and the :func:`run_key` they were made with.
SCORES_STAGE = "scores"
#: Component spec prefixes whose value names model folders (comma-separated for ``ce:``).
_FOLDER_SPECS = ("sft:", "ce:", "model:")
#: The components each kind of system runs (RAG ranks its events with the retriever; CodeGen uses none).
_USED: dict[str, tuple[str, ...]] = {"reqap": ("decomposer", "retriever", "extractor"), "rag": ("retriever",),
                                     "codegen": ()}


def run_dir(out_dir: str | Path, name: str) -> Path:
    """The folder of one system's run in a comparison's ``out_dir``."""
    return Path(out_dir) / name


def run_predictions(out_dir: str | Path, name: str = REFERENCE) -> list[dict[str, Any]]:
    """The per-question predictions of one system's run (by default the trained chain's) in a comparison's
    ``out_dir``; [] when that run wrote none."""
    from convohub.jsonlines import jsonl_records
    from convohub.reqap.release.evaluation import PREDICTIONS_FILE

    path = run_dir(out_dir, name) / PREDICTIONS_FILE
    return [row for _, row in jsonl_records(path)] if path.is_file() else []


def run_key(system: str, components: Mapping[str, str], *, question_ids: Sequence[str], llm_name: str | None,
            top_n: int, split: str = "test", budget_s: float = DEFAULT_TIME_BUDGET) -> dict[str, Any]:
    """What a compared run depends on, as JSON values: reusing a run whose key differs would publish the
    figures of other models (a folder path stays the same when its model is retrained, so the weights'
    digests are part of the key)."""
    from convohub.models import weights_digest

    kind, qud = SYSTEMS[system]
    specs = {k: v for k, v in sorted(_specs(system, components).items()) if k in _USED[kind]}
    weights = {k: [weights_digest(folder) for folder in spec.split(":", 1)[1].split(",") if folder]
               for k, spec in specs.items() if spec.startswith(_FOLDER_SPECS)}
    uses_llm = kind != "reqap" or qud == "icl"
    return {"system": system, "split": split, "question_ids": sorted(question_ids), "components": specs,
            "weights": weights, "llm": llm_name if uses_llm else None, "top_n": top_n if kind == "rag" else None,
            "budget_s": budget_s if kind == "reqap" else None}


def _answerer(system: str, components: Mapping[str, str], backend: Any, dataset_dir: Path, top_n: int,
              budget_s: float) -> Any:
    from convohub.reqap.components.build import make_system

    kind = SYSTEMS[system][0]
    examples: list[Any] = []
    if kind == "codegen":
        from convohub.reqap.components.baselines import icl_pool_from_dataset

        examples = icl_pool_from_dataset(dataset_dir, "train")
    return make_system(kind, **_specs(system, components), backend=backend, top_n=top_n, icl_examples=examples,
                       budget_s=budget_s)


def compare_systems(dataset_dir: Path, components: Mapping[str, str], backend: Any, out_dir: Path, *,
                    question_ids: Sequence[str], systems: Sequence[str] = DEFAULT_SYSTEMS, top_n: int = RAG_TOP_N,
                    llm_name: str | None = None, split: str = "test",
                    budget_s: float = DEFAULT_TIME_BUDGET) -> dict[str, Any]:
    """Run ``systems`` on the same questions and test ReQAP (SFT) against each other system; ReQAP gets
    ``budget_s`` seconds a question (a question past it is unanswered).

    ``components`` are the trained models as component specs (``ReleaseModels.specs()``: ``decomposer``
    ``sft:DIR``, ``retriever`` ``ce:EVENTS,PATTERNS``, ``extractor`` ``model:DIR``); ``backend`` is the LLM of
    ICL QUD, RAG and CodeGen, named ``llm_name`` (default: its ``name``). Each run goes to
    ``out_dir/<system>/``; its scores are a :func:`convohub.stages.stage` keyed by :func:`run_key` (questions,
    the specs of the components it runs, the weights of the model folders they name, LLM, RAG's top-N), so a
    finished run is read back, and a retrained model in the same folder makes the systems that run it run again.
    Returns ``{"split", "questions", "llm", "top_n", "rank_depth", "systems": {name: scores},
    "mcnemar": {baseline: test}}``.
    """
    from convohub.reqap.components.build import describe_components
    from convohub.reqap.release.evaluation import compare_runs, evaluate
    from convohub.stages import stage

    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown or REFERENCE not in systems:
        raise ValueError(f"systems {list(systems)}: expected {REFERENCE!r} and any of {list(SYSTEMS)}")
    wanted = sorted(question_ids)
    llm_name = llm_name or getattr(backend, "name", None)
    scores: dict[str, Any] = {}
    for name in systems:
        run = run_dir(out_dir, name)

        def score(name: str = name, run: Path = run) -> dict[str, Any]:
            kind, qud = SYSTEMS[name]
            answerer = _answerer(name, components, backend, Path(dataset_dir), top_n, budget_s)
            describe = describe_components(kind, **_specs(name, components), llm=None if qud == "sft" else llm_name)
            results = evaluate(dataset_dir, split, kind, answerer, question_ids=wanted, attribution=False,
                               describe=describe, out_dir=run)
            return {k: results[k] for k in ("hit@1", "rlx_hit@1", "rlx_hit@1_20", "per_category", "counts",
                                            "failures")}

        key = run_key(name, components, question_ids=wanted, llm_name=llm_name, top_n=top_n, split=split,
                      budget_s=budget_s)
        scores[name] = stage(run, SCORES_STAGE, key, score)
    tests = {}
    for name in systems:
        if name != REFERENCE:
            test = compare_runs(run_dir(out_dir, REFERENCE), run_dir(out_dir, name))
            tests[name] = {k: test[k] for k in ("n", "both", "only_a", "only_b", "neither", "p_value", "method")}
    from convohub.reqap.components.baselines import default_rank_depth

    return {"split": split, "questions": len(wanted), "llm": llm_name, "top_n": top_n, "budget_s": budget_s,
            "rank_depth": default_rank_depth(top_n), "systems": scores,
            "reference": REFERENCE, "mcnemar": tests}


def compare_for_release(dataset_dir: Path, folders: Mapping[str, Path], backend: Any, out_dir: Path, *, profile: str,
                        seed: int) -> tuple[Path, dict[str, Any]]:
    """The release's comparison: the trained models in ``folders`` (chain kind -> model folder, as
    :func:`convohub.reqap.release.models.chain_specs` names them) against the baselines on ``profile``'s
    seeded question sample, with its systems and time budget; returns the :data:`COMPARISON_FILE` it wrote in
    ``out_dir`` (beside each system's run, :func:`run_predictions`) and the results it holds."""
    from convohub.hub import atomic_write_text, dump_json
    from convohub.reqap.release.models import ReleaseModels

    components = ReleaseModels(**folders, profile=profile, source="this release").specs()
    ids = question_sample(dataset_dir, PROFILE_QUESTIONS.get(profile, DEFAULT_QUESTIONS), seed)
    results = compare_systems(dataset_dir, components, backend, out_dir, question_ids=ids,
                              systems=PROFILE_SYSTEMS.get(profile, DEFAULT_SYSTEMS),
                              budget_s=PROFILE_BUDGET_S.get(profile, DEFAULT_TIME_BUDGET))
    path = Path(out_dir) / COMPARISON_FILE
    atomic_write_text(path, dump_json(results))
    return path, results
