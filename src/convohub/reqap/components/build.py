"""Build ReQAP components and systems from short CLI / Space specs.

Specs: decomposer ``gold`` (the gold-tree ORACLE), ``sft:PATH`` (the trained QUD model), ``icl`` (ICL QUD
over the LLM backend), ``trees:PATH`` (fixed trees from a JSON file ``{question: tree or [trees]}``, to
replay saved predictions or test hand-written trees); retriever ``bm25``, ``oracle`` (gold-tree query
ORACLE, needs the canonical events), ``all``, ``ce:PATH`` (the trained cross-encoders); extractor
``lookup`` or ``model:PATH`` (trained EXTRACT model). Trained models are imported only when named, so the
stand-ins work without torch.

The two oracle specs are built from the gold trees of :mod:`convohub.reqap.data.gold`; everything else
comes from :mod:`convohub.reqap.components`. :func:`execute_setup` / :func:`execute_tree_task` are the
worker tasks of ``reqap execute`` (top-level functions, so a spawned worker can unpickle them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from convohub.reqap.components.extract import DirectExtractor
from convohub.reqap.components.retrieve import AllRetriever, BM25Retriever
from convohub.reqap.engine.executor import DEFAULT_TIME_BUDGET
from convohub.reqap.engine.pace import TimeCheck
from convohub.reqap.engine.protocols import Extractor, Retriever

__all__ = [
    "ORACLE_SPECS", "describe_components", "header",
    "PersonaOracleRetriever", "build_system", "execute_setup", "execute_tree_task", "make_decomposer",
    "make_extractor", "make_retriever", "make_system"
]


class PersonaOracleRetriever:
    """The gold-tree oracle retriever of the current persona (set with :meth:`use`); ORACLE, for upper bounds."""

    def __init__(self) -> None:
        self.index: Any = None

    def use(self, index: Any) -> None:
        self.index = index

    def retrieve(self, query: str, store: Any, check_time: TimeCheck | None = None) -> list[str]:
        if self.index is None:
            raise RuntimeError("the oracle retriever needs a persona's canonical events (use())")
        return self.index.ids(query, store)


#: Specs that stand in for a component with gold knowledge: every output they touch says ORACLE.
ORACLE_SPECS: dict[str, frozenset[str]] = {"decomposer": frozenset({"gold"}), "retriever": frozenset({"oracle"})}
_KINDS = {"decomposer": "QUD", "retriever": "RETRIEVE", "extractor": "EXTRACT"}


def _label(kind: str, spec: str) -> str:
    """What a component spec is, in words (for headers, results and cards)."""
    head, _, path = spec.partition(":")
    words = {
        ("decomposer", "gold"): "ORACLE: the hand-written gold tree of the question's template",
        ("decomposer", "sft"): f"trained QUD model {path}",
        ("decomposer", "icl"): "in-context QUD over the LLM",
        ("decomposer", "trees"): f"fixed trees from {path}",
        ("retriever", "oracle"): "ORACLE: the gold events of each gold-tree query",
        ("retriever", "bm25"): "BM25 (stand-in: no cross-encoders)",
        ("retriever", "all"): "every event (stand-in)",
        ("retriever", "ce"): "BM25 first stage -> patterns cross-encoder -> events cross-encoder "
                             f"({path.replace(',', ' + ')})",
        ("extractor", "lookup"): "key lookup (stand-in: no model)",
        ("extractor", "model"): f"trained EXTRACT model {path}",
    }
    return words.get((kind, head), spec)


def describe_components(system: str, *, decomposer: str | None = None, retriever: str | None = None,
                        extractor: str | None = None, llm: str | None = None, source: str | None = None
                        ) -> dict[str, Any]:
    """The components a run used, for the printed header, ``results.json`` and cards.

    ``oracle`` lists the components that are oracles (empty for a real system); ``labels`` says in words
    what each spec is; ``source`` where the trained models came from (a release folder or the Hub).
    """
    used = {"reqap": ("decomposer", "retriever", "extractor"), "rag": ("retriever",)}.get(system, ())
    specs = {"decomposer": decomposer, "retriever": retriever, "extractor": extractor}
    out: dict[str, Any] = {"system": system, **{k: specs[k] if k in used else None for k in specs}, "llm": llm}
    out["oracle"] = [k for k in used if specs[k] in ORACLE_SPECS.get(k, ())]
    out["labels"] = {k: _label(k, specs[k]) for k in used if specs[k]}
    if source:
        out["models_from"] = source
    return out


def header(components: dict[str, Any]) -> str:
    """Lines naming each component of a run; an ORACLE run says so first."""
    lines = []
    if components.get("oracle"):
        named = ", ".join(f"--{k} {components[k]}" for k in components["oracle"])
        lines.append(f"ORACLE ({named}): an upper bound with gold knowledge, not a system result")
    for kind, label in components.get("labels", {}).items():
        lines.append(f"{_KINDS[kind]}: {label}")
    if components.get("llm"):
        lines.append(f"LLM: {components['llm']}")
    if components.get("models_from"):
        lines.append(f"trained models from: {components['models_from']}")
    return "\n".join(lines)


def make_decomposer(spec: str, backend: Any = None, *, resample: int = 0) -> Any:
    """The decomposer a ``--decomposer`` spec names; ``resample`` re-asks steps that only repeat their chain
    (:class:`~convohub.reqap.components.qud.RecursiveDecomposer`; LLM decomposers only)."""
    from convohub.reqap.data.gold import GoldTreeDecomposer

    if resample < 0:
        raise ValueError(f"--resample must be >= 0, got {resample}")
    if spec == "gold":
        return GoldTreeDecomposer()
    if spec.startswith("sft:"):
        from convohub.reqap.components.qud import SFTDecomposer

        folder = Path(spec[4:])
        if not folder.exists():
            raise FileNotFoundError(f"model folder {spec[4:]!r} does not exist")
        return SFTDecomposer(folder, resample=resample)
    if spec == "icl":
        if backend is None:
            raise ValueError("--decomposer icl needs an LLM: pass --llm SPEC or set CONVOHUB_LLM_BASE_URL")
        from convohub.reqap.components.qud import ICLDecomposer

        return ICLDecomposer(backend, resample=resample)
    if spec.startswith("trees:"):
        from convohub.reqap.components.qud import StaticDecomposer

        path = Path(spec[6:])
        if not path.is_file():
            raise FileNotFoundError(f"trees file {str(path)!r} does not exist")
        trees = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(trees, dict):
            raise ValueError(f"{path}: expected a JSON object {{question: tree or [trees]}}")
        return StaticDecomposer({q: [t] if isinstance(t, str) else list(t) for q, t in trees.items()})
    raise ValueError(f"unknown decomposer {spec!r} (gold, sft:PATH, icl, trees:PATH)")


def make_retriever(spec: str) -> Retriever:
    if spec == "bm25":
        return BM25Retriever()
    if spec == "all":
        return AllRetriever()
    if spec == "oracle":
        return PersonaOracleRetriever()
    if spec.startswith("ce:"):
        from convohub.reqap.components.retrieve import CrossEncoderRetriever

        folders = [f for f in spec[3:].split(",") if f]
        for folder in folders:
            if not Path(folder).exists():
                raise FileNotFoundError(f"model folder {folder!r} does not exist")
        return CrossEncoderRetriever.from_pretrained(*folders)
    raise ValueError(f"unknown retriever {spec!r} (bm25, oracle, all, ce:DIR[,DIR])")


def make_extractor(spec: str) -> Extractor:
    if spec == "lookup":
        return DirectExtractor()
    if spec.startswith("model:"):
        from convohub.reqap.components.extract import ModelExtractor

        return ModelExtractor(spec[6:])
    raise ValueError(f"unknown extractor {spec!r} (lookup, model:PATH)")


def make_system(system: str, *, decomposer: str = "gold", retriever: str = "bm25", extractor: str = "lookup",
                backend: Any = None, budget_s: float = DEFAULT_TIME_BUDGET, top_n: int = 100,
                icl_examples: Any = (), resample: int = 0) -> Any:
    """A ReQAP pipeline or a baseline, ready for ``answer(question, store, reference_date)``."""
    if system == "reqap":
        from convohub.reqap.components.pipeline import ReQAP

        return ReQAP(make_decomposer(decomposer, backend, resample=resample), make_retriever(retriever),
                     make_extractor(extractor), budget_s)
    if backend is None:
        raise ValueError(f"--system {system} needs an LLM: pass --llm SPEC or set CONVOHUB_LLM_BASE_URL")
    from convohub.reqap.components.baselines import CodeGenBaseline, RAGBaseline

    if system == "rag":
        return RAGBaseline(backend, make_retriever(retriever), top_n=top_n)
    if system == "codegen":
        return CodeGenBaseline(backend, list(icl_examples))
    raise ValueError(f"unknown system {system!r} (reqap, rag, codegen)")


def _backend(system: str, decomposer: str | None, llm: str | None, llm_model: str | None,
             llm_cache: Path | None) -> Any:
    """The LLM backend when the system needs one (ICL QUD, RAG, CodeGen), else None."""
    if system not in ("rag", "codegen") and decomposer != "icl":
        return None
    from convohub.llm import backend_from_env, make_backend

    if llm:
        return make_backend(llm, model=llm_model, cache_dir=llm_cache)
    return backend_from_env(**({"cache_dir": llm_cache} if llm_cache else {}))


def build_system(system: str, *, dataset: Path, decomposer: str | None, retriever: str | None = None,
                 extractor: str | None = None, llm: str | None = None, llm_model: str | None = None,
                 llm_cache: Path | None = None, top_n: int = 100, icl_split: str = "train",
                 time_budget: float = DEFAULT_TIME_BUDGET, resample: int = 0) -> tuple[Any, Callable[[str, list[dict[str, Any]]], None]]:
    """(answerer, on_persona callback) from the CLI's component specs; plain arguments only, so a
    ``functools.partial`` of it can build the same system inside a worker process.

    Raises ValueError/FileNotFoundError on bad specs. ``on_persona(persona_id, questions)`` registers a
    persona's questions with the gold-tree decomposer and points the oracle retriever at its events.
    """
    needed = {"reqap": ("decomposer", "retriever", "extractor"), "rag": ("retriever",)}.get(system, ())
    given = {"decomposer": decomposer, "retriever": retriever, "extractor": extractor}
    missing = [f"--{name}" for name in needed if given[name] is None]
    if missing:  # the CLI and the Space fill them from a release (release.models); stand-ins are never picked
        raise ValueError(f"--system {system} needs {' and '.join(missing)}: the trained models "
                         "(sft:DIR, ce:DIR[,DIR], model:DIR) or a stand-in named on purpose (--decomposer gold "
                         "[ORACLE], --retriever bm25, --extractor lookup)")
    examples: list[Any] = []
    if system == "codegen":
        from convohub.reqap.components.baselines import icl_pool_from_dataset

        examples = icl_pool_from_dataset(dataset, icl_split)
    answerer = make_system(system, decomposer=decomposer or "gold", retriever=retriever or "bm25",
                           extractor=extractor or "lookup", backend=_backend(system, decomposer, llm, llm_model,
                                                                             llm_cache),
                           budget_s=time_budget, top_n=top_n, icl_examples=examples, resample=resample)

    def on_persona(pid: str, questions: list[dict[str, Any]]) -> None:
        found = getattr(answerer, "decomposer", None)
        if hasattr(found, "add"):
            for q in questions:
                found.add(q)
        extractor = getattr(answerer, "extractor", None)
        if hasattr(extractor, "use_persona"):
            from convohub.reqap.data.perqa import persona_record

            extractor.use_persona(persona_record(dataset, pid))
        oracle = getattr(answerer, "retriever", None)
        if isinstance(oracle, PersonaOracleRetriever):
            from convohub.reqap.data.perqa import load_persona

            oracle.use(load_persona(dataset, pid)[2])

    return answerer, on_persona


# -- tasks of ``reqap execute`` ------------------------------------------------------------------------------
def execute_setup(dataset: Path, persona: str, retriever: str, reference_date: date, time_budget: float,
                  dedup: bool) -> Any:
    """An :class:`~convohub.reqap.engine.executor.Executor` over one persona of a built PerQA folder (the worker's
    state for ``reqap execute``); raises FileNotFoundError/KeyError when the persona cannot be read."""
    from convohub.reqap.engine.events import EventStore
    from convohub.reqap.engine.executor import Executor

    store = EventStore.from_dataset_folder(dataset, persona)
    return Executor(store, make_retriever(retriever), reference_date=reference_date, time_budget=time_budget,
                    dedup=dedup)


def execute_tree_task(executor: Any, tree: str) -> dict[str, Any]:
    """Task: run one tree with the worker's executor; the JSON-ready result."""
    return executor.execute(tree).to_dict()
