"""ProMISe's record shapes, and the two user-behaviour tasks derived from a dialogue.

A dialogue (config ``dialogues``) is one user with an intent talking to an agent that offers
:data:`N_SQS` suggested questions with answers (SQAs) per turn::

    {"dialogue_id", "topic", "intent", "initial_question", "outcome", "num_turns",
     "agent_llm", "retrieval_backend", "user_simulator",
     "turns": [{"turn_index", "retrieval_query", "web_snippets": [str],
                "suggested_qas": [{"question", "answer", "snippet_index"}] * 4, "action"}]}

``action`` is ``sq1``..``sq4`` (the user picked that suggestion), ``none`` (none helps) or ``done`` (the
intent is satisfied; only a dialogue's last turn). ``outcome`` follows from the actions (:func:`outcome_of`):
``intent_satisfied`` (ends with ``done``), ``preemptive_termination`` (ends at the second ``none``) or
``incomplete`` (:data:`MAX_TURNS` turns without either).

Task items (:func:`task_items`), as in the paper's Section 5: Task 1 (intent satisfaction) has one item per
turn, label 1 when the turn's action is ``done``; Task 2 (SQ selection) one item per turn that is not
``done``, label 0-3 for SQ1-SQ4 and 4 for ``none``. An item's id is ``{dialogue_id}-{turn_index}``; its
context is what the MTurk annotators saw: the initial question and the questions picked at earlier turns (no
answers), and the turn's four candidate SQs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

N_SQS = 4
MAX_TURNS = 8
#: a dialogue stops at this many "none" actions (the paper's preemptive termination)
MAX_NONES = 2
SQ_ACTIONS = tuple(f"sq{i}" for i in range(1, N_SQS + 1))
ACTIONS = (*SQ_ACTIONS, "none", "done")
OUTCOMES = ("intent_satisfied", "preemptive_termination", "incomplete")
SPLITS = ("validation", "test")
TASKS = ("task1", "task2")
#: Task 2's label of each non-done action
TASK2_LABEL = {**{a: i for i, a in enumerate(SQ_ACTIONS)}, "none": N_SQS}
TASK1_NAMES = ("not_satisfied", "satisfied")
TASK2_NAMES = (*SQ_ACTIONS, "none")
#: what a simulator's prediction is when it gave no valid label (unparseable; "done" on a Task 2 item):
#: the user_simulation metric scores it as always wrong
INVALID = -1


def outcome_of(actions: Sequence[str], max_turns: int = MAX_TURNS, max_nones: int = MAX_NONES) -> str:
    """The outcome a sequence of actions implies; raises ValueError when the sequence breaks the loop's rules
    (an action after ``done``, a turn after the last ``none``, more than ``max_turns`` turns, or a dialogue
    that stopped early without reason)."""
    if not actions:
        raise ValueError("a dialogue has at least one turn")
    if len(actions) > max_turns:
        raise ValueError(f"{len(actions)} turns; a dialogue has at most {max_turns}")
    nones = 0
    for i, action in enumerate(actions):
        if action not in ACTIONS:
            raise ValueError(f"turn {i}: action {action!r} is not one of {', '.join(ACTIONS)}")
        last = i == len(actions) - 1
        if action == "done" and not last:
            raise ValueError(f"turn {i}: 'done' ends the dialogue, but {len(actions) - i - 1} turn(s) follow")
        nones += action == "none"
        if nones == max_nones and not last:
            raise ValueError(f"turn {i}: the dialogue stops at its {max_nones}nd 'none', but turns follow")
    if actions[-1] == "done":
        return "intent_satisfied"
    if nones >= max_nones:
        return "preemptive_termination"
    if len(actions) == max_turns:
        return "incomplete"
    raise ValueError(f"the dialogue stops after {len(actions)} turn(s) without 'done', a {max_nones}nd 'none' "
                     f"or {max_turns} turns")


def context_questions(dialogue: Mapping[str, Any], turn_index: int) -> list[str]:
    """What the user has asked before turn ``turn_index``: the initial question, then each question picked."""
    questions = [str(dialogue["initial_question"])]
    for turn in dialogue["turns"][:turn_index]:
        action = turn["action"]
        if action in TASK2_LABEL and action != "none":
            questions.append(str(turn["suggested_qas"][TASK2_LABEL[action]]["question"]))
    return questions


def task_items(dialogues: Iterable[Mapping[str, Any]], task: str) -> list[dict[str, Any]]:
    """The items of ``task`` (``task1`` or ``task2``) of these dialogues, in dialogue and turn order."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    items = []
    for dialogue in dialogues:
        for turn in dialogue["turns"]:
            action = str(turn["action"])
            if task == "task2" and action == "done":
                continue
            label = int(action == "done") if task == "task1" else TASK2_LABEL[action]
            index = int(turn["turn_index"])
            items.append({"id": f"{dialogue['dialogue_id']}-{index}", "dialogue_id": str(dialogue["dialogue_id"]),
                          "turn_index": index, "intent": str(dialogue["intent"]),
                          "context_questions": context_questions(dialogue, index),
                          "candidate_sqs": [str(qa["question"]) for qa in turn["suggested_qas"]], "label": label})
    return items


def label_names(task: str) -> tuple[str, ...]:
    """Class names of a task, in label order."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return TASK1_NAMES if task == "task1" else TASK2_NAMES


def question_openings(dialogues: Iterable[Mapping[str, Any]], words: int = 3,
                      top: int = 3) -> tuple[list[tuple[str, int]], int]:
    """The ``top`` commonest openings (first ``words`` words, case kept) of the suggested questions, with their
    counts, and the number of suggestions: the dataset card reports them, since a small agent LLM tends to open
    its questions the way its worked examples do."""
    openings = Counter(" ".join(str(qa.get("question", "")).split()[:words])
                       for dialogue in dialogues for turn in dialogue.get("turns", ())
                       for qa in turn.get("suggested_qas", ()))
    return openings.most_common(top), sum(openings.values())
