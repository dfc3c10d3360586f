"""ReQAP's question understanding and decomposition (QUD): recursive, one operator per LLM call.

Why recursive: asking a model for a whole operator tree in one shot gives many incomplete or wrong trees
(the paper's finding). Here every call sees one (sub-)question and answers with exactly ONE operator whose
list arguments -- and any operator a lambda needs -- are placeholders ``{{ QU(question="...") }}``; each
placeholder is decomposed by a later call, until every branch ends in a ``RETRIEVE``.

* The context of a node is only its chain of ancestor (input, output) turns: siblings never leak in, so a
  sub-question is decomposed the same way wherever it appears.
* ``n_options`` answers per step (the first greedy, the others sampled with distinct seeds) form a tree of
  alternatives; whole trees are the Cartesian product of a step's option with its children's trees,
  assembled lazily (no LLM call happens before the tree that needs it is requested), best first.
* Guards (the spec's): a branch deeper than ``max_depth`` levels is dropped, a branch whose output repeats
  an earlier output on its chain is dropped, and at most ``max_trees`` trees are produced per question.
* ``resample`` (convohub's addition, off by default: ``--resample N`` of ``convohub reqap``): a step whose
  every valid option repeats an earlier output on its chain is asked again, sampled, up to ``resample`` times,
  until it gives an option that does not. Why: greedy SFT QUD answers some sub-questions with the step that
  asked them (``FILTER(l={{ QU(<the same question>) }}, ...)``), the repeat guard drops it, and the whole
  question gets no tree (the stop-36 release's SFT QUD: 9 repeated steps, 9 of 32 test questions without a
  tree; what re-asking buys and costs: :data:`SFT_RESAMPLE`).
* Every LLM output is parsed by :func:`convohub.reqap.engine.parse.parse_tree` (whitelisted operators and
  lambdas only) and must be one operator with placeholder inputs; anything else is counted in
  :attr:`QUDStats.rejected` and dropped -- nothing the model writes is ever executed as code.

:class:`ICLDecomposer` prompts a general LLM with an instruction and 8 hand-written example dialogues
chosen by BM25 over the current history (the bank: ``convohub/reqap/data/qud.yaml``). :class:`SFTDecomposer` runs the
same recursion on a fine-tuned causal LM (greedy, ``max_new_tokens`` 200, the oldest turns dropped when the
input exceeds ``max_input_tokens``), whether it is loaded in-process or served behind an endpoint.

:class:`Decomposer` is the protocol every decomposer follows (``candidates(question)``: complete trees,
best first); :class:`StaticDecomposer` replays fixed trees (tests, saved predictions).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from convohub.llm import ChatBackend, ChatRequest
from convohub.reqap.components.retrieve import tokenize
from convohub.reqap.engine.errors import BudgetExceeded, TreeSyntaxError
from convohub.reqap.engine.expr import Function
from convohub.reqap.engine.pace import Pace, TimeCheck
from convohub.reqap.engine.parse import (
    Node,
    OpNode,
    Placeholder,
    assemble,
    parse_tree,
    placeholders,
    substitute,
)

__all__ = [
    "Candidate", "Decomposer", "ICLDecomposer", "INSTRUCTION", "QUDExample", "QUDStats",
    "RecursiveDecomposer", "SFTDecomposer", "StaticDecomposer", "Turn", "history_messages", "load_examples",
    "parse_step", "step_chains", "truncate_chain"
]


class Decomposer(Protocol):
    """QUD: complete operator-tree strings for a question, best first (may yield nothing).

    ``check_time`` is the question's time check (a :data:`~convohub.reqap.engine.pace.TimeCheck`, from the
    answering pipeline; None: no budget): a decomposer that generates calls it before each model call with the
    call's estimate, so it raises :class:`~convohub.reqap.engine.errors.BudgetExceeded` instead of starting one
    that would end past the deadline; one that only looks trees up ignores it.
    """

    def candidates(self, question: str, check_time: TimeCheck | None = None) -> Iterator[str]: ...


class StaticDecomposer:
    """Fixed trees per question text (tests, replaying saved predictions)."""

    name = "static"

    def __init__(self, trees: Mapping[str, Iterable[str]]) -> None:
        self.trees = {k.strip(): list(v) for k, v in trees.items()}

    def candidates(self, question: str, check_time: TimeCheck | None = None) -> Iterator[str]:
        yield from self.trees.get(question.strip(), [])


#: One ancestor turn: (input sub-question, output operator step in canonical text).
Turn = tuple[str, str]
#: The SFT model folder file that records the input/output limits the model was trained with.
QUD_CONFIG = "qud_config.json"
DEFAULT_MAX_INPUT_TOKENS = 800
DEFAULT_MAX_NEW_TOKENS = 200
#: :class:`SFTDecomposer`'s default sampled re-asks of a step whose every option repeats its chain: none, the
#: paper's guard alone. Measured with the stop-36 release's SFT QUD on its 32 test questions (2 CPU cores): 0, 1
#: and 3 re-asks give trees for 72%, 81% and 91% of the questions (answers for 18, 20, 23) with Hit@1 0 in every
#: case, and take 23, 43 and 94 s of generation; the time is not worth it in the tiny release.
SFT_RESAMPLE = 0

INSTRUCTION = """You turn questions about a person's own data into executable operator trees, one step at a time.
The data is a time-ordered list of events from several sources: calendar entries, mails, social media posts,
movie, TV series and music streams, online purchases and workouts. Each event is a set of key-value pairs;
every event has start_date, start_time, start_datetime, end_date, end_time and end_datetime.

You get one input question. Answer with exactly ONE operator call. Wherever the operator needs a list of
events (or a value computed from one), write a sub-question as a placeholder {{ QU(question="...") }}; each
placeholder is decomposed later in the same way. A sub-question says in plain words which events it needs
and which keys they must carry ("my runs with distance"). Stop at RETRIEVE, which finds events by a short
description of what happened.

Operators:
RETRIEVE(query="...")  all events matching a description, e.g. "I did a workout"
EXTRACT(l=..., attr_names=["k", ...], attr_types=[str|int|float|bool|list|date.fromisoformat|...])  add keys
FILTER(l=..., filter=lambda attr: ...)  keep the events for which the condition holds
JOIN(l1=..., l2=..., condition="i1.k <= i2.k and ...")  pairs of events meeting the condition, merged
GROUP_BY(l=..., attr_names=["k"])  groups of events sharing the keys
MAP(l=..., fct=lambda attr: ..., res_name="k")  a new key per event or group (fct=len counts a group)
APPLY(l=..., fct=lambda l: ...)  one value computed from the whole list (fct=len counts)
UNNEST(l=..., nested_attr_name="k", unnested_attr_name="k2")  one event per element of a list-valued key
SUM / AVG / MIN / MAX(l=..., attr_name="k")  aggregate one key
ARGMIN / ARGMAX(l=..., arg_attr_name="k", val_attr_name="k2")  the k2 value(s) where k is smallest/largest
A lambda may use the value of another sub-question as {{ QU(question="...") }}.result.
date.today() is the reference date. Write the operator call only, without any explanation."""

NEW_QUESTION = "Starting with new question. Input: "
NEXT_INPUT = "Input: "


# -- dialogue rendering ------------------------------------------------------------------------------------
def user_turn(question: str, first: bool) -> str:
    """The user message that asks for the decomposition of ``question``."""
    return (NEW_QUESTION if first else NEXT_INPUT) + Placeholder(question).text


def history_messages(chain: Sequence[Turn], question: str) -> list[dict[str, str]]:
    """Chat messages for one step: the ancestor turns, then the user turn asking about ``question``.

    The first user turn of a dialogue carries the "Starting with new question" marker; after truncation
    (:func:`truncate_chain`) the oldest kept turn does not, which is what the model sees at inference too.
    """
    messages: list[dict[str, str]] = []
    for inp, out in chain:
        messages.append({"role": "user", "content": user_turn(inp, not messages)})
        messages.append({"role": "assistant", "content": out})
    messages.append({"role": "user", "content": user_turn(question, not messages)})
    return messages


def truncate_chain(chain: Sequence[Turn], question: str, count_tokens: Callable[[list[dict[str, str]]], int],
                   max_tokens: int) -> tuple[Turn, ...]:
    """Drop the oldest ancestor turns until the step's messages fit ``max_tokens`` (the current input stays).

    Training and inference call this with the same tokenizer and limit, so the model learns from inputs
    shaped like those it later gets.
    """
    kept = tuple(chain)
    while kept and count_tokens(history_messages(kept, question)) > max_tokens:
        kept = kept[1:]
    return kept


def chat_token_counter(tokenizer: Any) -> Callable[[list[dict[str, str]]], int]:
    """Token count of a step prompt under the tokenizer's chat template (with the generation prompt)."""
    def count(messages: list[dict[str, str]]) -> int:
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        if isinstance(ids, Mapping) or hasattr(ids, "keys"):  # BatchEncoding in recent transformers
            ids = ids["input_ids"]
        return len(ids)

    return count


def char_token_counter(messages: list[dict[str, str]]) -> int:
    """Rough count (4 characters a token) for backends whose tokenizer is not at hand."""
    return sum(len(m["content"]) + 8 for m in messages) // 4


# -- steps ---------------------------------------------------------------------------------------------------
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_LABEL = re.compile(r"^(?:assistant|output|answer|operator)\s*:\s*", re.IGNORECASE)


def _clean(text: str) -> list[str]:
    """Readings of a raw LLM answer to try, in order: the whole answer, then its first line."""
    text = _LABEL.sub("", _FENCE.sub("", text.strip()).strip())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    out = [text] if text else []
    if len(lines) > 1:
        out.append(_LABEL.sub("", lines[0]))
    return out


def parse_step(text: str) -> OpNode:
    """Parse one QUD step: one whitelisted operator whose operator inputs are all placeholders.

    Raises :class:`TreeSyntaxError` for anything else (not an expression, an unknown operator or function,
    a bare placeholder, a nested operator where a placeholder belongs).
    """
    errors = []
    for reading in _clean(text) or [""]:
        try:
            node = parse_tree(reading)
        except TreeSyntaxError as err:
            errors.append(err)
            continue
        if isinstance(node, Placeholder):
            errors.append(TreeSyntaxError("a step must be an operator, not a bare placeholder"))
            continue
        nested = [v for v in node.args.values() if isinstance(v, OpNode)]
        nested += [s for v in node.args.values() if isinstance(v, Function) for s in v.subtrees
                   if isinstance(s, OpNode)]
        if nested:
            errors.append(TreeSyntaxError(f"a step is one operator; {nested[0].op} must be a QU placeholder"))
            continue
        return node
    raise errors[0]


def step_chains(steps: Mapping[str, str], root: str, max_depth: int = 8) -> list[tuple[tuple[Turn, ...], str, str]]:
    """(ancestor chain, input, output) for every step reachable from ``root``, in dialogue order.

    ``steps`` maps each (sub-)question to its step text. Dialogue order is depth first, children in
    placeholder order; a sub-question shared by two branches appears under each of them.
    """
    out: list[tuple[tuple[Turn, ...], str, str]] = []

    def visit(question: str, chain: tuple[Turn, ...]) -> None:
        if len(chain) > max_depth:
            raise ValueError(f"decomposition of {root!r} deeper than {max_depth} levels")
        if question not in steps:
            raise KeyError(f"sub-question {question!r} has no step")
        text = parse_step(steps[question]).text
        out.append((chain, question, text))
        for child in dict.fromkeys(placeholders(parse_tree(text))):
            visit(child, (*chain, (question, text)))

    visit(root, ())
    return out


# -- the example bank ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QUDExample:
    """A hand-written question and its decomposition steps (input, output) in dialogue order."""

    question: str
    steps: tuple[Turn, ...]

    @cached_property
    def step_map(self) -> dict[str, str]:
        return {inp: parse_step(out).text for inp, out in self.steps}

    @cached_property
    def tree(self) -> str:
        """The complete operator tree (canonical text)."""
        return assemble(self.step_map[self.question], self.step_map).text

    @cached_property
    def chains(self) -> list[tuple[tuple[Turn, ...], str, str]]:
        return step_chains(self.step_map, self.question)

    def dialogue(self) -> list[dict[str, str]]:
        """The whole decomposition as user/assistant turns (an in-context demonstration)."""
        messages: list[dict[str, str]] = []
        for _, inp, out in self.chains:
            messages.append({"role": "user", "content": user_turn(inp, not messages)})
            messages.append({"role": "assistant", "content": out})
        return messages

    @cached_property
    def search_text(self) -> str:
        return " ".join(f"{inp} {out}" for _, inp, out in self.chains)


def default_examples_path() -> Path:
    return Path(str(resources.files("convohub.reqap.data") / "qud.yaml"))


def load_examples(path: str | Path | None = None) -> list[QUDExample]:
    """Read and check the example bank: every output parses as a step, every example assembles into a
    complete tree and every step is reachable from its question (errors name the example and step)."""
    import yaml

    path = Path(path) if path is not None else default_examples_path()
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of {{question, steps}} entries")
    out = []
    for i, item in enumerate(data):
        where = f"{path} example {i} ({item.get('question') if isinstance(item, dict) else item!r})"
        if not isinstance(item, dict) or not isinstance(item.get("question"), str) or not item.get("steps"):
            raise ValueError(f"{where}: needs a question and a non-empty steps list")
        steps = []
        for j, step in enumerate(item["steps"]):
            if not (isinstance(step, list) and len(step) == 2 and all(isinstance(s, str) for s in step)):
                raise ValueError(f"{where} step {j}: expected [input, output] strings")
            try:
                parse_step(step[1])
            except TreeSyntaxError as err:
                raise ValueError(f"{where} step {j}: output does not parse: {err}") from None
            steps.append((step[0], step[1]))
        ex = QUDExample(item["question"], tuple(steps))
        if steps[0][0] != ex.question or len(ex.step_map) != len(steps):
            raise ValueError(f"{where}: the first step must be the question, and inputs must be unique")
        try:
            tree = parse_tree(ex.tree)
            reached = {inp for _, inp, _ in ex.chains}
        except (TreeSyntaxError, KeyError, ValueError) as err:
            raise ValueError(f"{where}: does not assemble into a tree: {err}") from None
        if placeholders(tree) or reached != set(ex.step_map):
            raise ValueError(f"{where}: open placeholders or unreachable steps "
                             f"{sorted(set(ex.step_map) - reached)}")
        out.append(ex)
    return out


# -- the recursion -------------------------------------------------------------------------------------------
@dataclass
class QUDStats:
    """Counters of one decomposer (cumulative over questions)."""

    questions: int = 0
    llm_calls: int = 0
    failed_calls: int = 0  # backend errors (timeouts, HTTP errors)
    outputs: int = 0  # answers received
    parsed: int = 0  # answers that parsed as a valid step
    rejected: int = 0  # answers that did not (never executed)
    rejected_reasons: Counter[str] = field(default_factory=Counter)
    repeated: int = 0  # options dropped for repeating an earlier output on their chain
    resampled: int = 0  # extra sampled requests for steps whose every option repeated (``resample``)
    too_deep: int = 0  # branches dropped by the depth guard
    timed_out: int = 0  # questions whose next model call would have ended past their deadline
    trees: int = 0  # complete trees produced
    capped: int = 0  # questions stopped by max_trees

    @property
    def parse_rate(self) -> float:
        return round(self.parsed / self.outputs, 4) if self.outputs else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"questions": self.questions, "llm_calls": self.llm_calls, "failed_calls": self.failed_calls,
                "outputs": self.outputs, "parsed": self.parsed, "rejected": self.rejected,
                "parse_rate": self.parse_rate, "repeated": self.repeated, "resampled": self.resampled,
                "too_deep": self.too_deep, "timed_out": self.timed_out,
                "trees": self.trees, "capped": self.capped,
                "rejected_reasons": dict(self.rejected_reasons.most_common(10))}


@dataclass(frozen=True)
class Candidate:
    """One complete tree and the steps that built it: (ancestor chain, input, output) in dialogue order."""

    tree: str
    steps: tuple[tuple[tuple[Turn, ...], str, str], ...]


_Built = tuple[Node, tuple[tuple[tuple[Turn, ...], str, str], ...]]


class _Lazy:
    """A generator whose items are kept, so it can be iterated many times while being consumed once."""

    def __init__(self, it: Iterator[_Built]) -> None:
        self._it: Iterator[_Built] | None = it
        self._items: list[_Built] = []

    def get(self, i: int) -> _Built | None:
        while len(self._items) <= i and self._it is not None:
            try:
                self._items.append(next(self._it))
            except StopIteration:
                self._it = None
        return self._items[i] if i < len(self._items) else None


def _product(seqs: Sequence[_Lazy]) -> Iterator[tuple[_Built, ...]]:
    """Lazy Cartesian product in lexicographic order (the last sequence varies fastest)."""
    if not seqs:
        yield ()
        return
    i = 0
    while (item := seqs[0].get(i)) is not None:
        for rest in _product(seqs[1:]):
            yield (item, *rest)
        i += 1


def _reason(err: Exception) -> str:
    msg = str(err).split("\n")[0]
    return re.split(r"[:(]", msg, maxsplit=1)[0].strip()[:60] or type(err).__name__


class RecursiveDecomposer:
    """The recursion shared by the ICL and SFT decomposers; subclasses say how a step is prompted.

    ``n_options`` answers per step: the first greedy, the others sampled (``temperature``, seeds
    ``seed + i``). ``max_depth`` operator levels below the root are allowed (as in
    :func:`convohub.reqap.engine.parse.assemble`); at most ``max_trees`` trees per question. ``resample``: extra
    sampled answers (seeds ``seed + n_options + r``) for a step whose every option repeats its chain (module doc).
    """

    def __init__(self, backend: ChatBackend, *, n_options: int = 1, temperature: float = 0.7,
                 max_depth: int = 8, max_trees: int = 1000, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 seed: int = 0, resample: int = 0) -> None:
        if n_options < 1 or max_trees < 1 or max_depth < 0 or resample < 0:
            raise ValueError("n_options and max_trees must be >= 1, max_depth and resample >= 0")
        self.backend = backend
        self.n_options = n_options
        self.resample = resample
        self.temperature = temperature
        self.max_depth = max_depth
        self.max_trees = max_trees
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.stats = QUDStats()
        self._memo: dict[tuple[tuple[Turn, ...], str], list[OpNode]] = {}
        #: seconds per request of every backend call so far: a call's length is estimated from it against
        #: the question's time check (a batched call cannot be interrupted, so one started late overruns by all of it)
        self.pace = Pace()

    def messages(self, chain: tuple[Turn, ...], question: str) -> list[dict[str, str]]:
        raise NotImplementedError

    #: Stop sequences of every request (a subclass whose steps are one line stops at the line's end).
    stop: tuple[str, ...] = ()

    def requests(self, messages: list[dict[str, str]]) -> list[ChatRequest]:
        out = [ChatRequest(messages, max_new_tokens=self.max_new_tokens, temperature=0.0, stop=self.stop)]
        out += [ChatRequest(messages, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                            seed=self.seed + i, stop=self.stop) for i in range(1, self.n_options)]
        return out

    def options(self, chain: tuple[Turn, ...], question: str,
                check_time: TimeCheck | None = None) -> list[OpNode]:
        """The distinct valid steps the model proposes for ``question`` (one backend call, memoised)."""
        self._fetch([(chain, question)], check_time)
        return self._memo[(chain, question)]

    def _fetch(self, keys: Sequence[tuple[tuple[Turn, ...], str]], check_time: TimeCheck | None = None) -> None:
        """Ask the backend for the steps of every (chain, question) not yet memoised, in ONE ``chat`` call
        (a local backend generates them in batches), and memoise the valid ones per key; then up to
        ``resample`` more batched calls for the keys whose every option repeats their chain. A call whose
        estimated length ends past the deadline ``check_time`` checks is not started (:class:`BudgetExceeded`)."""
        todo = [k for k in dict.fromkeys(keys) if k not in self._memo]
        if not todo:
            return
        self._ask([(key, self.requests(self.messages(*key))) for key in todo], check_time)
        for r in range(self.resample):
            stuck = [key for key in todo if self._only_repeats(key)]
            if not stuck:
                break
            params = {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                      "seed": self.seed + self.n_options + r, "stop": self.stop}
            self.stats.resampled += len(stuck)
            self._ask([(key, [ChatRequest(self.messages(*key), **params)]) for key in stuck], check_time)

    def _check_time(self, requests: int, check_time: TimeCheck | None, question: str) -> None:
        """Raise :class:`BudgetExceeded` when ``check_time`` says a call of ``requests``, at the pace of the calls
        before it, would end past the deadline (the first call of a decomposer has no estimate: only the deadline
        itself is checked)."""
        if check_time is None:
            return
        try:
            check_time(self.pace.estimate(requests), f"decoding the QUD step of {question[:60]!r} ({requests} requests)")
        except BudgetExceeded:
            self.stats.timed_out += 1
            raise

    def _ask(self, work: Sequence[tuple[tuple[tuple[Turn, ...], str], list[ChatRequest]]],
             check_time: TimeCheck | None = None) -> None:
        """One ``chat`` call for all ``(key, requests)``; each key's valid, new steps are added to its memo (a
        key enters the memo only once its answers are in, so a call that raises leaves it to be asked again)."""
        flat = [r for _, requests in work for r in requests]
        self._check_time(len(flat), check_time, work[0][0][1])
        self.stats.llm_calls += len(flat)
        started = time.monotonic()
        responses = iter(self.backend.chat(flat))
        self.pace.add(len(flat), time.monotonic() - started)
        for key, requests in work:
            memo = self._memo.setdefault(key, [])
            known = {node.text for node in memo}
            for response in (next(responses) for _ in requests):
                if not response.ok:
                    self.stats.failed_calls += 1
                    continue
                self.stats.outputs += 1
                try:
                    node = parse_step(response.text)
                except TreeSyntaxError as err:
                    self.stats.rejected += 1
                    self.stats.rejected_reasons[_reason(err)] += 1
                    continue
                self.stats.parsed += 1
                if node.text not in known:
                    known.add(node.text)
                    memo.append(node)

    def _only_repeats(self, key: tuple[tuple[Turn, ...], str]) -> bool:
        """Whether the key has valid options and every one repeats an output of its chain."""
        earlier = {out for _, out in key[0]}
        return bool(self._memo[key]) and all(node.text in earlier for node in self._memo[key])

    def prefetch(self, questions: Sequence[str]) -> int:
        """Generate every step the recursion of ``questions`` can ask for, level by level, one batched backend
        call per level (instead of one call per step), so a later :meth:`candidates` only reads the memo.

        Why: a local model generates a batch of prompts at nearly the cost of one, and the steps of a level
        (the root steps of all questions, then all their sub-questions ...) are independent. The same guards
        apply (repeated outputs, ``max_depth``). Meant for greedy decoding (``n_options`` 1): with more
        options every combination of options is expanded. Returns the number of steps generated.
        """
        level = [((), q) for q in dict.fromkeys(questions)]
        depth = generated = 0
        while level and depth <= self.max_depth:
            todo = [k for k in dict.fromkeys(level) if k not in self._memo]
            self._fetch(todo)
            generated += len(todo)
            following: list[tuple[tuple[Turn, ...], str]] = []
            for chain, question in dict.fromkeys(level):
                earlier = {out for _, out in chain}
                for option in self._memo[(chain, question)]:
                    if option.text in earlier:
                        continue
                    here = (*chain, (question, option.text))
                    following += [(here, kid) for kid in dict.fromkeys(placeholders(option))]
            level, depth = following, depth + 1
        return generated

    def proposed(self, chain: tuple[Turn, ...], question: str) -> list[str] | None:
        """The memoised valid steps for (chain, question), or None when the recursion never asked."""
        found = self._memo.get((tuple(chain), question))
        return None if found is None else [node.text for node in found]

    def _expand(self, chain: tuple[Turn, ...], question: str, depth: int,
                check_time: TimeCheck | None = None) -> Iterator[_Built]:
        if depth > self.max_depth:
            self.stats.too_deep += 1
            return
        earlier = {out for _, out in chain}
        for option in self.options(chain, question, check_time):
            text = option.text
            if text in earlier:
                self.stats.repeated += 1
                continue
            here = (*chain, (question, text))
            kids = list(dict.fromkeys(placeholders(option)))
            seqs = [_Lazy(self._expand(here, kid, depth + 1, check_time)) for kid in kids]
            if any(s.get(0) is None for s in seqs):  # a child without any tree: this option cannot finish
                continue
            for combo in _product(seqs):
                resolved = {kid: built[0] for kid, built in zip(kids, combo, strict=True)}
                tree = substitute(option, resolved) if kids else option
                steps = ((chain, question, text),) + tuple(s for built in combo for s in built[1])
                yield tree, steps

    def candidate_steps(self, question: str, check_time: TimeCheck | None = None) -> Iterator[Candidate]:
        """Complete trees with their steps, best first, at most ``max_trees``; no model call is started that
        ``check_time`` says would end past the question's deadline (:class:`BudgetExceeded`, see
        :meth:`_check_time`)."""
        self.stats.questions += 1
        for n, (tree, steps) in enumerate(self._expand((), question, 0, check_time), start=1):
            self.stats.trees += 1
            yield Candidate(tree.text, steps)
            if n >= self.max_trees:
                self.stats.capped += 1
                return

    def candidates(self, question: str, check_time: TimeCheck | None = None) -> Iterator[str]:
        """Complete operator-tree strings for ``question``, best first (the :class:`Decomposer` protocol)."""
        for candidate in self.candidate_steps(question, check_time):
            yield candidate.tree

    def describe(self) -> dict[str, Any]:
        return {"decomposer": type(self).__name__, "backend": self.backend.describe(),
                "n_options": self.n_options, "resample": self.resample, "max_depth": self.max_depth,
                "max_trees": self.max_trees}


class ICLDecomposer(RecursiveDecomposer):
    """QUD with a general LLM: instruction + ``k_examples`` example dialogues chosen by BM25 + the history.

    The examples are ranked by BM25 (``bm25s``) between the current history (ancestor inputs and outputs and
    the current input) and each example's whole dialogue; the most similar one is placed last, closest to
    the question. ``examples`` defaults to the packaged bank (:func:`load_examples`); ``instruction`` is the
    system message (:data:`INSTRUCTION`; a shorter one suits models with a small context).
    """

    def __init__(self, backend: ChatBackend, examples: Sequence[QUDExample] | None = None, *,
                 n_options: int = 3, k_examples: int = 8, instruction: str = INSTRUCTION,
                 **kwargs: Any) -> None:
        super().__init__(backend, n_options=n_options, **kwargs)
        self.instruction = instruction
        self.examples = list(examples) if examples is not None else load_examples()
        if not self.examples:
            raise ValueError("ICLDecomposer needs at least one example")
        self.k_examples = k_examples
        self._index: Any = None

    def select(self, chain: tuple[Turn, ...], question: str) -> list[QUDExample]:
        """The ``k_examples`` most similar examples, least similar first."""
        import bm25s

        if self._index is None:
            self._index = bm25s.BM25()
            self._index.index([tokenize(e.search_text) or ["_"] for e in self.examples], show_progress=False)
        query = tokenize(" ".join([*(f"{i} {o}" for i, o in chain), question]))
        scores = [float(s) for s in self._index.get_scores(query)] if query else [0.0] * len(self.examples)
        ranked = sorted(range(len(self.examples)), key=lambda i: (-scores[i], i))[: self.k_examples]
        return [self.examples[i] for i in reversed(ranked)]

    def messages(self, chain: tuple[Turn, ...], question: str) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": self.instruction}]
        for example in self.select(chain, question):
            messages += example.dialogue()
        return messages + history_messages(chain, question)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "k_examples": self.k_examples, "examples": len(self.examples)}


class SFTDecomposer(RecursiveDecomposer):
    """QUD with a fine-tuned causal LM: only the ancestor dialogue, greedy, oldest turns dropped to fit.

    ``model`` is a trained model folder (loaded with :class:`convohub.llm.TransformersBackend`, which generates
    ``batch_size`` prompts at once -- see :meth:`RecursiveDecomposer.prefetch`) or any
    :class:`ChatBackend` serving it (e.g. an ``EndpointBackend`` on ``transformers serve``/vLLM), so the
    in-process model and a served one share this code. Limits default to the folder's ``qud_config.json``
    (written by the training script); without a tokenizer the input length is estimated from characters. A step
    whose greedy answer repeats its chain is re-asked, sampled, up to ``resample`` times (module docstring).
    """

    def __init__(self, model: str | Path | ChatBackend, *, max_input_tokens: int | None = None,
                 max_new_tokens: int | None = None, tokenizer: Any = None, device: str | None = None,
                 batch_size: int = 16, n_options: int = 1, resample: int = SFT_RESAMPLE, **kwargs: Any) -> None:
        saved: dict[str, Any] = {}
        if isinstance(model, ChatBackend):
            backend = model
        else:
            from convohub.llm import TransformersBackend

            backend = TransformersBackend(model, device=device, batch_size=batch_size)
            config = Path(model) / QUD_CONFIG
            saved = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
        super().__init__(backend, n_options=n_options, resample=resample,
                         max_new_tokens=max_new_tokens or int(saved.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)),
                         **kwargs)
        self.max_input_tokens = max_input_tokens or int(saved.get("max_input_tokens", DEFAULT_MAX_INPUT_TOKENS))
        tokenizer = tokenizer if tokenizer is not None else getattr(backend, "tokenizer", None)
        self.count_tokens = chat_token_counter(tokenizer) if tokenizer is not None else char_token_counter

    #: A trained step is one line; generation stops at its end (what follows a newline is never parsed as
    #: the step, and an untrained model would otherwise run on to ``max_new_tokens``).
    stop = ("\n",)

    def messages(self, chain: tuple[Turn, ...], question: str) -> list[dict[str, str]]:
        kept = truncate_chain(chain, question, self.count_tokens, self.max_input_tokens)
        return history_messages(kept, question)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_input_tokens": self.max_input_tokens,
                "max_new_tokens": self.max_new_tokens}
