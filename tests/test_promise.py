"""ProMISe without training: the source reader and its errors, task items, the loop's rules (8 turns, the
second none stops, none-concatenation, position re-balancing), resumability (a killed generation repeats no
finished LLM call), the checks of LLM answers, the simulators' scoring rule, the leaderboard benchmarks, and
SmolLM2 itself as the zero-shot simulator."""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from convohub.llm import ChatRequest
from convohub.llm.runner import Parsed
from convohub.promise.prompts import (
    EXAMPLES,
    QG_EXAMPLES,
    QG_SHOWN,
    content_words,
    parse_action,
    parse_intent,
    parse_question,
    parse_sqa,
    qg_examples,
    qg_request,
)
from convohub.promise.records import outcome_of, question_openings, task_items
from convohub.promise.retrieval import BM25Retriever, Passage, Topic, default_collection
from convohub.promise.simulate import LoopSettings, generate, rebalance, split_dialogues
from convohub.promise.source import PromiseSourceError, read_source
from convohub.promise.users import CoverageUser, UserView

sys.path.insert(0, str(Path(__file__).parent))
from _replies import Replies  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "dataset_scripts" / "promise" / "sample"


# ------------------------------------------------------------------------------------------------ scripted LLM
def scripted_reply(request: ChatRequest) -> str:
    """An agent that follows every prompt: intents and questions from the topic, SQAs copied from the passage or
    the sentence (grounded; a sampled retry names its seed, so it is a new question)."""
    text = request.messages[-1]["content"]
    if text.startswith("Topic:") and "\nIntent:" not in text:
        return f"Intent: I want to learn about {text[7:].strip()} with a budget under $100 for my family."
    if text.startswith("Topic:"):
        return f"Question: What {text.split(chr(10))[0][7:].strip()} options are there?"
    if text.startswith("Sentence:"):  # answer-first: the question a snippet sentence answers
        words = text[10:].split()
        extra = f" variant {request.seed % 997}" if request.seed is not None else ""
        return f"Question: Is it true that {' '.join(words[:6])}{extra}?"
    if "Passage:" in text:
        passage = text.rsplit("Passage: ", 1)[1].split("\nQuery:")[0]
        words = passage.split()
        extra = f" variant {request.seed % 997}" if request.seed is not None else ""
        return f"Question: What about {' '.join(words[1:6])}{extra}?\nAnswer: {passage.split('. ')[0]}."
    return "1"  # the user prompt: SmolLM2's habit


class Recording(Replies):
    """Replies that records every request it answers and can fail (a kill) at its n-th batch."""

    def __init__(self, fail_at_batch: int | None = None) -> None:
        super().__init__(scripted_reply, "scripted-agent", whole_request=True)
        self.batches, self.fail_at_batch, self.seen = 0, fail_at_batch, []

    def chat(self, requests: Sequence[ChatRequest]) -> list[Any]:
        self.batches += 1
        if self.fail_at_batch is not None and self.batches == self.fail_at_batch:
            raise KeyboardInterrupt("killed mid-run")
        self.seen += [json.dumps([r.messages, r.sampling_params()], sort_keys=True) for r in requests]
        return super().chat(requests)


class ScriptedUser:
    """Plays back one action list per dialogue (by dialogue order in the intent text)."""

    name = "scripted-user"

    def __init__(self, plans: dict[str, list[str]]) -> None:
        self.plans = {k: list(v) for k, v in plans.items()}

    def act(self, views: Sequence[UserView]) -> list[Parsed[str]]:
        out = []
        for view in views:
            topic = next(t for t in self.plans if t in view.intent)
            out.append(Parsed(value=self.plans[topic].pop(0)))
        return out


TOPICS = [Topic("drone", "budget drone with camera", "product"), Topic("eggs", "boiling eggs", "cooking"),
          Topic("wifi", "slow home Wi-Fi", "tech")]


def _run(user: Any, n: int = 3, work: Path | None = None, backend: Any = None, **kw: Any) -> tuple[list, dict]:
    settings = LoopSettings(n_dialogues=n, context_tokens=160, **kw)
    return generate(backend or Recording(), BM25Retriever(), user, TOPICS[:n], settings, work=work)


# ------------------------------------------------------------------------------------------------ records
def test_outcome_rules():
    assert outcome_of(["sq1", "none", "done"]) == "intent_satisfied"
    assert outcome_of(["none", "sq2", "none"]) == "preemptive_termination"
    assert outcome_of(["sq1"] * 8) == "incomplete"
    for bad, message in ((["done", "sq1"], "ends the dialogue"), (["none", "none", "sq1"], "stops at"),
                         (["sq1"] * 9, "at most 8"), (["sq1", "sq2"], "without"), (["SQ1"], "not one of")):
        with pytest.raises(ValueError, match=message):
            outcome_of(bad)


def test_task_items_follow_the_spec():
    dialogue = read_source(SAMPLE)["test"][1]  # sq4, then done
    one, two = task_items([dialogue], "task1"), task_items([dialogue], "task2")
    assert [i["id"] for i in one] == ["sample-t2-0", "sample-t2-1"] and [i["label"] for i in one] == [0, 1]
    assert [i["id"] for i in two] == ["sample-t2-0"] and two[0]["label"] == 3  # sq4 -> 3; the done turn has none
    # the context is what annotators saw: the first question, then the questions picked (no answers)
    assert one[1]["context_questions"] == ["What is a good first credit card?", "What builds a good credit score?"]
    assert len(one[1]["candidate_sqs"]) == 4
    none_turns = task_items(read_source(SAMPLE)["validation"][1:], "task2")
    assert [i["label"] for i in none_turns] == [4, 4]


# ------------------------------------------------------------------------------------------------ source
def _write(tmp: Path, validation: list, test: list | None = None) -> Path:
    (tmp / "validation.jsonl").write_text("".join(json.dumps(d) + "\n" for d in validation))
    (tmp / "test.jsonl").write_text("".join(json.dumps(d) + "\n" for d in (test or [])) or "\n")
    return tmp


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("intent"), "dialogue 'sample-v1': field 'intent' is missing"),
    (lambda d: d.update(rating=5), "field 'rating' is not part of the assumed format"),
    (lambda d: d["turns"][0].update(action="SQ3"), "turn 0: field 'action' is 'SQ3'; spell it as one of sq1"),
    (lambda d: d["turns"][1]["suggested_qas"].pop(), "turn 1: field 'suggested_qas' must be a list of exactly 4"),
    (lambda d: d.update(outcome="incomplete"), "field 'outcome' is 'incomplete' but the actions imply"),
    (lambda d: d.update(num_turns=3), "field 'num_turns' is 3 but the dialogue has 2 turns"),
    (lambda d: d["turns"][0].update(turn_index=4), "turn 0: field 'turn_index' is 4, expected 0"),
    (lambda d: d["turns"][0]["suggested_qas"][2].update(snippet_index=9), "suggested_qas[2]: field 'snippet_index'"),
    (lambda d: d["turns"].reverse(), "turn 0: field 'turn_index' is 1"),
])
def test_source_rejects_other_shapes_naming_record_and_field(tmp_path: Path, change: Any, message: str) -> None:
    good = read_source(SAMPLE)
    dialogue = copy.deepcopy(good["validation"][0])
    change(dialogue)
    folder = _write(tmp_path, [dialogue], good["test"])
    with pytest.raises(PromiseSourceError, match=message.replace("(", r"\(").replace("[", r"\[")) as info:
        read_source(folder)
    assert "validation.jsonl:1" in str(info.value)


def test_source_layout_errors(tmp_path: Path) -> None:
    with pytest.raises(PromiseSourceError, match="no test.jsonl or test.json"):
        read_source(_write(tmp_path, read_source(SAMPLE)["validation"]) and (tmp_path / "test.jsonl").unlink()
                    or tmp_path)
    good = read_source(SAMPLE)
    _write(tmp_path, good["validation"], good["validation"][:1])
    with pytest.raises(PromiseSourceError, match="repeats the dialogue at .*ids must be unique across both splits"):
        read_source(tmp_path)
    (tmp_path / "test.jsonl").write_text('{"dialogue_id": "x"\n')
    with pytest.raises(PromiseSourceError, match=r"test.jsonl:1: not valid JSON"):
        read_source(tmp_path)


# ------------------------------------------------------------------------------------------------ LLM answers
def test_sqa_and_action_checks():
    snippet = "Spare batteries are the most useful accessory for a new drone. They triple the flying time."
    assert parse_sqa("Question: Which accessory is most useful for a drone?\nAnswer: Spare batteries are the most "
                     "useful accessory.", snippet) == ("Which accessory is most useful for a drone?",
                                                       "Spare batteries are the most useful accessory.")
    for reply, message in (("Answer: yes", "no 'Question:'"), ("Question: Tell me batteries.\nAnswer: x y", "not a question"),
                           ("Question: Are drones fun?\nAnswer: Drones are fun.", "shares no word"),
                           ("Question: Which accessory helps a drone?\nAnswer: A helicopter license costs $500 in Peru.",
                            "not grounded"),
                           ("Question: What is the most useful drone accessory?\nAnswer: spare batteries",
                            "repeats an earlier question")):
        with pytest.raises(ValueError, match=message):
            parse_sqa(reply, snippet, seen=["Which accessory is the most useful for a drone?"])
    assert [parse_action(t) for t in ("2", "Choice 3.", "None of them", "Done!", "I think 4", "maybe")] == \
        ["sq2", "sq3", "none", "done", "sq4", None]


def test_answer_first_prompts_rotate_worked_examples_that_open_their_questions_differently() -> None:
    openers = [" ".join(q.split()[:2]) for _, q in QG_EXAMPLES]
    assert len(set(openers)) == len(openers) and all(q.endswith("?") for _, q in QG_EXAMPLES)
    sentence = "Boiled eggs keep for a week in the fridge."

    def shown(start: int) -> tuple[str, ...]:
        request = qg_request(sentence, start=start)
        assert request.messages[-1]["content"] == f"Sentence: {sentence}"
        return tuple(m["content"] for m in request.messages[1:-1])

    assert all(len(shown(k)) == 2 * QG_SHOWN for k in range(len(QG_EXAMPLES)))
    # the four slots of a turn are asked after four different last examples, and the next turn shifts them
    lasts = {k: shown(k)[-1] for k in range(len(QG_EXAMPLES) + 1)}
    assert len({lasts[k] for k in range(4)}) == 4 and lasts[len(QG_EXAMPLES)] == lasts[0]
    assert {shown(k)[1] for k in range(len(QG_EXAMPLES))} == {f"Question: {q}" for _, q in QG_EXAMPLES}
    # the passage collection's topics stay out of the worked examples
    topic_words = set().union(*(content_words(t.topic) for t in default_collection().topics))
    assert not topic_words & set().union(*(content_words(a + " " + q) for a, q in QG_EXAMPLES))


def test_question_openings_count_the_first_words_of_every_suggestion() -> None:
    def turn(*questions: str) -> dict[str, Any]:
        return {"suggested_qas": [{"question": q, "answer": "a b"} for q in questions]}

    dialogues = [{"turns": [turn("How long does it take?", "How long does dough rise?", "Why is it so?")]},
                 {"turns": [turn("How long does a cat hide?"), turn("Which one is best?")]}]
    assert question_openings(dialogues) == ([("How long does", 3), ("Why is it", 1), ("Which one is", 1)], 5)
    assert question_openings(dialogues, words=1, top=1) == ([("How", 3)], 5)
    assert question_openings([]) == ([], 0)


def test_setup_checks_keep_the_first_question_very_short_and_the_intent_clean():
    topic = "budget drone with camera"
    assert parse_question("Question: Which camera drones are cheap?", topic) == "Which camera drones are cheap?"
    # the paper's q0 is very short: a question that restates the whole intent leaves nothing for the dialogue
    with pytest.raises(ValueError, match="3-10 expected"):
        parse_question("How do you use a drone camera to take drone photos of your backyard?", topic)
    assert parse_intent("Intent: I want a drone with a camera for my son, under $100.", topic).endswith("$100.")
    with pytest.raises(ValueError, match="repeats itself"):
        parse_intent("I want a drone camera. I can use a drone camera with a drone camera.", topic)
    # the worked examples show first questions without the intents' preferences (at most half their words)
    for _topic, intent, question in EXAMPLES:
        assert len(content_words(question) & content_words(intent)) <= len(content_words(intent)) / 2
        assert len(question.split()) <= 8


# ------------------------------------------------------------------------------------------------ the loop
@pytest.mark.parametrize("answers", ["llm", "extractive"])
def test_loop_rules_stop_concatenate_and_rebalance(answers: str) -> None:
    user = ScriptedUser({"drone": ["sq1"] * 8, "boiling eggs": ["sq2", "none", "sq3", "none"],
                         "Wi-Fi": ["sq4", "done"]})
    dialogues, report = _run(user, answers=answers)
    by_topic = {d["topic"]: d for d in dialogues}
    drone, eggs, wifi = by_topic["budget drone with camera"], by_topic["boiling eggs"], by_topic["slow home Wi-Fi"]
    assert drone["outcome"] == "incomplete" and drone["num_turns"] == 8  # at most 8 turns
    assert eggs["outcome"] == "preemptive_termination" and eggs["num_turns"] == 4  # stopped at the second none
    assert wifi["outcome"] == "intent_satisfied" and [t["action"] for t in wifi["turns"]][-1] == "done"
    # after "none" the query is the concatenation of the queries so far (q0 and the picked questions)
    t = eggs["turns"]

    def picked(turn: dict) -> str:
        return turn["suggested_qas"][int(turn["action"][2]) - 1]["question"]

    assert [x["action"] for x in t][1::2] == ["none", "none"]
    assert t[0]["retrieval_query"] == eggs["initial_question"] and t[1]["retrieval_query"] == picked(t[0])
    assert t[2]["retrieval_query"] == f"{eggs['initial_question']} {picked(t[0])}"
    assert t[3]["retrieval_query"] == picked(t[2])
    # every record names the agent LLM, the retrieval backend and the user
    agent = "scripted:scripted-agent" + ("" if answers == "llm" else " (questions for snippet sentences)")
    assert {(d["agent_llm"], d["retrieval_backend"], d["user_simulator"]) for d in dialogues} == \
        {(agent, "bm25s:convohub-promise-passages-v3", "scripted-user")}
    for turn in (t for d in dialogues for t in d["turns"]):  # every answer is grounded in its snippet
        for qa in turn["suggested_qas"]:
            snippet = turn["web_snippets"][qa["snippet_index"]]
            assert qa["answer"].rstrip(".") in snippet
    # re-balanced: 8 + 2 + 1 picked suggestions spread over the four positions (3, 3, 3, 2 in some order)
    picks = [t["action"] for d in dialogues for t in d["turns"] if t["action"].startswith("sq")]
    assert sorted(picks.count(f"sq{k}") for k in range(1, 5)) == [2, 3, 3, 3]
    assert report["steps"]["sqa"]["pass_rate"] == 1.0 and report["dropped"] == {}
    user = report["steps"]["user"]  # a scripted (rule-like) user makes no LLM call, and the report says so
    assert user["calls"] == 0 and user["items"] == len(picks) + sum(
        t["action"] in ("none", "done") for d in dialogues for t in d["turns"]) and user["first_try_rate"] == 1.0
    splits = split_dialogues(dialogues, 0)
    assert sorted(len(s) for s in splits.values()) == [1, 2]


def test_rebalance_moves_the_picked_suggestion_with_its_answer():
    turn = {"action": "sq1", "suggested_qas": [{"question": f"q{k}?", "answer": f"a{k}", "snippet_index": k}
                                               for k in range(4)]}
    dialogues = [{"turns": [copy.deepcopy(turn) for _ in range(4)]}]
    rebalance(dialogues, seed=3)
    assert sorted(t["action"] for t in dialogues[0]["turns"]) == ["sq1", "sq2", "sq3", "sq4"]
    for t in dialogues[0]["turns"]:
        chosen = t["suggested_qas"][int(t["action"][2]) - 1]
        assert chosen == {"question": "q0?", "answer": "a0", "snippet_index": 0}


def test_killed_generation_repeats_no_finished_call(tmp_path: Path) -> None:
    plans = {"drone": ["sq1", "sq2", "none", "done"], "boiling eggs": ["sq3", "none", "none"],
             "Wi-Fi": ["sq1"] * 8}
    whole = Recording()
    expected, _ = _run(ScriptedUser(plans), backend=whole, answers="extractive")
    killed = Recording(fail_at_batch=4)  # intents, questions, turn 1 ... killed while writing turn 2
    with pytest.raises(KeyboardInterrupt):
        _run(ScriptedUser(plans), work=tmp_path, backend=killed, answers="extractive")
    assert killed.seen  # some calls finished before the kill
    rerun = Recording()
    dialogues, _ = _run(ScriptedUser(plans), work=tmp_path, backend=rerun, answers="extractive")
    assert not set(rerun.seen) & set(killed.seen)  # no finished call is asked again
    assert set(rerun.seen) | set(killed.seen) == set(whole.seen)  # and together they are the whole run
    assert dialogues == expected
    again = Recording()
    assert _run(ScriptedUser(plans), work=tmp_path, backend=again, answers="extractive")[0] == expected
    assert again.seen == []  # the finished run is a stage file: not even the cache is asked


def test_coverage_user_rules():
    user = CoverageUser()
    intent = "I want a cheap drone with a camera for a beginner."  # cheap, drone, camera, beginner
    covering = ("Is a camera drone good for a beginner?", "How heavy is a drone?", "x?", "y?")
    # the first question covers enough of the intent, but it was never answered: no "done" before a pick, and
    # a suggestion bringing the first question's words is still wanted
    assert user.decide(UserView(intent, ("Which cheap camera drone suits a beginner?",), covering)) == "sq1"
    # words a picked suggestion brought are not wanted again: nothing else adds, so none
    night = "I want a cheap drone to film at night indoors."  # cheap, drone, film, night, indoors
    asked = ("Which drone?", "Is a cheap drone good?")  # 2 of 5 covered: not done yet
    assert user.decide(UserView(night, asked, ("Which drone is cheap?", "x?"))) == "none"
    assert user.decide(UserView(night, asked, ("Which drone is cheap?", "Can a drone film at night?"))) == "sq2"
    assert user.decide(UserView(intent, ("Which drone is cheap?", "Does it have a camera for a beginner?"),
                                covering)) == "done"
    assert user.decide(UserView(intent, ("Which drone?",), ("What does a camera cost?", "Is a camera drone good for "
                                                           "a beginner?", "x?", "y?"))) == "sq2"
    assert user.decide(UserView(intent, ("Which drone?",), ("How long to boil eggs?",) * 4)) == "none"


def test_passage_collection_is_named_and_retrievable():
    collection = default_collection()
    assert collection.name == "convohub-promise-passages-v3" and len(collection) == 384 and len(collection.topics) == 16
    assert "hand" in collection.provenance
    [hits] = BM25Retriever(collection).search(["how long to boil an egg for a runny yolk"], 3)
    assert hits and all(isinstance(p, Passage) and p.topic == "eggs" for p in hits)


# ------------------------------------------------------------------------------------------------ scoring
def test_generative_simulator_scoring_rule():
    from convohub.promise.simulators import GenerativeSimulator

    items = [{"id": str(k), "intent": "i", "context_questions": ["q?"], "candidate_sqs": ["a?", "b?", "c?", "d?"]}
             for k in range(4)]
    replies = iter(["2", "done", "I am not sure", "none"])
    simulator = GenerativeSimulator(Replies(lambda _text: next(replies)))
    assert simulator.predict("task1", items) == [0, 1, -1, 0]  # unparseable: invalid on both tasks
    assert simulator.predict("task2", items) == [1, -1, -1, 4]  # done on a Task 2 item: invalid


def test_likelihood_decode_reads_both_tasks_from_the_six_replies() -> None:
    """Task 1: done is the most likely of the six; Task 2: the most likely of the other five, so a turn whose
    top reply is done still gets a Task 2 label. Only a local model has likelihoods to read."""
    from convohub.promise.simulators import GenerativeSimulator, likelihood_label, resolve

    done_first = {"sq1": -3.0, "sq2": -1.5, "sq3": -4.0, "sq4": -2.0, "none": -2.5, "done": -0.5}
    none_first = {**done_first, "done": -3.5, "none": -0.1}
    assert [likelihood_label("task1", x) for x in (done_first, none_first)] == [1, 0]
    assert [likelihood_label("task2", x) for x in (done_first, none_first)] == [1, 4]
    assert likelihood_label("task1", {}) == likelihood_label("task2", {}) == -1  # a failed call: invalid
    with pytest.raises(ValueError, match="served by an endpoint: use decode generate"):
        GenerativeSimulator(Replies(lambda _text: "2"), decode="likelihood")
    with pytest.raises(ValueError, match="unknown decode 'beam'"):
        GenerativeSimulator(Replies(lambda _text: "2"), decode="beam")
    with pytest.raises(ValueError, match="'majority' is not a zero-shot or generative simulator"):
        resolve("majority", {"task1": [], "task2": []}, decode="likelihood")


def test_calibrated_decode_subtracts_the_content_free_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that prefers reply 1 whatever the turn: read by likelihood every turn is SQ1; calibrated, each
    turn's reply is the one it raises most above the content-free prompt's, here 3. The content-free prompt is
    asked once per number of questions asked, and a second reading of the same answers asks nothing again."""
    import convohub.llm.choices as choices
    from convohub.promise.prompts import completion_text
    from convohub.promise.records import ACTIONS
    from convohub.promise.simulators import GenerativeSimulator

    prefers_one = {"sq1": -0.1, "sq2": -3.0, "sq3": -3.0, "sq4": -3.0, "none": -3.0, "done": -3.0}
    this_turn = {"sq1": -0.5, "sq2": -3.0, "sq3": -1.0, "sq4": -3.0, "none": -3.0, "done": -2.5}

    def answer(text: str) -> str:
        values = prefers_one if choices.CONTENT_FREE in text else this_turn
        return "1 (log-likelihood " + ", ".join(f"{completion_text(a)} {values[a]:+.4f}" for a in ACTIONS) + ")"

    chooser = Replies(answer)
    monkeypatch.setattr(choices, "as_choice_backend", lambda _backend, _options: chooser)
    items = [{"id": str(k), "intent": "i", "context_questions": ["q?"] * (1 + k // 2),
              "candidate_sqs": ["a?", "b?", "c?", "d?"]} for k in range(3)]
    raw = GenerativeSimulator(Replies(lambda _text: "2"), decode="likelihood")
    assert raw.predict("task2", items) == [0, 0, 0] and chooser.calls == 3
    calibrated = GenerativeSimulator(Replies(lambda _text: "2"), decode="calibrated", replies=raw.replies)
    assert calibrated.name.endswith("(calibrated likelihood)")
    assert calibrated.predict("task2", items) == [2, 2, 2]
    assert calibrated.predict("task1", items) == [0, 0, 0]  # done: 0.5 above its content-free value, 3: 2.0
    assert chooser.calls == 5 and sorted(calibrated.content_free) == [1, 2]
    assert calibrated.likelihoods(items[0])["sq3"] == pytest.approx(2.0)


def test_multiple_choice_encoder_scores_each_option_with_one_scorer(tmp_path: Path) -> None:
    """Task 2's multiple-choice head: five probabilities per item in label order (SQ1-SQ4, none), the same
    scorer for every option (moving a suggestion moves its probability with it), saved and loaded by the
    simulator with the head its config names; Task 1 cannot have it."""
    from transformers import AutoTokenizer

    from convohub.models import minilm_path
    from convohub.promise.simulators import NONE_OPTION, EncoderSimulator, head_of, option_pairs
    from convohub.promise.training import fresh_classifier

    path = str(minilm_path())
    with pytest.raises(ValueError, match="task1 has none: use head 'sequence'"):
        fresh_classifier("task1", path, "multiple-choice")
    model = fresh_classifier("task2", path, "multiple-choice")
    model.save_pretrained(tmp_path / "t2")
    AutoTokenizer.from_pretrained(path).save_pretrained(tmp_path / "t2")
    simulator = EncoderSimulator({"task2": tmp_path / "t2"})
    assert head_of(simulator.models["task2"][1].config) == "multiple-choice"
    sqs = ["Which lens suits portraits?", "How do I clean a sensor?", "What is a prime lens?", "Is a tripod needed?"]
    item = {"intent": "I want a camera for portraits.", "context_questions": ["Which camera?"], "candidate_sqs": sqs}
    assert option_pairs(item)[-1] == ("I want a camera for portraits. Asked: Which camera?", NONE_OPTION)
    moved = {**item, "candidate_sqs": [sqs[2], sqs[0], sqs[3], sqs[1]]}
    first, second = simulator.probabilities("task2", [item, moved])
    assert len(first) == 5 and sum(first) == pytest.approx(1.0)
    assert second == pytest.approx([first[2], first[0], first[3], first[1], first[4]], abs=1e-5)
    assert len(set(round(p, 6) for p in first)) > 1  # the options' texts, not their positions, are scored


@pytest.mark.slow
def test_smollm2_zero_shot_simulator_parses_its_answers():
    """The real offline LLM as the zero-shot simulator: every reply to the gold user decisions parses."""
    from convohub.llm import make_backend
    from convohub.promise.simulators import GenerativeSimulator
    from convohub.promise.users import read_gold

    gold = read_gold()[:8]
    items = [{"id": g["id"], "intent": g["intent"], "context_questions": g["asked"], "candidate_sqs": g["candidates"]}
             for g in gold]
    simulator = GenerativeSimulator(make_backend("smollm2", batch_size=8))
    actions = simulator.actions(items)
    assert all(a is not None for a in actions), simulator.replies
    ranked = GenerativeSimulator(make_backend("smollm2", batch_size=8), decode="likelihood")
    assert ranked.name.endswith("(likelihood)")
    for task in ("task1", "task2"):
        assert all(p >= 0 for p in ranked.predict(task, items))  # the most likely reply is always a label
    numbers = ranked.likelihoods(items[0])
    assert sorted(numbers) == sorted(["sq1", "sq2", "sq3", "sq4", "none", "done"])
    assert all(v < 0 for v in numbers.values()) and len(set(numbers.values())) == 6


def test_a_collection_file_replaces_the_passages_and_seeds_the_topics(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub.promise.retrieval import PASSAGES_ENV, PassageCollection, configured_collection

    monkeypatch.delenv(PASSAGES_ENV, raising=False)
    assert configured_collection() is default_collection()
    lines = [{"id": "k1", "text": "A kettle descaler made of citric acid removes limescale.", "topic": "kettles"},
             {"id": "k2", "text": "Kettles with a hidden element boil water faster.", "topic": "kettles"},
             {"id": "b1", "text": "A folding bike fits under an office desk.", "topic": "folding bikes"}]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.setenv(PASSAGES_ENV, str(path))
    collection = configured_collection()
    assert collection.name == "mine" and len(collection) == 3
    assert [t.topic for t in collection.topics] == ["kettles", "folding bikes"]
    retriever = BM25Retriever(collection)
    assert retriever.name == "bm25s:mine"
    [hits] = retriever.search(["how do I remove limescale from a kettle"], 2)
    assert hits[0].id == "k1"
    # same name, other passages: another fingerprint, so a generation stage keyed on it is not reused
    other = tmp_path / "elsewhere" / "mine.jsonl"
    other.parent.mkdir()
    other.write_text("".join(json.dumps({**line, "text": line["text"] + " Really."}) + "\n" for line in lines))
    assert PassageCollection.read(other).fingerprint != collection.fingerprint
    # errors name the variable, the file and what is wrong
    no_topics = tmp_path / "flat.jsonl"
    no_topics.write_text(json.dumps({"id": 1, "text": "x"}) + "\n")
    for bad, message in ((tmp_path / "missing.jsonl", "does not exist"), (no_topics, "needs passages and topics"),
                         (tmp_path / "broken.json", "topic 0: needs 'id', 'topic' and 'passages'")):
        if bad.name == "broken.json":
            bad.write_text(json.dumps({"name": "b", "provenance": "p", "topics": [{"id": "t", "passages": ["x"]}]}))
        monkeypatch.setenv(PASSAGES_ENV, str(bad))
        with pytest.raises(ValueError, match=f"{PASSAGES_ENV}={re.escape(str(bad))}: .*{re.escape(message)}"):
            configured_collection()


def test_release_build_step_digests_the_source_and_passages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed release builds ProMISe again when a source folder, a passage collection or the dialogue count is
    set, unset or edited: the build step names them as its settings."""
    import shutil

    from convohub.promise.settings import DIALOGUES_ENV, PASSAGES_ENV, SOURCE_ENV
    from convohub.promise.system import SYSTEM
    from convohub.release import _inputs_digest

    [build] = [s for s in SYSTEM.steps if s.kind == "build"]
    assert set(build.settings) == {SOURCE_ENV, PASSAGES_ENV, DIALOGUES_ENV}
    for name in build.settings:
        monkeypatch.delenv(name, raising=False)
    digests = [_inputs_digest(build, None)]
    source = tmp_path / "source"
    shutil.copytree(SAMPLE, source)
    monkeypatch.setenv(SOURCE_ENV, str(source))
    digests.append(_inputs_digest(build, None))
    stat = (source / "test.json").stat()
    os.utime(source / "test.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # an edited split file
    digests.append(_inputs_digest(build, None))
    passages = tmp_path / "p.jsonl"
    passages.write_text(json.dumps({"id": 1, "text": "x", "topic": "t"}) + "\n")
    monkeypatch.setenv(PASSAGES_ENV, str(passages))
    digests.append(_inputs_digest(build, None))
    passages.write_text(json.dumps({"id": 1, "text": "y", "topic": "t"}) + "\n")
    digests.append(_inputs_digest(build, None))
    monkeypatch.setenv(DIALOGUES_ENV, "3")
    digests.append(_inputs_digest(build, None))
    assert len(set(digests)) == len(digests) == 6
    assert _inputs_digest(build, None) == digests[-1]  # nothing changed: the step resumes


class _RecordingRetriever:
    """BM25 over convohub's passages, keeping every query string it was asked."""

    def __init__(self) -> None:
        self.inner, self.asked = BM25Retriever(), []
        self.name, self.collection = self.inner.name, self.inner.collection

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        self.asked += list(queries)
        return self.inner.search(queries, k)


@pytest.mark.parametrize("with_first", [False, True])
def test_later_turns_search_with_the_first_question_only_when_asked(with_first: bool) -> None:
    """The paper searches the bare query; ``search_with_first_question`` adds the dialogue's first question to
    later queries that do not hold it (the recorded ``retrieval_query`` stays the paper's either way)."""
    user = ScriptedUser({"drone": ["sq1", "sq2", "done"], "boiling eggs": ["none", "sq1", "done"]})
    retriever = _RecordingRetriever()
    settings = LoopSettings(n_dialogues=2, context_tokens=160, search_with_first_question=with_first)
    dialogues, _ = generate(Recording(), retriever, user, TOPICS[:2], settings)
    expected = {f"{t['retrieval_query']} {d['initial_question']}"
                if with_first and d["initial_question"] not in t["retrieval_query"] else t["retrieval_query"]
                for d in dialogues for t in d["turns"]}
    asked = set(retriever.asked)
    assert expected <= asked
    bare_later = {t["retrieval_query"] for d in dialogues for t in d["turns"]
                  if d["initial_question"] not in t["retrieval_query"]}
    assert bare_later  # the picked questions
    assert bool(bare_later & asked) != with_first


def test_bm25_drops_question_words_from_queries() -> None:
    """Question words ("how", "do", "my") are stop words: in a small collection they would weigh like the
    topic's words and pull in passages of other topics."""
    from convohub.bm25 import english_query_tokens

    assert english_query_tokens(["How do I charge my electric car at home?"]) == [["charge", "electric", "car", "home"]]
    [hits] = BM25Retriever().search(["How do I plan a birthday party for 10 kids?"], 4)
    assert [p.topic for p in hits] == ["birthday"] * 4


def test_reranking_puts_the_query_s_topic_first_within_bm25_s_candidates() -> None:
    """A later question of a tiny release, searched bare: BM25 alone ranks passages of other topics among
    its eight snippets (they share "long" and "take"); the MiniLM re-ranking keeps BM25's candidates and
    puts the drone passages first."""
    from convohub.promise.retrieval import RerankedRetriever, offline_retriever

    query = "How long does it take for a budget drone to take a shot?"
    bm25 = BM25Retriever()
    [bare] = bm25.search([query], 8)
    [candidates] = bm25.search([query], 32)
    reranked = offline_retriever()
    assert isinstance(reranked, RerankedRetriever)
    [hits] = reranked.search([query], 8)
    assert len(hits) == 8 and {p.id for p in hits} <= {p.id for p in candidates}
    assert sum(p.topic != "drone" for p in bare) >= 1
    assert [p.topic for p in hits] == ["drone"] * 8
    assert reranked.name == ("bm25s:convohub-promise-passages-v3+rerank:sentence-transformers/all-MiniLM-L6-v2"
                             "@32,cos>=0.25")
    [exact] = RerankedRetriever(bm25, min_cosine=0.99).search([hits[0].text], 8)
    assert [p.id for p in exact] == [hits[0].id]  # the floor drops every candidate but the passage itself
    [unfloored] = RerankedRetriever(bm25).search(["budget drone hotel prices"], 32)
    [floored] = reranked.search(["budget drone hotel prices"], 32)
    assert set(floored) < set(unfloored) and unfloored[: len(floored)] == floored
    assert reranked.fingerprint == bm25.fingerprint
    assert reranked.search([], 4) == [] and reranked.search(["zzzqqq"], 4) == [[]]
    assert offline_retriever(rerank=None).name == bm25.name
    with pytest.raises(ValueError, match="k must be positive"):
        reranked.search([query], 0)


def test_off_topic_suggestions_counts_passages_of_another_topic() -> None:
    from convohub.promise.retrieval import off_topic_suggestions

    collection = default_collection()
    drone = [p.text for p in collection.passages if p.topic == "drone"][:2]
    eggs = next(p.text for p in collection.passages if p.topic == "eggs")
    topic = next(t.topic for t in collection.topics if t.id == "drone")
    turn = {"web_snippets": [*drone, eggs, "a passage the collection does not hold"],
            "suggested_qas": [{"snippet_index": i} for i in (0, 1, 2, 3)]}
    assert off_topic_suggestions([{"topic": topic, "turns": [turn]}], collection) == (1, 3)
    assert off_topic_suggestions([{"topic": "not a topic", "turns": [turn]}], collection) == (0, 0)


class _SameResultsRetriever:
    """Every query gets the same ranking: one topic's passages, best first (a search by meaning over a small
    collection comes close to this)."""

    def __init__(self, topic: str) -> None:
        self.collection = default_collection()
        self.passages = [p for p in self.collection.passages if p.topic == topic]
        self.name = "fixed:" + topic

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        return [self.passages[:k] for _ in queries]


@pytest.mark.parametrize("unused_first", [False, True])
def test_unused_snippets_first_moves_passages_already_asked_about_to_the_end(unused_first: bool) -> None:
    user = ScriptedUser({"drone": ["sq1", "sq2", "done"]})
    settings = LoopSettings(n_dialogues=1, context_tokens=160, unused_snippets_first=unused_first)
    [dialogue], _ = generate(Recording(), _SameResultsRetriever("drone"), user, TOPICS[:1], settings)
    grounded = [{t["web_snippets"][qa["snippet_index"]] for qa in t["suggested_qas"]} for t in dialogue["turns"]]
    first, second = grounded[0], grounded[1]
    assert len(dialogue["turns"]) == 3 and all(len(g) == 4 for g in grounded)
    assert all(len(t["web_snippets"]) == settings.snippets for t in dialogue["turns"])
    top = [p.text for p in _SameResultsRetriever("drone").passages[:settings.snippets]]
    if unused_first:  # the same eight passages, those asked about placed last: the second turn's are fresh
        assert not first & second
        assert set(dialogue["turns"][1]["web_snippets"]) == set(top) and dialogue["turns"][1]["web_snippets"][:4] == \
            [t for t in top if t not in first]
    else:  # the same eight passages every turn, so suggestions come back to passages asked about before
        assert all(list(t["web_snippets"]) == top for t in dialogue["turns"])
        assert first & second or (first | second) & grounded[2]


#: messages of an answer-first request without earlier turns: system, the shown worked examples, the sentence
QG_FIXED_MESSAGES = 1 + 2 * QG_SHOWN + 1


def _copying_reply(request: ChatRequest) -> str:
    """SmolLM2's habit as an agent: shown earlier turns of its dialogue, it returns the last one's question
    whatever the sentence; shown only the worked examples, it writes a question for the sentence."""
    if request.messages[-1]["content"].startswith("Sentence:") and len(request.messages) > QG_FIXED_MESSAGES:
        return request.messages[-2]["content"]
    return scripted_reply(request)


@pytest.mark.parametrize("answers", ["extractive", "llm"])
def test_a_retry_after_a_repeated_question_drops_the_dialogue_s_earlier_turns_from_the_prompt(answers: str) -> None:
    backend = Recording()
    backend.reply = _copying_reply if answers == "extractive" else scripted_reply
    user = ScriptedUser({"drone": ["sq1", "sq2", "done"]})
    settings = LoopSettings(n_dialogues=1, context_tokens=3000, answers=answers)
    [dialogue], report = generate(backend, BM25Retriever(), user, TOPICS[:1], settings)
    assert dialogue["outcome"] == "intent_satisfied" and dialogue["num_turns"] == 3  # never dropped
    requests = [json.loads(r)[0] for r in backend.seen]
    sqa = [m for m in requests if m[-1]["content"].startswith(("Sentence:", "Earlier turns", "Passage:"))]
    with_examples = [m for m in sqa if len(m) > QG_FIXED_MESSAGES or "Earlier turns" in m[-1]["content"]]
    # the first tries of turns 2 and 3 show the earlier turns; every retry follows a repeat and shows none
    errors = report["steps"]["sqa"]["top_errors"]
    repeats = errors.pop("repeats an earlier question", 0)
    assert errors == {} and report["steps"]["sqa"]["calls"] == len(sqa) == 12 + repeats and len(with_examples) == 8
    if answers == "extractive":  # the copying agent repeats on every first try of turns 2 and 3
        assert repeats >= 8


def test_the_loop_asks_each_suggestion_slot_after_its_own_worked_examples_shifted_every_turn() -> None:
    backend = Recording()
    user = ScriptedUser({"drone": ["sq1", "sq2", "done"]})
    [dialogue], _ = generate(backend, BM25Retriever(), user, TOPICS[:1], LoopSettings(n_dialogues=1, answers="extractive"))
    assert dialogue["num_turns"] == 3
    qg = [m for m in (json.loads(r)[0] for r in backend.seen) if m[-1]["content"].startswith("Sentence:")]
    worked = [tuple(x["content"] for x in m[1:1 + 2 * QG_SHOWN]) for m in qg]
    examples = [tuple(f"{role}: {text}" for pair in qg_examples(k) for role, text in zip(("Sentence", "Question"), pair,
                                                                                           strict=True))
                for k in range(len(QG_EXAMPLES))]
    assert worked[:4] == [examples[k] for k in range(4)]  # turn 1: slots 0-3 start at examples 0-3
    assert set(worked) - set(worked[:4])  # later turns start elsewhere


def test_action_balance_oversamples_every_reply_to_the_most_frequent_one() -> None:
    from collections import Counter

    from convohub.promise.training import balance_actions, reply_of

    replies = ["done"] * 6 + ["1"] * 3 + ["none"]
    rows = [{"n": n, "completion": [{"role": "assistant", "content": a}]} for n, a in enumerate(replies)]
    balanced = balance_actions(rows, "oversample", seed=0)
    assert Counter(map(reply_of, balanced)) == {"done": 6, "1": 6, "none": 6}
    assert {r["n"] for r in balanced} == set(range(len(rows)))  # every turn kept at least once
    assert [reply_of(r) for r in balanced[:6]] != ["done"] * 6  # shuffled, not grouped by reply
    assert balanced == balance_actions(rows, "oversample", seed=0)  # seeded
    assert balance_actions(rows, "none", seed=0) == rows
    with pytest.raises(ValueError, match="action_balance must be one of none, oversample"):
        balance_actions(rows, "undersample", seed=0)
