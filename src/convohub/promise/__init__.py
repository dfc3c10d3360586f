"""ProMISe (issue 15): proactive multi-turn information-seeking dialogues with suggested questions, the
user-behaviour benchmark and its user simulators.

Data:

* :mod:`~convohub.promise.records`: the dialogue record, the loop's rules and the two tasks' items;
* :mod:`~convohub.promise.source`: released dialogues read and validated (``--source``);
* :mod:`~convohub.promise.retrieval`: the retrieval interface and BM25 over convohub's passage collection;
* :mod:`~convohub.promise.prompts`: the LLM prompts (intent, first question, suggestions, user action) and checks;
* :mod:`~convohub.promise.users`: who acts in a generated dialogue (an LLM or the named rule user), chosen by
  agreement with hand-labelled decisions;
* :mod:`~convohub.promise.simulate`: Algorithm 1, batched across dialogues, cached and resumable;
* :mod:`~convohub.promise.dataset` and :mod:`~convohub.promise.build`: the ``promise`` dataset folder and card.

Simulators:

* :mod:`~convohub.promise.simulators`: majority, encoder and generative simulators and their scoring;
* :mod:`~convohub.promise.training`: what training/promise_*/ run; :mod:`~convohub.promise.model_specs`: the
  published models; :mod:`~convohub.promise.cli`: ``convohub promise evaluate``;
* :mod:`~convohub.promise.space` and :mod:`~convohub.promise.system`: the Space and the release wiring;
  :mod:`~convohub.promise.settings`: the environment variables a release run reads.

Modules import torch, transformers and the LLM layer only inside functions, so the CLI starts fast.
"""
