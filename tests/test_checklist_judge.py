"""WildFeedback checklist judge: verdict mapping, both-order combination, failure counting and plumbing.

Most tests use a scripted :class:`ChatBackend` that answers according to which response sits in position
A, so each rule of the metric is checked against hand-worked numbers. Two more run the same code against
the real tiny random model -- in process and behind `transformers serve` -- where nearly every answer is
gibberish: the point there is that the plumbing completes and gibberish is *counted*, not scored.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from _serving import served_fixture, tiny_causal_fixture  # noqa: F401  (pytest fixtures)

from convohub.llm import ChatBackend, ChatRequest, ChatResponse
from convohub.metrics.checklist_judge import (
    LEXICAL_JUDGE,
    REWARD_FOR_A,
    VERDICTS,
    LexicalChecklistJudge,
    PairJudgement,
    candidate_reward,
    checklist_judge,
    judge_agreement,
    judge_from_spec,
    judge_pairs,
    judge_prompt,
    load_judge_gold,
    parse_compact_verdict,
    parse_rating,
    parse_verdict,
    resolve_judge,
    summarise_judgements,
)

REPO = Path(__file__).resolve().parents[1]
RATES = {"win", "tie", "lose", "mean_reward", "parse_failures", "n_judged"}
KEYS = RATES | {"judge", "prompt_style"}
_RESPONSE_A = re.compile(r"<\|begin_of_response_A\|>\n(.*?)\n<\|end_of_response_A\|>", re.DOTALL)


class ScriptedJudge(ChatBackend):
    """Answers each prompt with ``script(candidate_is_a, instance_id, prompt)`` and records every call.

    Candidates are written ``CAND-<i>`` and baselines ``REF-<i>``, so the script can tell where the
    candidate was placed and which instance it is judging.
    """

    kind = "scripted"

    def __init__(self, script: Callable[[bool, int, str], str | ChatResponse]) -> None:
        self.script = script
        self.calls: list[list[ChatRequest]] = []

    @property
    def model_id(self) -> str:
        return "scripted-judge"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.calls.append(list(requests))
        out = []
        for request in requests:
            prompt = request.messages[-1]["content"]
            response_a = _RESPONSE_A.search(prompt).group(1)
            answer = self.script(response_a.startswith("CAND"), int(response_a.split()[0].split("-")[1]), prompt)
            out.append(answer if isinstance(answer, ChatResponse) else ChatResponse(text=answer))
        return out


def _json_choice(choice: str) -> str:
    return json.dumps({"analysis of A": "fine", "analysis of B": "fine", "reason of A=B": "-",
                       "reason of A>B": "-", "reason of B>A": "-", "choice": choice})


def _inputs(n: int) -> dict:
    return {
        "predictions": [f"CAND-{i} a short answer" for i in range(n)],
        "references": [f"REF-{i} a long answer" for i in range(n)],
        "histories": [[{"role": "user", "content": f"first question {i}"},
                       {"role": "assistant", "content": "an answer the user disliked"}] for i in range(n)],
        "queries": [f"shorter please {i}" for i in range(n)],
        "checklists": [[f"CHECK-{i}: the answer must be short", "no jargon"] for i in range(n)],
    }


def _run(script: Callable[[bool, int, str], str | ChatResponse], n: int = 4, **kw) -> tuple[dict, ScriptedJudge]:
    judge = ScriptedJudge(script)
    return checklist_judge(**_inputs(n), judge=judge, **kw), judge


# --- mapping and parsing -------------------------------------------------------------------------------

def test_verdict_to_candidate_reward():
    assert [candidate_reward(v, candidate_is_a=True) for v in VERDICTS] == [100, 50, 0, -50, -100]
    assert [candidate_reward(v, candidate_is_a=False) for v in VERDICTS] == [-100, -50, 0, 50, 100]
    assert REWARD_FOR_A == {"A++": 100, "A+": 50, "A=B": 0, "B+": -50, "B++": -100}


@pytest.mark.parametrize(("text", "verdict"), [
    (_json_choice("A++"), "A++"),
    (_json_choice("[B+]"), "B+"),  # the placeholder brackets copied from the format
    (_json_choice(" A = B "), "A=B"),
    ("Sure!\n```json\n" + _json_choice("B++") + "\n```\nHope this helps.", "B++"),
    ('{"analysis of A": "says "hello" twice", "choice": "A+"}', "A+"),  # broken JSON, clean choice field
    ("B+", "B+"),
    ('  "A++".', "A++"),
    ("[A=B]", "A=B"),
], ids=["json", "brackets", "spaces", "fenced", "broken-json", "bare", "quoted-bare", "bracketed-bare"])
def test_parse_verdict_accepts(text: str, verdict: str):
    assert parse_verdict(text) == verdict


@pytest.mark.parametrize("text", [
    None, "", "   ",
    "A is better than B",  # prose: never guessed
    "I choose A+ because it is shorter",  # a token inside prose is not a bare verdict
    _json_choice("A"),
    _json_choice("a+"),  # strict: lower case is not one of the five choices
    json.dumps({"choice": 1}),
    json.dumps({"verdict": "A+"}),
    '{"choice": "A+" "x"} {"choice": "B+" ',  # broken, with two disagreeing choice fields
    '{"analysis of A": "good", "choice": "A+',  # truncated
], ids=["none", "empty", "blank", "prose", "token-in-prose", "not-a-choice", "lower-case", "number",
        "wrong-key", "conflicting", "truncated"])
def test_parse_verdict_rejects(text: str | None):
    assert parse_verdict(text) is None


# --- combination of the two orders ---------------------------------------------------------------------

def test_consistent_judge_maps_to_win_lose():
    # instances 0, 1: candidate much better in both orders; 2: baseline slightly better in both orders;
    # 3: the same quality in both orders.
    def script(cand_is_a: bool, i: int, _: str) -> str:
        side = {0: "cand++", 1: "cand++", 2: "ref+", 3: "tie"}[i]
        if side == "tie":
            return _json_choice("A=B")
        winner_is_a = cand_is_a == side.startswith("cand")
        return _json_choice(("A" if winner_is_a else "B") + ("++" if side.endswith("++") else "+"))

    scores, _ = _run(script)
    assert scores == {"win": 0.5, "tie": 0.25, "lose": 0.25, "mean_reward": (100 + 100 - 50 + 0) / 4,
                      "parse_failures": 0, "n_judged": 4, "judge": "scripted-judge", "prompt_style": "wb-reward"}


def test_mixed_orders_are_averaged():
    # instance 0: A++ (cand as A, +100) then A+ (cand as B, -50): mean +25 -> win
    # instance 1: A+ then B+ -> +50, +50 -> win;  instance 2: A=B then A+ -> 0, -50: mean -25 -> lose
    # instance 3: B+ then A=B -> -50, 0: mean -25 -> lose
    answers = {(0, True): "A++", (0, False): "A+", (1, True): "A+", (1, False): "B+",
               (2, True): "A=B", (2, False): "A+", (3, True): "B+", (3, False): "A=B"}
    scores, _ = _run(lambda cand_is_a, i, _: _json_choice(answers[i, cand_is_a]))
    assert scores["win"] == 0.5 and scores["lose"] == 0.5 and scores["tie"] == 0.0
    assert scores["mean_reward"] == pytest.approx((25 + 50 - 25 - 25) / 4)


@pytest.mark.parametrize("always", ["A++", "A+", "B+", "B++"])
def test_position_bias_cancels(always: str):
    """A judge that only looks at the position gives every instance +r and -r: all ties, reward 0."""
    scores, _ = _run(lambda *_: _json_choice(always), n=3)
    assert {k: scores[k] for k in RATES} == {"win": 0.0, "tie": 1.0, "lose": 0.0, "mean_reward": 0.0,
                                             "parse_failures": 0, "n_judged": 3}


def test_parse_failures_are_counted_not_tied():
    # instance 0: second order gibberish; instance 1: request error in the first order; 2 and 3 fine.
    def script(cand_is_a: bool, i: int, _: str) -> str | ChatResponse:
        if i == 0 and not cand_is_a:
            return "I think both are nice."
        if i == 1 and cand_is_a:
            return ChatResponse.failure("HTTP 500: boom")
        return _json_choice("A++" if cand_is_a else "B++")

    scores, _ = _run(script)
    assert {k: scores[k] for k in RATES} == {"win": 1.0, "tie": 0.0, "lose": 0.0, "mean_reward": 100.0,
                                             "parse_failures": 2, "n_judged": 2}

    nothing, _ = _run(lambda *_: "gibberish", n=2)
    assert nothing["parse_failures"] == 4 and nothing["n_judged"] == 0
    assert all(math.isnan(nothing[k]) for k in ("win", "tie", "lose", "mean_reward"))


def test_judge_pairs_keeps_per_instance_detail():
    judge = ScriptedJudge(lambda cand_is_a, i, _: _json_choice("A+" if cand_is_a else "A=B") if i == 0
                          else "???")
    pairs = judge_pairs(**_inputs(2), judge=judge)
    assert pairs[0] == PairJudgement(verdicts=("A+", "A=B"), rewards=(50, 0), raw=pairs[0].raw)
    assert pairs[0].reward == 25.0 and pairs[0].outcome == "win" and pairs[0].judged
    assert pairs[1].verdicts == (None, None) and pairs[1].outcome is None and pairs[1].raw == ("???", "???")
    assert summarise_judgements(pairs)["parse_failures"] == 2


# --- prompts, batching, ablation -------------------------------------------------------------------------

def test_one_greedy_batch_in_both_orders():
    _, judge = _run(lambda *_: _json_choice("A=B"), n=3)
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 6
    requests = judge.calls[0]
    assert all(r.temperature == 0 for r in requests)
    first_a = [_RESPONSE_A.search(r.messages[-1]["content"]).group(1) for r in requests]
    assert [a.split()[0] for a in first_a] == ["CAND-0", "REF-0", "CAND-1", "REF-1", "CAND-2", "REF-2"]
    prompt = requests[0].messages[-1]["content"]
    for part in ("first question 0", "an answer the user disliked", "shorter please 0", "REF-0 a long answer",
                 "CHECK-0: the answer must be short", "A++", "B++", "A=B", '"choice"'):
        assert part in prompt


def test_without_checklist_drops_only_the_checklist():
    with_cl, judge_with = _run(lambda *_: _json_choice("A+"), n=2)
    without, judge_without = _run(lambda *_: _json_choice("A+"), n=2, with_checklist=False)
    assert set(with_cl) == set(without) == KEYS
    for request in judge_without.calls[0]:
        prompt = request.messages[-1]["content"]
        assert "CHECK-" not in prompt and "no jargon" not in prompt and "checklist" not in prompt.lower()
        assert "shorter please" in prompt and "CAND-" in prompt
    assert all("CHECK-" in r.messages[-1]["content"] for r in judge_with.calls[0])
    assert "(no earlier turns)" in judge_prompt([], "q", "a", "b", [])
    assert "(no checklist items)" in judge_prompt([], "q", "a", "b", [])


# --- input validation and judge resolution -------------------------------------------------------------

@pytest.mark.parametrize(("field", "index", "value", "error", "match"), [
    ("queries", None, ["q"], ValueError, "equal lengths"),
    ("predictions", 1, None, TypeError, r"predictions\[1\] must be a str"),
    ("references", 0, 3, TypeError, r"references\[0\] must be a str"),
    ("histories", 1, [{"role": "bot", "content": "x"}], ValueError, r"histories\[1\]\[0\]\['role'\]"),
    ("histories", 0, [{"role": "user", "content": None}], TypeError, r"histories\[0\]\[0\]\['content'\]"),
    ("histories", 0, "not a list", TypeError, r"histories\[0\] must be a list"),
    ("checklists", 1, ["ok", 7], TypeError, r"checklists\[1\]\[1\] must be a str"),
    ("checklists", 0, "be short", TypeError, r"checklists\[0\] must be a list"),
    ("queries", None, "one string", TypeError, "queries must be a list"),
])
def test_validation_names_field_and_index(field, index, value, error, match):
    inputs = _inputs(2)
    if index is None:
        inputs[field] = value
    else:
        inputs[field][index] = value
    judge = ScriptedJudge(lambda *_: "A+")
    with pytest.raises(error, match=match):
        checklist_judge(**inputs, judge=judge)
    assert not judge.calls  # rejected before any judge call


def test_empty_input_and_judge_resolution(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ValueError, match="at least one"):
        checklist_judge([], [], [], [], [], judge=ScriptedJudge(lambda *_: "A+"))
    monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="no judge named: .*'smollm2'.*'lexical'"):
        resolve_judge()
    with pytest.raises(ValueError, match="no judge named: pass --judge smollm2 .*--judge lexical"):
        judge_from_spec(None)
    assert isinstance(resolve_judge(judge_model="lexical"), LexicalChecklistJudge)
    assert judge_from_spec(LEXICAL_JUDGE).model_id == LEXICAL_JUDGE
    with pytest.raises(ValueError, match="not both"):
        resolve_judge(ScriptedJudge(lambda *_: "A+"), judge_model="x")
    with pytest.raises(TypeError, match="ChatBackend"):
        resolve_judge(judge="gpt-4o")  # type: ignore[arg-type]
    endpoint = resolve_judge(judge_base_url="http://127.0.0.1:9/v1", judge_model="judge-model")
    assert endpoint.name == "endpoint:judge-model"


# --- small-judge prompts: compact (pairwise, one word) and pointwise (one response, yes/no) ---------------

@pytest.mark.parametrize(("text", "verdict"), [("A", "A+"), (" b.", "B+"), ("Tie", "A=B"), ("Answer A: x", "A+"),
                                               ("The answer is A", None), ("", None)])
def test_compact_answers(text: str, verdict: str | None):
    assert parse_compact_verdict(text) == verdict


@pytest.mark.parametrize(("text", "rating"), [("yes (log-odds +1.2500)", 1.25), ("no (log-odds -0.5)", -0.5),
                                              ("Yes, it is.", 1.0), ("no", -1.0), ("maybe", None), (None, None)])
def test_pointwise_ratings(text: str | None, rating: float | None):
    assert parse_rating(text) == rating


class RatingJudge(ChatBackend):
    """Pointwise: rates a response by the number in it (``CAND-3`` -> 3), prompts recorded."""

    kind = "scripted"
    prompt_style = "pointwise"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    @property
    def model_id(self) -> str:
        return "rating-judge"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        out = []
        for r in requests:
            prompt = r.messages[-1]["content"]
            self.prompts.append(prompt)
            answer = re.search(r"Answer: (\w+)-(\d+)", prompt)
            score = int(answer.group(2)) if answer else 0
            out.append(ChatResponse(text=f"yes (log-odds {score:+.4f})" if answer else "???"))
        return out


def test_pointwise_judging_rates_each_response_once_and_compares():
    judge = RatingJudge()
    inputs = {"predictions": ["CAND-3", "CAND-1", "CAND-2", "garbled"], "references": ["REF-1", "REF-2", "REF-2", "REF-1"],
              "histories": [[]] * 4, "queries": ["q"] * 4, "checklists": [["be short"]] * 4}
    pairs = judge_pairs(**inputs, judge=judge)
    assert [p.outcome for p in pairs] == ["win", "lose", "tie", None]
    assert pairs[0].verdicts == ("A+", "B+") and pairs[1].rewards == (-50, -50)  # one verdict, both orders agree
    assert len(judge.prompts) == 6  # REF-1, REF-2 rated once each (same context)
    assert all("The user wants:\n- be short" in p and "yes or no" in p for p in judge.prompts)
    scores = checklist_judge(**inputs, judge=judge, with_checklist=False)
    assert scores["prompt_style"] == "pointwise" and scores["parse_failures"] == 2 and scores["n_judged"] == 3


def test_judge_gold_set_and_lexical_agreement():
    gold = load_judge_gold()
    assert len(gold) >= 60 and len({g["id"] for g in gold}) == len(gold)
    assert {g["better"] for g in gold} == {"A", "B"} and len({g["topic"] for g in gold}) >= 30
    assert all(g["instruction"] and g["response_a"] != g["response_b"] for g in gold)
    lexical = judge_agreement(LexicalChecklistJudge(), gold)
    assert lexical["judge"] == LEXICAL_JUDGE and lexical["n"] == len(gold)
    assert lexical["agree"] + lexical["ties"] + lexical["wrong"] + lexical["parse_failures"] == len(gold)


@pytest.mark.slow
def test_smollm2_judge_on_hand_labelled_items(tmp_path: Path):
    """The offline judge for real: SmolLM2 rates three gold items pointwise by yes/no log-odds (the second
    pass over the same items is answered from the cache)."""
    from convohub.models import SMOLLM2_ID

    gold = load_judge_gold()[:3]
    judge = resolve_judge(judge_model="smollm2", cache_dir=tmp_path / "cache")
    assert judge.model_id == SMOLLM2_ID and judge.identity()["method"] == "yes-no-log-odds"
    pairs = judge_pairs([g["response_a"] for g in gold], [g["response_b"] for g in gold], [[]] * 3,
                        [g["instruction"] for g in gold], [g["checklist"] for g in gold], judge)
    assert all(p.judged for p in pairs)
    assert all(re.fullmatch(r"(yes|no) \(log-odds [+-]\d+\.\d{4}\)", text) for p in pairs for text in p.raw)
    result = judge_agreement(judge, gold)
    assert result["judge"] == SMOLLM2_ID and result["prompt_style"] == "pointwise" and result["n"] == 3
    assert result["parse_failures"] == 0


# --- real models ---------------------------------------------------------------------------------------

def test_tiny_local_judge_completes_and_counts_failures(tiny_causal: Path):
    """The random tiny model never writes a verdict: every output must show up as a parse failure."""
    scores = checklist_judge(**_inputs(2), judge_model=str(tiny_causal), max_new_tokens=8)
    assert set(scores) == KEYS
    assert scores["parse_failures"] + 2 * scores["n_judged"] == 4
    assert scores["n_judged"] == 0 and math.isnan(scores["win"])


@pytest.mark.server
def test_through_transformers_serve_with_evaluate(served: tuple[str, str]):
    import evaluate

    url, model = served
    metric = evaluate.load(str(REPO / "evaluation" / "checklist_judge"))
    scores = metric.compute(**_inputs(2), judge_base_url=url, judge_model=model, max_new_tokens=8)
    assert set(scores) == KEYS
    assert scores["parse_failures"] == 4 and scores["n_judged"] == 0  # gibberish, all counted

    # a wrong model name: every request fails (HTTP 400) and is counted the same way, nothing raises
    wrong = checklist_judge(**_inputs(2), judge_base_url=url, judge_model="no-such/model", max_new_tokens=8)
    assert wrong["parse_failures"] == 4 and wrong["n_judged"] == 0
