"""CRyCHIc and WildChatTree (issue 14): recovering which earlier turn each prompt of a chat builds on.

A chat log is flat, but the prompts in it are not: a follow-up builds on one earlier turn, a new topic starts
a tree of its own. WildChatTree stores that structure as one parent per turn (``-1`` for a root), so a
conversation is a forest, and CRyCHIc reconstructs it prompt by prompt.

Data:

* :mod:`~convohub.crychic.trees`: parents -> roots, tree ids, depth; the one check every parent list passes;
* :mod:`~convohub.crychic.source`: annotated conversations in the spec's schema, read and validated;
* :mod:`~convohub.crychic.construct`: the offline test set, whose parents are known by construction (MixMC
  interleaving of sample conversations, plus single conversations);
* :mod:`~convohub.crychic.dataset`: the ``wildchat-tree`` dataset folder and its card;
* :mod:`~convohub.crychic.system`: the registered system, its build step, the leaderboard benchmark, the CLI.

Models and reconstruction:

* :mod:`~convohub.crychic.models`: the IFQC, the prompt simplifier and the follow-up judge as transformers
  models, registered with the Auto classes when that package is imported;
* :mod:`~convohub.crychic.sentences`: spaCy's rule-based sentence splitter for the simplifier;
* :mod:`~convohub.crychic.components`: what the pipeline asks of each model, as protocols, and the
  model-backed implementations;
* :mod:`~convohub.crychic.reconstruct`: the per-prompt rules, the stored turns and filtered history, the
  baselines;
* :mod:`~convohub.crychic.evaluate` and :mod:`~convohub.crychic.cli`: ``convohub crychic evaluate``.

Training:

* :mod:`~convohub.crychic.training_data` (``convohub crychic training-data``): the three models' training
  data, from :mod:`~convohub.crychic.ifqc_data` (LLM-synthesised sentences),
  :mod:`~convohub.crychic.simplifier_data` (sentence labels by the labeller that agrees best with
  hand-labelled sentences) and :mod:`~convohub.crychic.judge_data` (pairs known by construction), resumable
  through :mod:`convohub.stages`, with splits and the data folder from :mod:`~convohub.crychic.data_common`;
* :mod:`~convohub.crychic.training`: what the scripts of training/crychic_*/ run (held-out before/after).

The model classes (``CrychicIFQCModel`` ...) live in :mod:`convohub.crychic.models` only: importing that
package loads torch and transformers and registers the Auto classes, which the CLI, importing this package
on every start, must not pay for.
"""

from __future__ import annotations

from convohub.crychic.construct import generate_trees, interleave, plan_parents
from convohub.crychic.dataset import DATASET_NAME, build_wildchat_tree
from convohub.crychic.source import WildChatTreeSourceError, read_annotated
from convohub.crychic.trees import check_parents, tree_depth, tree_ids

__all__ = [
    "DATASET_NAME",
    "WildChatTreeSourceError",
    "build_wildchat_tree",
    "check_parents",
    "generate_trees",
    "interleave",
    "plan_parents",
    "read_annotated",
    "tree_depth",
    "tree_ids",
]
