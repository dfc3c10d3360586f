"""Build ReQAP components and systems from short CLI / Space specs.

Specs: decomposer ``gold`` (the gold-tree ORACLE), ``sft:PATH`` (the trained QUD model), ``icl`` (ICL QUD
over the LLM backend), ``trees:PATH`` (fixed trees from a JSON file ``{question: tree or [trees]}``, to
replay saved predictions or test hand-written trees); retriever ``bm25``, ``oracle`` (gold-tree query oracle, needs the canonical events),
``all``, ``ce:PATH`` (the trained cross-encoders); extractor ``lookup`` or ``model:PATH`` (trained EXTRACT
model). The learned QUD and RETRIEVE components live in their own modules and are imported only when
named, so the offline stand-ins work without them.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from convohub.reqap.extraction import DirectExtractor, Extractor
from convohub.reqap.retrieval import AllRetriever, BM25Retriever, Retriever

__all__ = ["PersonaOracleRetriever", "build_system", "make_decomposer", "make_extractor", "make_retriever",
           "make_system"]


def _find(attr: str, prefix: str) -> Any:
    """``attr`` from the first ``convohub.reqap.<prefix>*`` module that defines it."""
    import convohub.reqap as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith(prefix):
            module = importlib.import_module(f"convohub.reqap.{info.name}")
            if hasattr(module, attr):
                return getattr(module, attr)
    raise ValueError(f"{attr} is not available (no convohub.reqap.{prefix}* module defines it yet)")


def _load(cls: Any, path: str) -> Any:
    folder = Path(path)
    if not folder.exists():
        raise FileNotFoundError(f"model folder {path!r} does not exist")
    return cls.from_pretrained(folder) if hasattr(cls, "from_pretrained") else cls(folder)


class PersonaOracleRetriever:
    """The gold-tree oracle retriever of the current persona (set with :meth:`use`); ORACLE, for upper bounds."""

    def __init__(self) -> None:
        self.index: Any = None

    def use(self, index: Any) -> None:
        self.index = index

    def retrieve(self, query: str, store: Any) -> list[str]:
        if self.index is None:
            raise RuntimeError("the oracle retriever needs a persona's canonical events (use())")
        return self.index.ids(query, store)


def make_decomposer(spec: str, backend: Any = None) -> Any:
    from convohub.reqap.pipeline import GoldTreeDecomposer

    if spec == "gold":
        return GoldTreeDecomposer()
    if spec.startswith("sft:"):
        return _load(_find("SFTDecomposer", "qud"), spec[4:])
    if spec == "icl":
        if backend is None:
            raise ValueError("--decomposer icl needs an LLM: pass --llm SPEC or set CONVOHUB_LLM_BASE_URL")
        return _find("ICLDecomposer", "qud")(backend)
    if spec.startswith("trees:"):
        from convohub.reqap.pipeline import StaticDecomposer

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
        return _load(_find("CrossEncoderRetriever", "retrieve_"), spec[3:])
    raise ValueError(f"unknown retriever {spec!r} (bm25, oracle, all, ce:PATH)")


def make_extractor(spec: str) -> Extractor:
    if spec == "lookup":
        return DirectExtractor()
    if spec.startswith("model:"):
        from convohub.reqap.model_extractor import ModelExtractor

        return ModelExtractor(spec[6:])
    raise ValueError(f"unknown extractor {spec!r} (lookup, model:PATH)")


def make_system(system: str, *, decomposer: str = "gold", retriever: str = "bm25", extractor: str = "lookup",
                backend: Any = None, budget_s: float = 600.0, top_n: int = 100,
                icl_examples: Any = ()) -> Any:
    """A ReQAP pipeline or a baseline, ready for ``answer(question, store, reference_date)``."""
    if system == "reqap":
        from convohub.reqap.pipeline import ReQAP

        return ReQAP(make_decomposer(decomposer, backend), make_retriever(retriever), make_extractor(extractor),
                     budget_s)
    if backend is None:
        raise ValueError(f"--system {system} needs an LLM: pass --llm SPEC or set CONVOHUB_LLM_BASE_URL")
    from convohub.reqap.baselines import CodeGenBaseline, RAGBaseline

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


def build_system(system: str, *, dataset: Path, decomposer: str | None, retriever: str = "bm25",
                 extractor: str | None = None, llm: str | None = None, llm_model: str | None = None,
                 llm_cache: Path | None = None, top_n: int = 100, icl_split: str = "train",
                 time_budget: float = 600.0) -> tuple[Any, Callable[[str, list[dict[str, Any]]], None]]:
    """(answerer, on_persona callback) from the CLI's component specs; plain arguments only, so a
    ``functools.partial`` of it can build the same system inside a worker process.

    Raises ValueError/FileNotFoundError on bad specs. ``on_persona(persona_id, questions)`` registers a
    persona's questions with the gold-tree decomposer and points the oracle retriever at its events.
    """
    if system == "reqap":
        missing = [f"--{name}" for name, value in (("decomposer", decomposer), ("extractor", extractor))
                   if value is None]
        if missing:
            raise ValueError(f"--system reqap needs {' and '.join(missing)} named (stand-ins are never picked "
                             "for you): e.g. --decomposer sft:MODEL_DIR --extractor model:MODEL_DIR, or the "
                             "stand-ins --decomposer gold (ORACLE) --extractor lookup")
    examples: list[Any] = []
    if system == "codegen":
        from convohub.reqap.baselines import icl_pool_from_dataset

        examples = icl_pool_from_dataset(dataset, icl_split)
    answerer = make_system(system, decomposer=decomposer or "gold", retriever=retriever,
                           extractor=extractor or "lookup", backend=_backend(system, decomposer, llm, llm_model,
                                                                             llm_cache),
                           budget_s=time_budget, top_n=top_n, icl_examples=examples)

    def on_persona(pid: str, questions: list[dict[str, Any]]) -> None:
        found = getattr(answerer, "decomposer", None)
        if hasattr(found, "add"):
            for q in questions:
                found.add(q)
        oracle = getattr(answerer, "retriever", None)
        if isinstance(oracle, PersonaOracleRetriever):
            from convohub.reqap.evaluation import load_persona

            oracle.use(load_persona(dataset, pid)[2])

    return answerer, on_persona
