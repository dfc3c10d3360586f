"""The ProMISe simulation loop (the paper's Algorithm 1), run for many dialogues at once.

Per dialogue: a seed topic -> an intent with preferences -> a very short initial question ``q0`` (LLM);
then at each turn the agent retrieves snippets for the current query, writes :data:`~convohub.promise.records.
N_SQS` suggested questions with answers grounded in them (one LLM call per snippet, earlier turns of the
dialogue as in-context examples within a token budget), and the user (:mod:`convohub.promise.users`) picks one,
says none helps, or says the intent is satisfied. The query becomes the picked question; after "none" it
becomes the concatenation of the queries so far. A dialogue stops at "done", at its second "none", or after
eight turns. The agent never sees the intent.

Dialogues advance together, one turn at a time, so every LLM step is one large batch (a local model
generates a batch of 64 nearly as fast as one prompt). Every answer is validated
(:mod:`convohub.promise.prompts`) and re-asked a bounded number of times: an SQA's second try uses another
retrieved snippet, later tries sample. A dialogue whose agent or user gives no usable answer within the bound
is dropped and counted, never repaired. When all are done, suggested-question positions are re-balanced as
in the paper (the picked SQA moves to the position picked least so far), so Task 2's labels are balanced.

Resumable: every chat call goes through the response cache under ``<work>/llm-cache``
(:func:`convohub.stages.cached`), and every request is a function of the cached answers before it, so a run
killed mid-way and started again repeats no finished call; the finished dialogues are a stage file.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from convohub.bm25 import STOPWORDS_NAME
from convohub.llm import ask_until_parsed
from convohub.promise.prompts import (
    ANSWER_MODES,
    RepeatedQuestion,
    answer_sentence,
    estimate_tokens,
    fit_recent,
    intent_request,
    parse_intent,
    parse_question,
    parse_sqa,
    qg_request,
    question_request,
    sample_block,
    sqa_request,
)
from convohub.promise.records import MAX_NONES, MAX_TURNS, N_SQS, SQ_ACTIONS, TASK2_LABEL, outcome_of
from convohub.promise.retrieval import Passage, SnippetRetriever, Topic
from convohub.promise.users import DialogueUser, UserView
from convohub.stages import digest


@dataclass(frozen=True)
class LoopSettings:
    """How many dialogues, and the loop's rules and budgets (the paper's values are the defaults)."""

    n_dialogues: int = 24
    max_turns: int = MAX_TURNS
    max_nones: int = MAX_NONES
    #: estimated tokens of earlier turns shown to the agent as in-context examples (paper: a 4k context)
    context_tokens: int = 3000
    #: snippets retrieved per turn: one per suggestion, and as many spares for second tries
    snippets: int = 2 * N_SQS
    sqa_attempts: int = 3
    setup_attempts: int = 3
    sqa_max_new_tokens: int = 48
    #: ``llm``: the agent writes each question and answer (the paper); ``extractive``: the answer is the snippet
    #: sentence closest to the query and the agent writes the question it answers (the agent's name says so)
    answers: str = "llm"
    #: search the query together with the dialogue's first question (when the query does not hold it already),
    #: as a search engine keeps a session's subject; the recorded ``retrieval_query`` stays the paper's. False is
    #: the paper (a web index answers a bare follow-up question on topic); the tiny profile's collection has 24
    #: passages per topic, and a bare question such as "How long does a new cat hide?" also matches passages
    #: of other topics that share "long" or "new"
    search_with_first_question: bool = False
    #: passages an earlier turn of the dialogue already wrote a suggestion from go after the others (a search
    #: engine's next page); False is the paper. With a small collection searched by meaning, a topic's best
    #: passages top every turn's results, and the agent asked again about the same sentences repeats its
    #: earlier questions until the suggestion, and the dialogue, fail
    unused_snippets_first: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_dialogues < 1 or self.max_turns < 1 or self.sqa_attempts < 1 or self.setup_attempts < 1:
            raise ValueError(f"LoopSettings needs positive counts, got {self}")
        if self.answers not in ANSWER_MODES:
            raise ValueError(f"answers must be one of {ANSWER_MODES}, got {self.answers!r}")
        if self.snippets < N_SQS:
            raise ValueError(f"snippets must be at least {N_SQS} (one per suggestion), got {self.snippets}")


@dataclass
class State:
    """One dialogue while it is generated."""

    dialogue_id: str
    topic: Topic
    seed: int
    intent: str = ""
    initial_question: str = ""
    queries: list[str] = field(default_factory=list)
    query: str = ""
    turns: list[dict[str, Any]] = field(default_factory=list)
    nones: int = 0
    outcome: str | None = None
    failure: str | None = None

    @property
    def active(self) -> bool:
        return self.outcome is None and self.failure is None

    def asked(self) -> tuple[str, ...]:
        """The initial question and the questions picked so far (what the user has asked)."""
        return tuple([self.initial_question, *self.queries[1:]])

    def search_text(self, with_first_question: bool) -> str:
        """What the retriever is asked at this turn (:attr:`LoopSettings.search_with_first_question`)."""
        if not with_first_question or self.initial_question in self.query:
            return self.query
        return f"{self.query} {self.initial_question}"

    def grounding_snippets(self) -> set[str]:
        """The passages earlier turns wrote their suggestions from."""
        return {t["web_snippets"][qa["snippet_index"]] for t in self.turns for qa in t["suggested_qas"]}

    def seen_questions(self) -> list[str]:
        return [*self.queries, *(qa["question"] for t in self.turns for qa in t["suggested_qas"])]


@dataclass
class Report:
    """What the loop did: calls, first-try and final pass rates per step, drops, seconds."""

    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, step: str, parsed: Sequence[Any]) -> None:
        entry = self.steps.setdefault(step, {"items": 0, "calls": 0, "first_try": 0, "passed": 0, "errors": {}})
        entry["items"] += len(parsed)
        entry["calls"] += sum(p.attempts for p in parsed)
        entry["first_try"] += sum(p.value is not None and p.attempts <= 1 for p in parsed)  # 0 calls: a rule
        entry["passed"] += sum(p.value is not None for p in parsed)
        for p in parsed:
            for error in p.errors:
                kind = error.split(":")[0][:60]
                entry["errors"][kind] = entry["errors"].get(kind, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        steps = {}
        for name, e in self.steps.items():
            top = dict(sorted(e["errors"].items(), key=lambda kv: -kv[1])[:5])
            steps[name] = {**{k: e[k] for k in ("items", "calls", "passed")},
                           "first_try_rate": round(e["first_try"] / max(e["items"], 1), 4),
                           "pass_rate": round(e["passed"] / max(e["items"], 1), 4),
                           "call_pass_rate": round(e["passed"] / max(e["calls"], 1), 4), "top_errors": top}
        return {"steps": steps, "dropped": dict(self.dropped), "seconds": round(self.seconds, 1)}


def _seed(*parts: Any) -> int:
    return int(digest(list(parts))[:8], 16)


def setup_dialogues(backend: Any, topics: Sequence[Topic], settings: LoopSettings, report: Report,
                    progress: bool = False) -> list[State]:
    """Topic -> intent -> initial question for ``settings.n_dialogues`` dialogues (topics cycled in a seeded
    order; intents are sampled, so two dialogues on one topic get different intents)."""
    order = list(topics)
    random.Random(settings.seed).shuffle(order)
    states = [State(f"{order[d % len(order)].id}-{settings.seed}-{d:03d}", order[d % len(order)],
                    _seed(settings.seed, d)) for d in range(settings.n_dialogues)]
    def intent(i: int, attempt: int) -> Any:
        # a topic's first dialogue gets the greedy intent, its later ones (and retries) samples; one seed per
        # occurrence and try, so the requests of a batch share their settings (a local model batches only those)
        # and no two requests of a batch are the same (their cached answers would collide)
        occurrence = i // len(order)
        sampled = occurrence > 0 or attempt > 0
        return intent_request(states[i].topic.topic, temperature=0.7 if sampled else 0.0,
                              seed=_seed(settings.seed, "intent", occurrence, attempt) if sampled else None)

    intents = ask_until_parsed(backend, len(states), intent, lambda i, text: parse_intent(text, states[i].topic.topic),
                               max_attempts=settings.setup_attempts, desc="intents (try {try})", progress=progress)
    report.add("intent", intents)
    for state, parsed in zip(states, intents, strict=True):
        if parsed.value is None:
            state.failure = "intent"
        else:
            state.intent = parsed.value
    live = [s for s in states if s.active]
    questions = ask_until_parsed(backend, len(live),
                                 lambda i, a: question_request(live[i].topic.topic, live[i].intent,
                                                               seed=_seed(settings.seed, "question", a) if a else None,
                                                               temperature=0.0 if a == 0 else 0.7),
                                 lambda i, text: parse_question(text, live[i].topic.topic),
                                 max_attempts=settings.setup_attempts, desc="initial questions (try {try})",
                                 progress=progress)
    report.add("initial_question", questions)
    for state, parsed in zip(live, questions, strict=True):
        if parsed.value is None:
            state.failure = "initial_question"
        else:
            state.initial_question = state.query = parsed.value
            state.queries = [parsed.value]
    return states


def _examples(state: State, settings: LoopSettings) -> Any:
    """Earlier turns within the context budget: sample blocks for the LLM-answer prompt, (answer, question)
    pairs for the answer-first prompt."""
    if settings.answers == "llm":
        blocks = [sample_block(t["retrieval_query"], [(qa["question"], qa["answer"]) for qa in t["suggested_qas"]])
                  for t in state.turns]
        return fit_recent(blocks, estimate_tokens, settings.context_tokens)
    pairs = [(qa["answer"], qa["question"]) for t in state.turns for qa in t["suggested_qas"]]
    return fit_recent(pairs, lambda pair: estimate_tokens(" ".join(pair)) + 4, settings.context_tokens)


def _snippets(retriever: SnippetRetriever, states: Sequence[State], settings: LoopSettings) -> list[list[Passage]]:
    """Each state's ``settings.snippets`` passages for this turn: its search text's, topped up with the first
    question's when the query matches few, and with :attr:`LoopSettings.unused_snippets_first` the passages
    earlier turns grounded suggestions in moved to the end. Retrieving more to fill the window with fresh
    passages was measured and left out: in a tiny release it brought 23 of 244 suggestions from other topics'
    passages (the topic's own run out), against 11 of 228 this way."""
    spent = [s.grounding_snippets() if settings.unused_snippets_first else set() for s in states]
    k = settings.snippets
    hits = retriever.search([s.search_text(settings.search_with_first_question) for s in states], k)
    short = [d for d, h in enumerate(hits) if len(h) < k and states[d].query != states[d].initial_question]
    if short:  # a query matching few passages is topped up with the first question's passages
        more = retriever.search([states[d].initial_question for d in short], k)
        for d, extra in zip(short, more, strict=True):
            ids = {p.id for p in hits[d]}
            hits[d] = [*hits[d], *(p for p in extra if p.id not in ids)]
    return [([p for p in h if p.text not in used] + [p for p in h if p.text in used])[:k]
            for h, used in zip(hits, spent, strict=True)]


def agent_turn(backend: Any, retriever: SnippetRetriever, states: Sequence[State], settings: LoopSettings,
               report: Report, progress: bool = False) -> list[dict[str, Any] | None]:
    """Retrieve and write the SQAs of the next turn of each state; None for a state whose agent failed.

    One request per suggestion: with ``answers="llm"`` the agent writes question and answer from the snippet
    and the query; with ``answers="extractive"`` the answer is the snippet sentence closest to the query and the
    agent writes the question it answers. A second try uses a spare snippet, later tries sample. A try after a
    suggestion that repeated an earlier question of its dialogue is asked without the dialogue's earlier turns as
    examples: SmolLM2 copies their questions (in a tiny build, 93 of 109 rejected suggestions were repeats, most of
    them an earlier turn's question returned for a different snippet sentence)."""
    hits = _snippets(retriever, states, settings)
    examples = [_examples(s, settings) for s in states]
    # slot by slot: one slot's prompts share their worked examples, so a chunk of requests holds few of them
    items = [(d, slot) for slot in range(N_SQS) for d in range(len(states))]
    accepted: dict[int, list[str]] = {d: [] for d in range(len(states))}
    # answer-first: each dialogue's earlier answers are not asked about again (a new sentence, a new question)
    answered = [[qa["answer"] for t in s.turns for qa in t["suggested_qas"]] for s in states]
    used: dict[int, int] = {}
    repeated: set[int] = set()  # items whose last answer repeated an earlier question

    def snippet_index(i: int, attempt: int) -> int:
        d, slot = items[i]
        index = slot + N_SQS * (attempt % 2)  # the second try uses a spare snippet when there is one
        return index if index < len(hits[d]) else slot

    def request(i: int, attempt: int) -> Any:
        d, slot = items[i]
        index = used[i] = snippet_index(i, attempt)
        text = hits[d][index].text if index < len(hits[d]) else ""
        sampled = attempt >= 2
        params = {"temperature": 0.7 if sampled else 0.0,
                  "seed": _seed(settings.seed, "sqa", len(states[d].turns), attempt) if sampled else None}
        shown = () if i in repeated else examples[d]
        if settings.answers == "llm":
            return sqa_request(states[d].query, text, shown, max_new_tokens=settings.sqa_max_new_tokens, **params)
        start = slot + len(states[d].turns)  # another pair of worked examples per slot, shifted every turn
        return qg_request(answer_sentence(states[d].query, text, answered[d]), shown, start=start, **params)

    def parse(i: int, text: str) -> tuple[str, str, int]:
        d, _ = items[i]
        index = used[i]
        if index >= len(hits[d]):
            raise ValueError("no snippet retrieved for this suggestion")
        snippet = hits[d][index].text
        given = answer_sentence(states[d].query, snippet, answered[d]) if settings.answers == "extractive" else None
        repeated.discard(i)
        try:
            question, answer = parse_sqa(text, snippet, [*states[d].seen_questions(), *accepted[d]], answer=given)
        except RepeatedQuestion:
            repeated.add(i)
            raise
        accepted[d].append(question)
        return question, answer, index

    parsed = ask_until_parsed(backend, len(items), request, parse, max_attempts=settings.sqa_attempts,
                              desc="suggested questions (try {try})", progress=progress)
    report.add("sqa", parsed)
    turns: list[dict[str, Any] | None] = []
    for d, state in enumerate(states):
        qas = [parsed[slot * len(states) + d].value for slot in range(N_SQS)]
        if any(qa is None for qa in qas):
            turns.append(None)
            continue
        turns.append({"turn_index": len(state.turns), "retrieval_query": state.query,
                      "web_snippets": [p.text for p in hits[d]],
                      "suggested_qas": [{"question": q, "answer": a, "snippet_index": k} for q, a, k in qas],
                      "action": ""})
    return turns


def apply_action(state: State, turn: dict[str, Any], action: str, settings: LoopSettings) -> None:
    """Record the user's action and move the dialogue on (Algorithm 1, lines 8-14, and the stop rules)."""
    turn["action"] = action
    state.turns.append(turn)
    if action == "done":
        state.outcome = "intent_satisfied"
        return
    if action == "none":
        state.nones += 1
        state.query = " ".join(state.queries)  # the concatenation of the previous queries
        if state.nones >= settings.max_nones:
            state.outcome = "preemptive_termination"
            return
    else:
        state.query = turn["suggested_qas"][TASK2_LABEL[action]]["question"]
        state.queries.append(state.query)
    if len(state.turns) >= settings.max_turns:
        state.outcome = "incomplete"


def run_turns(states: Sequence[State], agent: Any, retriever: SnippetRetriever, user: DialogueUser,
              settings: LoopSettings, report: Report, progress: bool = False) -> None:
    """Advance every active dialogue one turn at a time until all have stopped or failed."""
    for _ in range(settings.max_turns):
        live = [s for s in states if s.active]
        if not live:
            return
        turns = agent_turn(agent, retriever, live, settings, report, progress)
        for state, turn in zip(live, turns, strict=True):
            if turn is None:
                state.failure = "agent"
        acting = [(s, t) for s, t in zip(live, turns, strict=True) if t is not None]
        views = [UserView(s.intent, s.asked(), tuple(qa["question"] for qa in t["suggested_qas"]),
                          seed=_seed(s.seed, "user", len(s.turns))) for s, t in acting]
        parsed = user.act(views) if views else []
        report.add("user", parsed)
        actions = [p.value for p in parsed]
        for (state, turn), action in zip(acting, actions, strict=True):
            if action is None:
                state.failure = "user"
            else:
                apply_action(state, turn, action, settings)


def rebalance(dialogues: list[dict[str, Any]], seed: int) -> None:
    """Move each picked SQA to the position picked least so far (ties: seeded), in dialogue and turn order,
    swapping it with the SQA there; the action follows it. Balances Task 2's labels as the paper did."""
    rng = random.Random(seed)
    counts = [0] * N_SQS
    for dialogue in dialogues:
        for turn in dialogue["turns"]:
            if turn["action"] not in SQ_ACTIONS:
                continue
            picked = TASK2_LABEL[turn["action"]]
            least = min(counts)
            target = rng.choice([k for k in range(N_SQS) if counts[k] == least])
            qas = turn["suggested_qas"]
            qas[picked], qas[target] = qas[target], qas[picked]
            turn["action"] = SQ_ACTIONS[target]
            counts[target] += 1


def split_dialogues(dialogues: Sequence[dict[str, Any]], seed: int) -> dict[str, list[dict[str, Any]]]:
    """Validation and test halves with the outcomes balanced (the paper balances topics and outcomes):
    dialogues of each outcome, in a seeded order, alternate between the splits."""
    out: dict[str, list[dict[str, Any]]] = {"validation": [], "test": []}
    turn = 0
    for outcome in ("intent_satisfied", "preemptive_termination", "incomplete"):
        group = sorted((d for d in dialogues if d["outcome"] == outcome),
                       key=lambda d: digest([seed, d["dialogue_id"]]))
        for d in group:
            out["validation" if turn % 2 == 0 else "test"].append(d)
            turn += 1
    for split in out.values():
        split.sort(key=lambda d: d["dialogue_id"])
    return out


def to_record(state: State, agent: str, retrieval: str, user: str) -> dict[str, Any]:
    actions = [t["action"] for t in state.turns]
    outcome = outcome_of(actions)
    if outcome != state.outcome:  # the loop and the record rules must agree
        raise RuntimeError(f"{state.dialogue_id}: the loop ended as {state.outcome} but the actions imply {outcome}")
    return {"dialogue_id": state.dialogue_id, "topic": state.topic.topic, "intent": state.intent,
            "initial_question": state.initial_question, "outcome": outcome, "num_turns": len(state.turns),
            "agent_llm": agent, "retrieval_backend": retrieval, "user_simulator": user, "turns": state.turns}


def agent_name(agent: Any, settings: LoopSettings) -> str:
    """What a record names as its agent: the LLM, and how the answers were written when not by it."""
    return agent.name if settings.answers == "llm" else f"{agent.name} (questions for snippet sentences)"


def generate(agent: Any, retriever: SnippetRetriever, user: DialogueUser, topics: Sequence[Topic],
             settings: LoopSettings, *, work: Path | None = None,
             progress: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the loop; returns the finished dialogues (positions re-balanced) and the report (as a dict).

    ``agent`` is a chat backend (cached under ``work``); an LLM ``user`` should hold a backend cached there too
    (:func:`convohub.stages.cached`). With ``work`` the result is also a stage file keyed on the settings, the
    models and the retrieval backend, so a finished run is read back instead of replayed."""
    from convohub.stages import cached, stage

    agent = cached(agent, work)
    fingerprint = {"settings": asdict(settings), "agent": {"name": agent.name, **agent.identity()},
                   "retrieval": retriever.name, "retrieval_fingerprint": getattr(retriever, "fingerprint", None),
                   "retrieval_stopwords": STOPWORDS_NAME, "user": user.name, "topics": [t.id for t in topics],
                   "v": 4}

    def compute() -> dict[str, Any]:
        started = time.perf_counter()
        report = Report()
        states = setup_dialogues(agent, topics, settings, report, progress)
        run_turns(states, agent, retriever, user, settings, report, progress)
        for state in states:
            if state.failure:
                report.dropped[state.failure] = report.dropped.get(state.failure, 0) + 1
        dialogues = [to_record(s, agent_name(agent, settings), retriever.name, user.name) for s in states
                     if not s.failure]
        rebalance(dialogues, settings.seed)
        report.seconds = time.perf_counter() - started
        return {"dialogues": dialogues, "report": report.as_dict()}

    value = stage(work, "dialogues", fingerprint, compute)
    return value["dialogues"], value["report"]
