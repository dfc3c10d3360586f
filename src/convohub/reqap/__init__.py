"""ReQAP: question answering over personal events with operator trees (QUD -> RETRIEVE -> EXTRACT -> engine).

The package is grouped by role, the way sentence-transformers and trl group theirs, so a reader opens one
folder for one question ("how does a tree run?", "what does the EXTRACT model read?", "where do the QUD
pairs come from?", "what does the release publish?"). Dependencies point one way, downwards:

* ``engine/`` -- runs operator trees, no ML: :mod:`~convohub.reqap.engine.parse` (trees), ``expr`` (the
  whitelisted lambda language), ``interpreter`` (its bounded evaluator), ``operators``, ``join``,
  ``executor``, ``events`` (the event store), ``convert`` (``attr_types``), ``protocols`` (what the engine
  needs from a retriever and an extractor), ``worker`` (one question per OS-limited process), ``errors``.
* ``components/`` -- what answers questions on top of the engine, one module per paper component:
  ``qud`` (decomposers), ``retrieve`` (BM25, oracle, cross-encoder pipeline), ``extract`` (lookup, trained
  model), ``pipeline`` (ReQAP: first tree that executes), ``baselines`` (RAG, CodeGen), ``build`` (all of
  them from CLI/Space specs). A component's model format (input text, labels) is defined here once.
* ``data/`` -- what is derived from PerQA: ``perqa`` (reading a built folder), ``gold`` (hand-written gold
  trees and the ORACLE decomposer/retriever built on them), and the training data of each model:
  ``qud``, ``retrieve``, ``extract`` (same word as the component they train).
* ``release/`` -- what the release trains, measures and publishes: one module per model (``qud``,
  ``retrieve``, ``extract``: ModelSpec, the training script's pieces, held-out evaluation, card values) and
  ``evaluation`` (end-to-end Hit@1 of whole systems, shared by ``convohub reqap evaluate`` and the cards).

On top sit the three ways in: ``system`` (the registry's entry, like every convohub system), ``cli``
(``convohub reqap ...``) and ``space`` (the Gradio Space's logic and export). One word per idea: ``qud``,
``retrieve`` and ``extract`` name the same component in ``components/``, ``data/`` and ``release/``.

The engine API is re-exported here:

>>> from convohub.reqap import EventStore, Executor, OracleRetriever
>>> store = EventStore.from_records([{"id": "1", "start_date": "2024-11-01", "event_type": "workout",
...                                   "event_data": {"workout_type": "running", "duration": "42 min"}}])
>>> tree = 'SUM(l=EXTRACT(l=RETRIEVE(query="runs"), attr_names=["duration"], attr_types=[int]), attr_name="duration")'
>>> Executor(store, OracleRetriever({"runs": ["1"]})).execute(tree).answer
42
"""

from convohub.reqap.components.extract import DirectExtractor, FrozenMappingExtractor
from convohub.reqap.components.retrieve import AllRetriever, BM25Retriever, OracleRetriever, verbalise_event
from convohub.reqap.engine.convert import convert
from convohub.reqap.engine.errors import (
    BudgetExceeded,
    ExecutionError,
    ExpressionError,
    ResourceLimitError,
    TreeSyntaxError,
)
from convohub.reqap.engine.events import EventStore, deduplicate, normalise_record, typed_event
from convohub.reqap.engine.executor import (
    REFERENCE_DATE,
    ExecutionResult,
    Executor,
    execute_tree,
    to_jsonable,
)
from convohub.reqap.engine.expr import Function
from convohub.reqap.engine.interpreter import Evaluator, Group
from convohub.reqap.engine.parse import (
    OPERATORS,
    OpNode,
    Placeholder,
    assemble,
    parse_tree,
    placeholders,
    substitute,
)
from convohub.reqap.engine.protocols import Extractor, Retriever

__all__ = [
    "OPERATORS", "REFERENCE_DATE", "AllRetriever", "BM25Retriever", "BudgetExceeded", "DirectExtractor",
    "Evaluator", "EventStore", "ExecutionError", "ExecutionResult", "Executor", "ExpressionError", "Extractor",
    "FrozenMappingExtractor", "Function", "Group", "OpNode", "OracleRetriever", "Placeholder",
    "ResourceLimitError", "Retriever", "TreeSyntaxError", "assemble", "convert", "deduplicate", "execute_tree",
    "normalise_record", "parse_tree", "placeholders", "substitute", "to_jsonable", "typed_event",
    "verbalise_event",
]
