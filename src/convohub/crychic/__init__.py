"""CRyCHIc and WildChatTree (issue 14): recovering which earlier turn each prompt of a chat builds on.

A chat log is flat, but the prompts in it are not: a follow-up builds on one earlier turn, a new topic starts
a tree of its own. WildChatTree stores that structure as one parent per turn (``-1`` for a root), so a
conversation is a forest, and CRyCHIc reconstructs it prompt by prompt.

This package holds the data half:

* :mod:`~convohub.crychic.trees`: parents -> roots, tree ids, depth; the one check every parent list passes;
* :mod:`~convohub.crychic.source`: annotated conversations in the spec's schema, read and validated;
* :mod:`~convohub.crychic.construct`: the offline test set, whose parents are known by construction (MixMC
  interleaving of sample conversations, plus single conversations);
* :mod:`~convohub.crychic.dataset`: the ``wildchat-tree`` dataset folder and its card;
* :mod:`~convohub.crychic.system`: the registered system, its build step and the leaderboard benchmark.
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
