"""CRyCHIc training data: IFQC synthesis (validation, retries, de-duplication, labels), the simplifier's
labellers (rules, LLM answer parsing and retries, the confidence filter, the choice by agreement with the
hand-labelled sentences), the judge's pairs known by construction, resuming from the response cache and the
stage files, and the folder the training scripts read. Every LLM here is scripted."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from _replies import Replies

from convohub.crychic import ifqc_data as ifqc
from convohub.crychic import simplifier_data as sd
from convohub.crychic.data_common import read_record, read_rows, split_of
from convohub.crychic.judge_data import JudgeSettings, build_judge_data, make_judge_data, read_trees
from convohub.crychic.training_data import build_training_data
from convohub.llm import ChatRequest


def scripted(reply: Callable[[ChatRequest], str], model: str = "scripted-llm") -> Replies:
    """The shared scripted backend, answering from the whole request (the synthesis checks read its seed)."""
    return Replies(reply, model, whole_request=True)


def _prompt(request: ChatRequest) -> str:
    return request.messages[-1]["content"]


def good_sentence(request: ChatRequest) -> str:
    """A valid sentence for the cell a synthesis prompt describes, made unique by the request's seed."""
    text = _prompt(request)
    mark = "?" if "a question ending" in text else "."
    lo = int(text.rsplit("about ", 1)[1].split(" words")[0])
    filler = [f"w{zlib.crc32(f'{text}/{request.seed}'.encode())}", "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
              "iota", "kappa", "lambda"]
    if "'" in text and "the word" in text:
        noun = text.split("the word '")[1].split("'")[0]
        body = [noun, *filler]
    else:
        body = ["redo", *filler]
    return " ".join(body[:lo]).capitalize() + mark


# ------------------------------------------------------------------------------------------------ IFQC
def test_plan_cells_balances_the_classes_and_rejects_unknown_domains() -> None:
    cells = ifqc.plan_cells(1, ("cooking", "music"))
    by_class = Counter(ifqc.TEMPLATE_CLASS[c.template] for c in cells)
    assert by_class["implicit"] == by_class["explicit"] == 2 * 2 * 3 * 2
    assert {c.noun for c in cells if c.domain == "music"} <= set(ifqc.DOMAINS["music"])
    with pytest.raises(ValueError, match="unknown domain"):
        ifqc.plan_cells(1, ("astrology",))


def test_polite_cells_are_off_by_default_and_join_the_explicit_class() -> None:
    assert not any(c.template == "polite" for c in ifqc.plan_cells(1, ("cooking", "music")))
    cells = ifqc.plan_cells(1, ("cooking", "music"), polite_share=1 / 3)
    polite = [c for c in cells if c.template == "polite"]
    assert len(polite) == round((2 * 2 * 3 * 2) / 3) == 8
    assert {c.ending for c in polite} == {"statement"} and {c.band for c in polite} == set(ifqc.LENGTH_BANDS)
    assert all(c.action in ifqc.POLITE_ACTIONS and "asking for nothing" in c.prompt() for c in polite)
    assert ifqc.TEMPLATE_CLASS["polite"] == "explicit"
    with pytest.raises(ValueError, match="polite_share"):
        ifqc.plan_cells(1, ("cooking",), polite_share=1.5)


@pytest.mark.parametrize("text,cell,reason", [
    ("Make it shorter.", ifqc.Cell("implicit", "statement", "3-5"), None),
    ("Make it shorter?", ifqc.Cell("implicit", "statement", "3-5"), "ending mark"),
    ("Shorter.", ifqc.Cell("implicit", "statement", "3-5"), "length"),
    ("Make the recipe shorter.", ifqc.Cell("implicit", "statement", "3-5"), "domain noun in implicit"),
    ("Make the recipes shorter.", ifqc.Cell("implicit", "statement", "3-5"), "domain noun in implicit"),
    ("Go on. Then stop.", ifqc.Cell("implicit", "statement", "3-5"), "not one sentence"),
    ("Can you add garlic to that?", ifqc.Cell("explicit", "question", "5-10", "cooking", "garlic"), None),
    ("Can you add more of that?", ifqc.Cell("explicit", "question", "5-10", "cooking", "garlic"),
     "no domain noun"),
    ("Can you fix the bug in it?", ifqc.Cell("explicit", "question", "5-10", "cooking", "garlic"),
     "no domain noun"),
    ("", ifqc.Cell("new_topic", "question", "5-10", "cooking", "garlic"), "empty"),
    ("Thanks, that works now!", ifqc.Cell("polite", "statement", "3-5"), None),
    ("That fixed it, thanks.", ifqc.Cell("polite", "statement", "3-5"), None),
    ("Thanks, can you go on?", ifqc.Cell("polite", "statement", "3-5"), "ending mark"),
    ("Thanks! Any more tips!", ifqc.Cell("polite", "statement", "3-5"), "not one sentence"),
    ("Thanks for the recipe!", ifqc.Cell("polite", "statement", "3-5"), "domain noun in polite"),
])
def test_check_sentence(text: str, cell: ifqc.Cell, reason: str | None) -> None:
    assert ifqc.check_sentence(text, cell) == reason


def test_length_slack_widens_the_band_only() -> None:
    cell = ifqc.Cell("implicit", "statement", "3-5")
    assert ifqc.check_sentence("Shorter.", cell, length_slack=2) is None
    assert ifqc.check_sentence("Please make it a little bit shorter now.", cell, length_slack=2) == "length"
    assert ifqc.check_sentence("Please make it a bit shorter.", cell, length_slack=2) is None
    assert ifqc.check_sentence("Shorter?", cell, length_slack=2) == "ending mark"


def test_clean_answer_strips_labels_quotes_and_lead_ins() -> None:
    assert ifqc.clean_answer('"Make it shorter."') == "Make it shorter."
    assert ifqc.clean_answer("Message: Continue please.\nSecond line") == "Continue please."
    assert ifqc.clean_answer("Sure, here is one:\n1. Keep going.") == "Keep going."
    assert ifqc.clean_answer("   \n") == ""


def test_synthesis_retries_rejected_answers_and_labels_by_template() -> None:
    # the first answer to a prompt of odd length lacks its ending mark; every later answer is valid
    asked: Counter[str] = Counter()

    def reply(request: ChatRequest) -> str:
        asked[_prompt(request)] += 1
        first_odd = asked[_prompt(request)] == 1 and len(_prompt(request)) % 2
        return good_sentence(request)[:-1] if first_odd else good_sentence(request)

    settings = ifqc.IFQCSettings(per_cell=1, domains=("cooking",), max_attempts=3)
    backend = scripted(reply)
    rows, counts = ifqc.synthesise(backend, settings)
    assert counts["requested"] == len(ifqc.plan_cells(1, ("cooking",)))
    assert counts["accepted"] == counts["requested"] and counts["gave_up"] == 0
    assert set(counts["rejected"]) == {"ending mark"}
    assert sum(counts["rejected"].values()) == counts["calls"] - counts["accepted"] == backend.calls - len(rows)
    assert {r["attempt"] for r in rows} > {1}  # some were accepted only on a retry
    for row in rows:
        assert row["label"] == ifqc.TEMPLATE_CLASS[row["template"]]
        assert row["produced_by"] == "scripted:scripted-llm"
        assert row["split"] in ("train", "heldout")
        assert row["text"].endswith("?" if row["ending"] == "question" else ".")


def test_synthesis_deduplicates_and_gives_up_after_max_attempts() -> None:
    settings = ifqc.IFQCSettings(per_cell=1, domains=("cooking",), max_attempts=2)
    backend = scripted(lambda r: "Keep going with it." if "without saying" in _prompt(r) else good_sentence(r))
    rows, counts = ifqc.synthesise(backend, settings)
    implicit = [r for r in rows if r["template"] == "implicit"]
    assert [r["text"] for r in implicit] == ["Keep going with it."]  # the same answer is kept once
    n_implicit = sum(c.template == "implicit" for c in ifqc.plan_cells(1, ("cooking",)))
    # the 3-5 word statement cell accepts it once; every other implicit cell fails twice (duplicate or question mark)
    assert counts["gave_up"] == n_implicit - 1
    assert counts["rejected"]["duplicate"] > 0 and counts["rejected"]["ending mark"] > 0
    assert backend.calls == counts["calls"] == counts["requested"] + (n_implicit - 1)


def test_copies_of_the_worked_example_are_rejected() -> None:
    settings = ifqc.IFQCSettings(per_cell=1, domains=("cooking",), max_attempts=1)
    backend = scripted(lambda r: r.messages[2]["content"])  # parrots the example answer it was shown
    rows, counts = ifqc.synthesise(backend, settings)
    assert rows == [] and counts["rejected"]["copy of the example"] > 0


def test_ifqc_build_resumes_from_stage_file_and_response_cache(tmp_path: Path) -> None:
    settings = ifqc.IFQCSettings(per_cell=1, domains=("music",), max_attempts=1)
    first = scripted(good_sentence)
    rows, counts = ifqc.build_ifqc_data(first, settings, work=tmp_path)
    assert first.calls == counts["requested"] and counts["produced_by"] == "scripted:scripted-llm"
    again = scripted(good_sentence)
    assert ifqc.build_ifqc_data(again, settings, work=tmp_path)[0] == rows and again.calls == 0
    (tmp_path / "ifqc.json").unlink()  # an interrupted stage: every answer is still in the cache
    third = scripted(good_sentence)
    assert ifqc.build_ifqc_data(third, settings, work=tmp_path)[0] == rows and third.calls == 0
    changed = scripted(good_sentence)
    ifqc.build_ifqc_data(changed, ifqc.IFQCSettings(per_cell=1, domains=("music",), max_attempts=1, seed=3),
                         work=tmp_path)
    assert changed.calls > 0  # other settings: other seeds, new calls


# ------------------------------------------------------------------------------------------------ simplifier
def test_hand_labelled_sentences_are_valid_balanced_and_not_from_the_generator() -> None:
    from convohub.conversations import generate_wildchat_sample

    gold = sd.load_sentence_gold()
    assert len(gold) >= 60
    counts = Counter(g["label"] for g in gold)
    assert set(counts) == set(sd.LABELS) and min(counts.values()) >= 30
    assert sum(int(g["id"][1:]) >= sd.FRESH_FROM_ID for g in gold) == 30
    assert len({g["sentence"] for g in gold}) == len(gold)
    corpus = " ".join(m["content"] for row in generate_wildchat_sample(n_users=10, seed=0)
                      for m in row["conversation"])
    assert not [g["sentence"] for g in gold if len(g["sentence"]) > 20 and g["sentence"] in corpus]


def test_hand_written_follow_ups_are_valid_balanced_and_new() -> None:
    """The IFQC's hand-written test set: both classes well represented, all three templates, no sentence the
    sample generator writes, no copy of a synthesis example."""
    from convohub.conversations import generate_wildchat_sample

    gold = ifqc.load_ifqc_gold()
    counts = Counter(g["label"] for g in gold)
    assert len(gold) >= 60 and min(counts.values()) >= 30
    assert set(Counter(g["template"] for g in gold)) == set(ifqc.TEMPLATES)
    keys = [ifqc.dedup_key(g["text"]) for g in gold]
    assert len(set(keys)) == len(keys)
    shown = {ifqc.dedup_key(answer) for shots in ifqc.EXAMPLES.values() for _, answer in shots}
    assert not set(keys) & shown
    corpus = {ifqc.dedup_key(m["content"]) for row in generate_wildchat_sample(n_users=10, seed=0)
              for m in row["conversation"] if m["role"] == "user"}
    assert not set(keys) & corpus


def test_ifqc_gold_loader_rejects_bad_rows(tmp_path: Path) -> None:
    bad = tmp_path / "gold.jsonl"
    bad.write_text(json.dumps({"id": "a", "text": "Go on.", "label": "explicit", "template": "implicit"}) + "\n")
    with pytest.raises(ValueError, match="line 1: template 'implicit' with label 'explicit'"):
        ifqc.load_ifqc_gold(bad)
    bad.write_text(json.dumps({"id": "a", "text": "Go on.", "label": "implicit"}) + "\n")
    with pytest.raises(ValueError, match="keys must be"):
        ifqc.load_ifqc_gold(bad)


def test_gold_loader_rejects_bad_rows(tmp_path: Path) -> None:
    bad = tmp_path / "gold.jsonl"
    bad.write_text(json.dumps({"id": "a", "sentence": "Hi.", "label": "greeting"}) + "\n")
    with pytest.raises(ValueError, match="not one of"):
        sd.load_sentence_gold(bad)
    bad.write_text(json.dumps({"id": "a", "sentence": "Hi.", "label": "polite"}) * 1 + "\n"
                   + json.dumps({"id": "a", "sentence": "Yo.", "label": "polite"}) + "\n")
    with pytest.raises(ValueError, match="duplicate id"):
        sd.load_sentence_gold(bad)


@pytest.mark.parametrize("sentence,label,confidence", [
    ("Thanks a lot!", "polite", 5),
    ("Please rewrite the intro.", "instruction", 5),
    ("What time is it in Tokyo?", "instruction", 5),
    ("Could you make it shorter.", "instruction", 5),
    ("Hey, how are you?", "polite", 4),
    ("My cat is nine years old.", "information", 4),
    ("Purple elephants dance.", "information", 3),
    # cues-v2: a greeting or thanks in front of a request or a fact is framing; praise phrases are polite
    ("Hi ChatGPT, Recommend three books on Rome.", "instruction", 4),
    ("Thanks, now write the ending.", "instruction", 4),
    ("Hey, I live in Oslo and work nights.", "information", 4),
    ("Great answer, exactly what I needed.", "polite", 5),
    ("Thank you, that was perfect.", "polite", 5),
    ("Brilliant!", "polite", 5),
    ("This is amazing stuff from my town.", "information", 4),
])
def test_rule_labeller(sentence: str, label: str, confidence: int) -> None:
    assert sd.RuleLabeller().label_one(sentence) == sd.Annotation(label, confidence)


@pytest.mark.parametrize("answer,expected", [
    ("instruction 5", sd.Annotation("instruction", 5)),
    ("Kind: Polite, confidence: 4/5", sd.Annotation("polite", 4)),
    ("information (3)", sd.Annotation("information", 3)),
    ("instruction", sd.Annotation(None, None)),
    ("It is a request. 5", sd.Annotation(None, None)),
    ("instruction 7", sd.Annotation(None, None)),
    ("Instructions 5, instructions 5", sd.Annotation("instruction", 5)),
])
def test_parse_annotation(answer: str, expected: sd.Annotation) -> None:
    assert sd.parse_annotation(answer) == expected


def test_llm_labeller_retries_unusable_answers_a_bounded_number_of_times() -> None:
    # greedy answers lack the confidence; sampled retries (temperature > 0) carry it, except for "Hi."
    backend = scripted(lambda r: "instruction" if r.greedy or "Hi." in _prompt(r) else "instruction 5")
    labeller = sd.LLMLabeller(backend, max_attempts=3)
    found = labeller.annotate(["Write it.", "Hi."])
    assert found == [sd.Annotation("instruction", 5), sd.Annotation(None, None)]
    assert dict(labeller.counts) == {"calls": 2 + 2 + 1, "retries": 3, "unusable": 1, "sentences": 2}


def _oracle(gold: Sequence[dict], wrong: bool = False) -> Replies:
    truth = {g["sentence"]: g["label"] for g in gold}

    def reply(request: ChatRequest) -> str:
        sentence = _prompt(request).split("Sentence: ")[1].split("\nKind")[0]
        assert [m["role"] for m in request.messages] == ["system"] + ["user", "assistant"] * 3 + ["user"]
        label = truth.get(sentence) or sd.RuleLabeller().label_one(sentence).label
        if wrong:
            label = "polite"
        return f"{label} 5"

    return scripted(reply, "oracle" if not wrong else "always-polite")


def test_agreement_and_choice_by_agreement() -> None:
    gold = sd.load_sentence_gold()
    perfect = sd.agreement(sd.LLMLabeller(_oracle(gold)), gold)
    assert perfect["accuracy"] == perfect["f1_macro"] == 1.0 and perfect["kept"] == len(gold)
    poor = sd.agreement(sd.LLMLabeller(_oracle(gold, wrong=True)), gold)
    assert poor["accuracy"] == pytest.approx(1 / 3, abs=0.01) and poor["recall_polite"] == 1.0
    chosen, figures = sd.choose_labeller([sd.RuleLabeller(), sd.LLMLabeller(_oracle(gold, wrong=True))], gold)
    assert isinstance(chosen, sd.RuleLabeller) and [f["chosen"] for f in figures] == [True, False]
    chosen, _ = sd.choose_labeller([sd.RuleLabeller(), sd.LLMLabeller(_oracle(gold))], gold)
    assert isinstance(chosen, sd.LLMLabeller)


def test_confidence_filter_keeps_prompts_whose_sentences_all_score_four_or_more() -> None:
    prompts = [{"conversation_id": "c1", "turn_index": 0, "prompt": "Hi. Purple elephants dance.",
                "sentences": ["Hi.", "Purple elephants dance."]},
               {"conversation_id": "c2", "turn_index": 0, "prompt": "Thanks! Write a haiku.",
                "sentences": ["Thanks!", "Write a haiku."]}]
    rows, counts = sd.label_prompts(sd.RuleLabeller(), prompts, sd.SimplifierSettings())
    assert [r["conversation_id"] for r in rows] == ["c2"]
    assert rows[0]["labels"] == ["polite", "instruction"] and rows[0]["produced_by"] == sd.RULES_NAME
    assert counts["dropped"] == {"confidence below filter": 1}


def test_simplifier_build_labels_with_the_better_labeller_and_records_both(tmp_path: Path) -> None:
    gold = sd.load_sentence_gold()
    settings = sd.SimplifierSettings(n_users=3, max_prompts=15)
    rows, entry = sd.build_simplifier_data(sd.AUTO, settings, work=tmp_path, llm=_oracle(gold), gold=gold)
    assert entry["produced_by"] == "scripted:oracle" and {r["produced_by"] for r in rows} == {"scripted:oracle"}
    assert [f["labeller"] for f in entry["agreement"]] == [sd.RULES_NAME, "scripted:oracle"]
    assert entry["agreement"][1]["chosen"] and entry["prompts"] == 15
    rows, entry = sd.build_simplifier_data(sd.AUTO, settings, work=tmp_path / "b", llm=_oracle(gold, wrong=True),
                                           gold=gold)
    assert entry["produced_by"] == sd.RULES_NAME and entry["agreement"][0]["chosen"]
    named, entry = sd.build_simplifier_data(sd.RULES_NAME, settings, work=tmp_path / "c", gold=gold)
    assert entry["choice"] == "named" and len(entry["agreement"]) == 1 and named == rows


def test_make_labeller_by_name() -> None:
    assert isinstance(sd.make_labeller("rules:cues-v2"), sd.RuleLabeller)
    with pytest.raises(ValueError, match="unknown rule labeller"):
        sd.make_labeller("rules:nope")


# ------------------------------------------------------------------------------------------------ judge
def test_judge_pairs_are_known_by_construction_balanced_and_split_by_conversation() -> None:
    from convohub.crychic.construct import sample_sources

    settings = JudgeSettings(n_users=10, max_positives=80)
    rows, counts, _ = make_judge_data(settings)
    kinds = Counter(r["kind"] for r in rows)
    assert kinds["positive"] == kinds["same_theme"] + kinds["different_theme"] == 80
    assert kinds["same_theme"] == 40
    sources = {s.conversation_id: s for s in sample_sources(10, settings.corpus_seed)}
    for r in rows:
        source = sources[r["conversation_id"]]
        parent = source.parents[r["turn_index"]]
        assert r["prompt"] == source.exchanges[r["turn_index"]][0]
        if r["kind"] == "positive":
            assert r["label"] == 1 and r["candidate_index"] == parent
        elif r["kind"] == "same_theme":
            assert r["candidate_conversation_id"] == r["conversation_id"]
            assert r["candidate_index"] != parent and r["candidate_index"] < r["turn_index"] and r["label"] == 0
        else:
            assert r["candidate_conversation_id"] != r["conversation_id"] and r["label"] == 0
        assert r["split"] == split_of(r["conversation_id"], 0.2, 0)
    assert make_judge_data(settings)[0] == rows
    assert make_judge_data(JudgeSettings(n_users=10, max_positives=80, seed=1))[0] != rows
    assert counts["corpus_seed"] == 1  # not the WildChatTree test set's corpus (seed 0)


def test_the_heldout_conversations_come_whole_as_trees_mixed_like_the_test_split() -> None:
    from convohub.crychic.construct import sample_sources

    settings = JudgeSettings(n_users=20, max_positives=80)
    rows, counts, trees = make_judge_data(settings)
    sources = {s.conversation_id: s for s in sample_sources(20, settings.corpus_seed)}
    heldout = {cid for cid in sources if split_of(cid, 0.2, 0) == "heldout"}
    assert {r["conversation_id"] for r in rows if r["split"] == "heldout"} <= heldout
    singles = [t for t in trees if t["source"] == "single"]
    mixes = [t for t in trees if t["source"] == "mixmc"]
    assert mixes and singles
    # every held-out conversation is in exactly one tree, with its planned parents inside its own thread
    used = [t["conversation_id"] for t in singles]
    for tree in singles:
        assert [turn["parent"] for turn in tree["turns"]] == sources[tree["conversation_id"]].parents
    turns_of_mixes = sum(len(t["turns"]) for t in mixes)
    assert sorted(used) == sorted(set(used)) and set(used) < heldout
    assert turns_of_mixes == sum(len(sources[c].exchanges) for c in heldout - set(used))
    assert counts["heldout_trees"] == {"conversations": len(trees), "sources": len(heldout),
                                       "turns": sum(len(t["turns"]) for t in trees),
                                       "by_source": {"mixmc": len(mixes), "single": len(singles)}}
    assert 0.3 < len(mixes) / len(trees) < 0.6  # the test split: 45 of 100
    assert make_judge_data(settings)[2] == trees


def test_build_training_data_writes_the_folder_the_scripts_read(tmp_path: Path) -> None:
    record = build_training_data(
        tmp_path, llm=scripted(good_sentence, "writer"), labeller=sd.RULES_NAME,
        ifqc=ifqc.IFQCSettings(per_cell=1, domains=("travel",), max_attempts=1),
        simplifier=sd.SimplifierSettings(n_users=3, max_prompts=12), judge=JudgeSettings(n_users=3, max_positives=20))
    assert set(record) == {"ifqc", "simplifier", "judge"} and read_record(tmp_path) == record
    for task in record:
        rows = read_rows(tmp_path, task, "train") + read_rows(tmp_path, task, "heldout")
        assert sum(record[task]["rows"].values()) == len(rows) > 0
        assert {r["produced_by"] for r in rows} == {record[task]["produced_by"]}
    assert record["ifqc"]["produced_by"] == "scripted:writer"
    assert record["judge"]["produced_by"] == "construction:sample-plan"
    with pytest.raises(FileNotFoundError, match="build the training data first"):
        read_rows(tmp_path / "nowhere", "ifqc", "train")
    rebuilt, _, trees = build_judge_data(JudgeSettings(n_users=3, max_positives=20), work=tmp_path / "work")
    written = read_rows(tmp_path, "judge", "train") + read_rows(tmp_path, "judge", "heldout")
    assert sorted(map(json.dumps, rebuilt)) == sorted(map(json.dumps, written))
    assert read_trees(tmp_path) == trees
    assert record["judge"]["heldout_trees"]["conversations"] == len(trees)
    with pytest.raises(FileNotFoundError, match="predates the held-out trees"):
        read_trees(tmp_path / "nowhere")


def test_training_data_command_builds_the_named_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.cli import main

    assert main(["crychic", "training-data", "--out", str(tmp_path), "--task", "judge", "--n-users", "6",
                 "--max-positives", "20"]) == 0
    assert "judge: {'train'" in capsys.readouterr().out
    assert set(read_record(tmp_path)) == {"judge"} and not (tmp_path / "ifqc").exists()
    assert len(read_rows(tmp_path, "judge", "train") + read_rows(tmp_path, "judge", "heldout")) == 40
