"""The ProMISe Space's logic (``spaces/promise/app.py`` is a thin Gradio layer over it) and its export.

The visitor plays the user: states an intent and a first question; the agent (an LLM, with BM25 re-ranked by MiniLM over
convohub's passage collection, exactly the simulation loop's :func:`convohub.promise.simulate.agent_turn`) offers four
suggested questions with answers and their snippets; the visitor picks one, says none helps, or says the intent
is satisfied. Beside the visitor's choice the trained simulator's prediction for the same turn is shown, with
its probability for each of the six choices: P(done) from the Task 1 classifier, and P(SQk) and P(none) from
the Task 2 classifier times P(not done). The agent never sees the intent; the simulator does, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from convohub.promise.build import TINY
from convohub.promise.records import ACTIONS, N_SQS, SQ_ACTIONS
from convohub.promise.retrieval import Topic
from convohub.promise.simulate import Report, State, agent_turn, apply_action

SPACE_NAME = "promise-explorer"
CHOICES = ACTIONS
CHOICE_LABELS = {**{a: f"SQ{a[2:]}" for a in SQ_ACTIONS}, "none": "none helps", "done": "intent satisfied"}
EXAMPLE_INTENT = ("I want to buy a drone with a camera for less than $100 that is easy for a beginner to fly and "
                  "flies for at least 10 minutes.")
EXAMPLE_QUESTION = "Which camera drones cost under $100?"
#: the Space's loop settings: the tiny profile's (what SmolLM2 can do: its context budget, answer-first
#: suggestions, the first question searched with later queries), for one dialogue
SETTINGS = replace(TINY, n_dialogues=1)


def new_state(intent: str, question: str) -> dict[str, Any]:
    """A fresh dialogue (a JSON-ready dict, kept in the page) from the visitor's intent and question."""
    intent, question = (intent or "").strip(), (question or "").strip()
    if not intent or not question:
        raise ValueError("state an intent and a first question")
    return _store(State("space", Topic("space", "", ""), 0, intent=intent, initial_question=question,
                        queries=[question], query=question), None)


def _as_state(data: dict[str, Any]) -> State:
    return State("space", Topic("space", "", ""), 0, intent=data["intent"], initial_question=data["initial_question"],
                 queries=list(data["queries"]), query=data["query"], turns=list(data["turns"]),
                 nones=int(data["nones"]), outcome=data["outcome"])


def _store(state: State, pending: dict[str, Any] | None) -> dict[str, Any]:
    return {"intent": state.intent, "initial_question": state.initial_question, "queries": state.queries,
            "query": state.query, "turns": state.turns, "nones": state.nones, "outcome": state.outcome,
            "pending": pending}


def next_turn(data: dict[str, Any], agent: Any, retriever: Any) -> dict[str, Any]:
    """Write the next turn's suggestions into ``data["pending"]``; ValueError when the agent gave no four
    usable suggestions within its tries (with the commonest reason)."""
    state = _as_state(data)
    report = Report()
    [turn] = agent_turn(agent, retriever, [state], SETTINGS, report)
    if turn is None:
        errors = report.as_dict()["steps"]["sqa"]["top_errors"]
        raise ValueError("the agent could not write four grounded suggestions for this query within its tries "
                         f"(rejections: {errors}); rephrase the question")
    return _store(state, turn)


def table(data: dict[str, Any]) -> list[list[str]]:
    """The pending turn's suggestions: choice, question, answer, snippet."""
    turn = data.get("pending")
    if not turn:
        return []
    return [[f"SQ{k + 1}", qa["question"], qa["answer"], turn["web_snippets"][qa["snippet_index"]]]
            for k, qa in enumerate(turn["suggested_qas"])]


def item(data: dict[str, Any]) -> dict[str, Any]:
    """The pending turn as a task item (what the simulator reads)."""
    from convohub.promise.records import context_questions

    turn = data["pending"]
    asked = context_questions({"initial_question": data["initial_question"], "turns": data["turns"]},
                              len(data["turns"]))
    return {"id": f"space-{len(data['turns'])}", "intent": data["intent"], "context_questions": asked,
            "candidate_sqs": [qa["question"] for qa in turn["suggested_qas"]]}


def choice_probabilities(simulator: Any, task_item: dict[str, Any]) -> dict[str, float]:
    """P(each of the six choices) from the two classifiers (module docstring)."""
    done = simulator.probabilities("task1", [task_item])[0][1]
    pick = simulator.probabilities("task2", [task_item])[0]
    return {**{a: (1 - done) * pick[k] for k, a in enumerate(SQ_ACTIONS)}, "none": (1 - done) * pick[N_SQS],
            "done": done}


def choose(data: dict[str, Any], choice: str, simulator: Any, agent: Any, retriever: Any
           ) -> tuple[dict[str, Any], dict[str, float], str]:
    """Apply the visitor's choice to the pending turn after asking the simulator; write the next turn unless
    the dialogue ended. Returns (new state, the simulator's probabilities, its predicted choice)."""
    if choice not in CHOICES:
        raise ValueError(f"choose one of {', '.join(CHOICES)}")
    if not data.get("pending"):
        raise ValueError("start a dialogue first")
    probabilities = choice_probabilities(simulator, item(data))
    predicted = max(probabilities, key=probabilities.__getitem__)
    state = _as_state(data)
    apply_action(state, dict(data["pending"]), choice, SETTINGS)
    data = _store(state, None)
    if state.outcome is None:
        data = next_turn(data, agent, retriever)
    return data, probabilities, predicted


def probability_frame(probabilities: dict[str, float], visitor: str) -> Any:
    """Bars for ``gr.BarPlot``: one per choice, coloured by whether the visitor chose it."""
    import pandas as pd

    return pd.DataFrame([(CHOICE_LABELS[a], round(float(p), 4), "your choice" if a == visitor else "other")
                         for a, p in probabilities.items()], columns=["choice", "probability", "who"])


def history(data: dict[str, Any]) -> str:
    """The dialogue so far as Markdown."""
    lines = [f"**Intent:** {data['intent']}", f"**First question:** {data['initial_question']}"]
    for turn in data["turns"]:
        action = turn["action"]
        picked = turn["suggested_qas"][int(action[2:]) - 1]["question"] if action in SQ_ACTIONS else \
            CHOICE_LABELS[action]
        lines.append(f"- turn {turn['turn_index'] + 1} (query: {turn['retrieval_query']}): {picked}")
    if data.get("outcome"):
        lines.append(f"**Dialogue ended:** {data['outcome'].replace('_', ' ')}")
    return "\n".join(lines)


def export_space(target: Any, profile: str = "tiny", repo: Path | None = None) -> Path:
    """Write the Space folder from ``spaces/promise`` with this release's model and dataset ids."""
    from convohub.hub import write_space
    from convohub.paths import repo_root
    from convohub.promise.dataset import DATASET_NAME
    from convohub.promise.model_specs import GENERATOR, TASK1_ENCODER, TASK2_ENCODER

    repo = Path(repo) if repo is not None else repo_root()
    models: Sequence[Any] = (TASK1_ENCODER, TASK2_ENCODER, GENERATOR)
    front = {"datasets": [target.repo_id(DATASET_NAME)],
             "models": [target.repo_id(spec.repo_name(profile)) for spec in models]}
    return write_space(target, SPACE_NAME, repo / "spaces" / "promise", extra_front_matter=front)
