"""WildFeedback data pipeline: label schema, offline labeller and summaries, streaming readers, the dataset
build (pipeline and released-format source) loaded back with ``datasets.load_dataset``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import datasets
import pytest

from convohub.hub import HubTarget
from convohub.llm import CachedBackend, ChatBackend, ChatRequest, ChatResponse
from convohub.paths import repo_root
from convohub.wildfeedback import FeedbackResult, identify, summarise
from convohub.wildfeedback.agreement import (
    GoldSetError,
    binary_agreement,
    compare_on_gold,
    load_gold,
    parse_gold,
    reference_kind,
)
from convohub.wildfeedback.dataset import build_from_pipeline, build_from_source, sample_conversations
from convohub.wildfeedback.identify import (
    IdentificationError,
    default_prompt_style,
    labelling_prompt,
    parse_labelling,
)
from convohub.wildfeedback.labels import (
    DSAT_LABELS,
    SAT_LABELS,
    LabelError,
    normalise_intent,
    validate_turn_list,
)
from convohub.wildfeedback.pipeline import PAIR_COLUMNS, Settings, run_pipeline
from convohub.wildfeedback.rules import label_turns
from convohub.wildfeedback.source import SourceFormatError, iter_json_records
from convohub.wildfeedback.split import is_test_user
from convohub.wildfeedback.summary_agreement import offline_summariser
from convohub.wildfeedback.turn_prompts import (
    DSAT_GLOSSES,
    SAT_GLOSSES,
    identify_split,
    parse_label,
    parse_reaction,
)

CONV = [
    {"role": "user", "content": "What is the capital of Australia?"},
    {"role": "assistant", "content": "The capital of Australia is Sydney."},
    {"role": "user", "content": "No, that's wrong, the capital is Canberra. Also make it shorter."},
    {"role": "assistant", "content": "You're right: Canberra."},
    {"role": "user", "content": "Thanks, perfect!"},
    {"role": "assistant", "content": "Glad it helped!"},
]
TURN = {"summary": "s", "preceding_topical_relation": "NO", "domain": "TRAVEL", "intent": "INTENT:1-INFORMATION_SEEKING",
        "satisfaction": ["N/A"], "dissatisfaction": ["N/A"], "state": "NEWTOPIC"}


def test_intent_and_label_normalisation() -> None:
    assert normalise_intent("INTENT:INTENT:3-CREATION") == "INTENT:3-CREATION"
    assert normalise_intent("2-ANALYSIS") == "INTENT:2-ANALYSIS"
    assert normalise_intent("open-ended discovery") == "INTENT:4-OPEN-ENDED_DISCOVERY"
    with pytest.raises(LabelError):
        normalise_intent("INTENT:1-ANALYSIS")  # number and name disagree: not guessed
    second = {**TURN, "preceding_topical_relation": "yes", "satisfaction": "Getting There, N/A",
              "dissatisfaction": ["factual error", "Style"], "state": "feedback"}
    [first, t2] = validate_turn_list([{"T-1": TURN}, {"T-2": second}], 2)
    assert t2.satisfaction == ["Getting_There"] and t2.dissatisfaction == ["Factual_Error", "Style"]
    assert t2.state == "FEEDBACK" and t2.preceding_topical_relation == "YES" and not first.sat


@pytest.mark.parametrize("bad, message", [
    ([{"T-1": TURN}], "expected 2 turn objects"),
    ([{"T-2": TURN}, {"T-1": TURN}], "turn order"),
    ([{"T-1": TURN}, {"T-2": {**TURN, "dissatisfaction": ["Rude"]}}], "T-2: dissatisfaction 'Rude'"),
    ([{"T-1": TURN}, {"T-2": {k: v for k, v in TURN.items() if k != "state"}}], "missing field 'state'"),
])
def test_invalid_label_lists_are_rejected(bad: list, message: str) -> None:
    with pytest.raises(LabelError, match=message):
        validate_turn_list(bad, 2)


def test_parse_labelling_accepts_fenced_json() -> None:
    text = "Here you go:\n```json\n" + json.dumps([{"T-1": TURN}]) + "\n```"
    result = parse_labelling(text, 1, "endpoint:x")
    assert result.labeller == "endpoint:x" and result.turns[0].domain == "TRAVEL"
    assert "T-1" in labelling_prompt(CONV[:2]) and "INTENT:2-ANALYSIS" in labelling_prompt(CONV[:2])


def test_offline_identify_and_summarise() -> None:
    result = identify(CONV)
    assert isinstance(result, FeedbackResult) and result.labeller == "rules:lexicon-v2"
    assert [t.state for t in result.turns] == ["NEWTOPIC", "FEEDBACK", "FEEDBACK"]
    assert {"Factual_Error", "Style", "Revision"} <= set(result.turns[1].dissatisfaction)
    assert "Gratitude" in result.turns[2].satisfaction and "Positive_Closure" in result.turns[2].satisfaction
    assert result.sat and result.dsat and result.turns[0].satisfaction == ["N/A"]
    assert FeedbackResult.from_dict(json.loads(json.dumps(result.to_dict()))).to_dict() == result.to_dict()
    summary = summarise(CONV, result)
    assert [s["query"] for s in summary] == [1]
    prefs = summary[0]["preferences"]
    assert "The user prefers short, concise answers." in prefs
    assert any(p.startswith("The user expects factually correct information") for p in prefs)
    assert summarise(CONV[:2], identify(CONV[:2])) == []


def test_hand_labelled_set_loads_and_validates() -> None:
    gold = load_gold()
    assert len(gold) >= 60 and len({c.id for c in gold}) == len(gold)
    assert len({c.language for c in gold} - {"en"}) >= 5  # some non-English conversations
    scored = [lab for c in gold for lab in c.labels[1:]]
    assert sum(s != ["N/A"] for s, _ in scored) >= 25 and sum(d != ["N/A"] for _, d in scored) >= 25
    assert all(set(s) <= set(SAT_LABELS) and set(d) <= set(DSAT_LABELS) for c in gold for s, d in c.labels)
    texts = [t["content"] for c in gold for t in c.turns]
    assert any("what's wrong with my code?" in t.lower() for t in texts) and any("谢谢" in t for t in texts)
    assert not any(reference_kind(t) for c in gold for t in [u["content"] for u in c.turns if u["role"] == "user"][1:])
    doc = json.loads(json.dumps({"conversations": [
        {"id": c.id, "turns": c.turns, "labels": [{"satisfaction": s, "dissatisfaction": d} for s, d in c.labels]}
        for c in gold]}))
    doc["conversations"][3]["labels"][1]["dissatisfaction"] = ["Rude"]
    with pytest.raises(GoldSetError, match=rf"{gold[3].id} T-2 dissatisfaction: \['Rude'\]"):
        parse_gold(doc)


@pytest.mark.parametrize("text", ["What's wrong with my code? It never stops.", "谢谢，不错！", "好的，谢谢，没错。"])
def test_rules_do_not_flag_plain_questions_or_chinese_thanks(text: str) -> None:
    turns = [{"role": "user", "content": "Help me with this."}, {"role": "assistant", "content": "Sure, here it is."},
             {"role": "user", "content": text}]
    assert label_turns(turns)[1].dissatisfaction == ["N/A"]
    assert label_turns([*turns[:2], {"role": "user", "content": "No, that's wrong."}])[1].dissatisfaction == [
        "Factual_Error"]


def test_binary_agreement_uses_the_usual_definitions() -> None:
    gold = [True, True, False, False, True, False]
    pred = [True, False, False, True, True, False]
    got = binary_agreement(gold, pred)
    assert got["precision"] == pytest.approx(2 / 3) and got["recall"] == pytest.approx(2 / 3)
    assert got["accuracy"] == pytest.approx(4 / 6) and got["kappa"] == pytest.approx(1 / 3)


def test_rules_measured_on_the_hand_labelled_set(tmp_path: Path) -> None:
    comparison = compare_on_gold(None, tmp_path, log=lambda _: None)
    rules = comparison["labellers"]["rules:lexicon-v2"]
    assert comparison["chosen"] == "rules:lexicon-v2" and comparison["llm"] is None
    assert rules["SAT"]["turns"] == comparison["gold"]["scored_turns"] >= 90
    assert 0.5 < rules["SAT"]["f1"] < 1 and 0 < rules["DSAT"]["f1"] < 1  # measured, not perfect
    assert compare_on_gold(None, tmp_path, log=lambda _: None) == comparison  # cached
    assert len(list(tmp_path.glob("gold_agreement-*.json"))) == 1


def test_gold_agreement_cache_is_keyed_on_the_labelling_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed prompt or rule (another code digest) is measured again instead of replaying old figures."""
    from convohub.wildfeedback import agreement

    compare_on_gold(None, tmp_path, log=lambda _: None)
    monkeypatch.setattr(agreement, "labelling_code_digest", lambda: "changed-prompts")
    compare_on_gold(None, tmp_path, log=lambda _: None)
    assert len(list(tmp_path.glob("gold_agreement-*.json"))) == 2


class Scripted(ChatBackend):
    """Free-text answers chosen by ``answer(prompt, times this prompt was asked before)``."""

    kind = "scripted"

    def __init__(self, answer: Callable[[str, int], str]) -> None:
        self.answer = answer
        self.asked: Counter[str] = Counter()

    @property
    def model_id(self) -> str:
        return "scripted-model"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        out = []
        for r in requests:
            prompt = "\n".join(m["content"] for m in r.messages)
            out.append(ChatResponse(text=self.answer(prompt, self.asked[prompt])))
            self.asked[prompt] += 1
        return out


@pytest.mark.parametrize("answer, expected", [
    ("B", "dsat"), ("B. Dissatisfied", "dsat"), ("Answer: a", "sat"), ("(C)", "none"), ("  c) neither", "none"),
    ("Dissatisfied: the user complains", "dsat"), ("The user is satisfied.", "sat"), ('{"reaction": "x"}', None),
    ("", None), ("Because the AI", None),
])
def test_split_reaction_parser(answer: str, expected: str | None) -> None:
    assert parse_reaction(answer) == expected


def test_split_label_parser() -> None:
    assert set(SAT_GLOSSES) | {"N/A"} == set(SAT_LABELS) and set(DSAT_GLOSSES) | {"N/A"} == set(DSAT_LABELS)
    assert parse_label("Factual Error", "dsat") == "Factual_Error"
    assert parse_label("The best label is getting_there.", "sat") == "Getting_There"
    assert parse_label("Style, then Revision", "dsat") == "Style"
    assert parse_label("Gratitude", "dsat") is None and parse_label("N/A", "sat") is None


def test_split_labelling_retries_then_names_the_turn(tmp_path: Path) -> None:
    def answer(prompt: str, before: int) -> str:
        if "Label the user's message" in prompt:
            return "Factual Error" if "Factual_Error: says" in prompt else "the label is Praise"
        if "that's wrong" in prompt:
            return "B. Dissatisfied"
        return '{"T-3": "sat"}' if before == 0 else "A"  # the first answer is unusable: retried

    backend = Scripted(answer)
    [outcome] = identify_split([CONV], backend, progress=False)
    result = outcome.result
    assert result is not None and result.labeller.startswith("scripted:scripted-model (split prompts")
    assert [t.dissatisfaction for t in result.turns] == [["N/A"], ["Factual_Error"], ["N/A"]]
    assert [t.satisfaction for t in result.turns] == [["N/A"], ["N/A"], ["Praise"]]
    assert [t.state for t in result.turns] == ["NEWTOPIC", "FEEDBACK", "FEEDBACK"]
    assert sum(backend.asked.values()) == 5  # 2 reactions + 1 retry + 2 labels; T-1 is never asked
    assert default_prompt_style(backend) == "full"  # an unknown endpoint-like model gets the paper's prompt
    backend.kind = "local"
    assert default_prompt_style(CachedBackend(backend, tmp_path)) == "split"  # local models, through a cache too
    broken = Scripted(lambda prompt, _: "I think so" if "that's wrong" in prompt
                      else "Praise" if "Label the user" in prompt else "A")
    with pytest.raises(IdentificationError, match=r"T-2 reaction: no valid answer after 6 attempts"):
        identify(CONV, broken, prompt_style="split", max_attempts=2)  # bounded: at least MIN_ATTEMPTS calls
    assert sum(broken.asked.values()) == 6 + 1 + 1  # six for T-2, T-3's reaction and its label once each


def test_split_labelling_on_a_local_model_answers_by_likelihood(tmp_path: Path) -> None:
    from convohub.llm import TransformersBackend
    from convohub.llm.choices import ChoiceBackend, choice_logprobs
    from convohub.tiny import tiny_model
    from convohub.wildfeedback.turn_prompts import (
        DSAT_GLOSSES,
        SAT_GLOSSES,
        label_messages,
        reaction_messages,
    )

    local = TransformersBackend(tiny_model("causal"), device="cpu", batch_size=4)
    calls: list[int] = []
    generate = local.chat
    local.chat = lambda requests: calls.append(len(requests)) or generate(requests)  # type: ignore[method-assign]
    [outcome] = identify_split([CONV], CachedBackend(local, tmp_path), progress=False)
    assert calls == []  # nothing was generated: every question was read off the option likelihoods
    result = outcome.result
    assert result is not None and outcome.errors == []
    assert result.labeller.endswith("(split prompts, closed answers by likelihood; other fields rules:lexicon-v2)")
    # each turn's label is the most likely of the closed list for the turn's most likely reaction
    user_turns = [t for t in CONV if t["role"] == "user"]
    for k in (1, 2):
        ai = CONV[CONV.index(user_turns[k]) - 1]["content"]
        [reaction] = ChoiceBackend(local, ["A", "B", "C"]).chat([ChatRequest(messages=reaction_messages(
            ai, user_turns[k]["content"]), max_new_tokens=6)])
        polarity = {"A": "sat", "B": "dsat", "C": None}[reaction.text[0]]
        turn = result.turns[k]
        if polarity is None:
            assert turn.satisfaction == ["N/A"] and turn.dissatisfaction == ["N/A"]
            continue
        options = list(SAT_GLOSSES if polarity == "sat" else DSAT_GLOSSES)
        [label] = ChoiceBackend(local, options).chat([ChatRequest(messages=label_messages(
            ai, user_turns[k]["content"], polarity), max_new_tokens=6)])
        scores = choice_logprobs(label.text)
        assert (turn.satisfaction if polarity == "sat" else turn.dissatisfaction) == [max(scores, key=scores.get)]


def test_label_cli_with_rules_names_the_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.cli import main

    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(CONV), encoding="utf-8")
    assert main(["wildfeedback", "label", str(conv), "--llm", "rules"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["labeller"] == "rules:lexicon-v2" and out["dsat"] and out["preference_summariser"].startswith("rules:")


def test_label_cli_without_an_llm_uses_the_measured_offline_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """No endpoint configured: the CLI measures the rules and the local model on the hand-labelled sets and
    labels (and summarises) with whichever agreed better, and its output says which and how well. The local
    model is replaced by one that answers "C" (neither) to everything, which agrees worse than the rules."""
    from _replies import Replies

    import convohub.llm
    from convohub.cli import main
    from convohub.wildfeedback import system

    monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
    monkeypatch.setattr(system, "_label_cache", lambda: tmp_path / "agreement")
    local = Replies(lambda _: "C", model="answers-c")
    monkeypatch.setattr(convohub.llm, "make_backend", lambda spec, **_: local)
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(CONV), encoding="utf-8")
    assert main(["wildfeedback", "label", str(conv)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert local.calls > 0  # the local model was measured
    assert out["labeller"] == "rules:lexicon-v2" == out["labeller_choice"]["chosen"]
    assert set(out["labeller_choice"]["agreement"]) == {"rules:lexicon-v2", "scripted:answers-c (split prompts; other fields rules:lexicon-v2)"}
    assert out["preference_summariser"] == "rules:preference-templates-v1" == out["summariser_choice"]["chosen"]
    assert out["summariser_choice"]["agreement"]["rules:preference-templates-v1"]["query_accuracy"] > 0.9
    assert out["dsat"] and out["preferences"]


@pytest.mark.slow
def test_smollm2_labels_through_split_prompts() -> None:
    from convohub.llm import make_backend
    from convohub.models import SMOLLM2_ID

    result = identify(CONV[:4], make_backend("smollm2"))
    assert SMOLLM2_ID in result.labeller and "split prompts" in result.labeller
    assert len(result.turns) == 2 and result.turns[0].satisfaction == ["N/A"]


def test_reference_kind_recovers_generator_markers() -> None:
    assert reference_kind("Thanks, that works perfectly!") == "praise"
    assert reference_kind("No, that's wrong, the capital of Canada is Ottawa, not Toronto.") == "correction"
    assert reference_kind("Make it shorter.") == "refinement"
    assert reference_kind("How do I store the leftovers?") is None


def test_streaming_reader(tmp_path: Path) -> None:
    rows = [{"i": i, "text": "x" * (i * 7) + "\"},[" } for i in range(40)]
    array = tmp_path / "a.json"
    array.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    assert list(iter_json_records(array, chunk_chars=16)) == rows
    lines = tmp_path / "b.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert list(iter_json_records(lines, chunk_chars=5)) == rows
    broken = tmp_path / "c.json"
    broken.write_text(json.dumps(rows)[:-30], encoding="utf-8")
    with pytest.raises(SourceFormatError, match="c.json"):
        list(iter_json_records(broken, chunk_chars=64))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hub")
    work = root / "work"
    folder = build_from_pipeline(HubTarget(root=root, namespace="t"), repo_root(), work,
                                 settings=Settings(test_clusters=4, test_per_cluster=3), n_users=60,
                                 gold_comparison=compare_on_gold(None, log=lambda _: None),
                                 summary_comparison=offline_summariser(None, root / "agreement", log=lambda _: None,
                                                                       prompt_styles=())[1])
    return folder, work


def test_pipeline_build_loads_and_keeps_users_apart(built: tuple[Path, Path]) -> None:
    folder, _ = built
    train = datasets.load_dataset(str(folder.resolve()), "wildfeedback", split="train")
    test = datasets.load_dataset(str(folder.resolve()), "test", split="test")
    assert tuple(train.column_names) == PAIR_COLUMNS and tuple(test.column_names) == PAIR_COLUMNS
    assert len(train) > 100 and len(test) >= 3
    assert not {r["user_id"] for r in train} & {r["user_id"] for r in test}
    assert all(is_test_user(u) for u in test["user_id"]) and not any(is_test_user(u) for u in train["user_id"])
    for row in list(train)[:200]:
        assert row["prompt"][-1]["role"] == "user" and row["chosen"].strip() != row["rejected"].strip()
        assert row["preferences"] and row["dsat_labels"] and row["variant"] == "expert"
    ann = datasets.load_dataset(str(folder.resolve()), "sat_dsat_annotation", split="train")
    assert set(ann["role"]) == {"user", "assistant"} and any(ann["dsat"]) and any(ann["sat"])
    prefs = datasets.load_dataset(str(folder.resolve()), "user_preference", split="train")
    assert len(prefs) >= len(train) and all(p for p in prefs["preferences"])
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "odc-by" not in card.split("---")[1] and "# DSAT Conv." in card and "revised answer" in card
    assert "on-policy variant was not built" in card
    assert "written and labelled by hand" in card and "| `rules:lexicon-v2` (chosen) | DSAT |" in card
    assert "## Preference summary quality\n\nPreference summaries were written by `rules:preference-templates-v1`, " \
           "chosen on 72 hand-written conversations" in card
    assert "| `rules:preference-templates-v1` (chosen) | 0.9" in card
    assert "@example.com" not in json.dumps(list(ann["content"]))  # PII scrubbed


def test_pipeline_resumes_from_stage_files(built: tuple[Path, Path]) -> None:
    _, work = built
    stamps = {p.name: p.stat().st_mtime_ns for p in work.glob("*.json")}
    assert set(stamps) == {"labels.json", "summaries.json", "pairs.json"}
    convs = sample_conversations(60, 0)
    result = run_pipeline(convs, work, settings=Settings(test_clusters=4, test_per_cluster=3), log=lambda _: None)
    assert {p.name: p.stat().st_mtime_ns for p in work.glob("*.json")} == stamps
    assert result.counts["expert"]["pairs"] == result.counts["episodes"] - sum(
        v for k, v in result.counts["expert"].items() if k.startswith("dropped"))


def test_build_from_released_sample(tmp_path: Path) -> None:
    folder = build_from_source(HubTarget(root=tmp_path, namespace="t"), repo_root(),
                               repo_root() / "dataset_scripts" / "wildfeedback" / "sample")
    pairs = datasets.load_dataset(str(folder.resolve()), "wildfeedback", split="train")
    ann = datasets.load_dataset(str(folder.resolve()), "sat_dsat_annotation", split="train")
    prefs = datasets.load_dataset(str(folder.resolve()), "user_preference", split="train")
    assert len(pairs) == 12 and len(prefs) == 12 and len(ann) > 20
    assert set(pairs["variant"]) == {"expert"} and all(p[-1]["role"] == "user" for p in pairs["prompt"])
    assert len(set(ann["conversation_id"])) > 1 and set(ann["role"]) == {"user", "assistant"}
    assert "odc-by" in (folder / "README.md").read_text(encoding="utf-8")


def test_build_from_partial_source(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    sample = repo_root() / "dataset_scripts" / "wildfeedback" / "sample" / "user_preference.json"
    (src / "user_preference.json").write_text(sample.read_text(encoding="utf-8"), encoding="utf-8")
    folder = build_from_source(HubTarget(root=tmp_path / "hub", namespace="t"), repo_root(), src)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "config_name: user_preference" in readme and "config_name: wildfeedback" not in readme


def test_on_policy_sample_takes_training_users_only_and_is_stable() -> None:
    from convohub.wildfeedback.pipeline import on_policy_sample
    from convohub.wildfeedback.split import is_test_user

    users = [f"user-{i}" for i in range(40)]
    skeletons = [{"id": f"s{i}", "user_id": users[i % 40]} for i in range(120)]
    train = [s for s in skeletons if not is_test_user(s["user_id"])]
    assert 0 < len(train) < len(skeletons)
    assert on_policy_sample(skeletons, None, 0) == train
    small, larger = on_policy_sample(skeletons, 10, 0), on_policy_sample(skeletons, 20, 0)
    assert len(small) == 10 and len(larger) == 20 and all(s in train for s in larger)
    assert {s["id"] for s in small} <= {s["id"] for s in larger}  # growing the cap keeps the earlier sample
    assert on_policy_sample(skeletons, 10, 0) == small and on_policy_sample(skeletons, 10, 1) != small
    with pytest.raises(ValueError, match="on_policy_max_episodes"):
        on_policy_sample(skeletons, -1, 0)


@pytest.mark.parametrize("sizes", [(3, 12), (6, 6)], ids=["other-row-count", "same-row-count"])
def test_two_builds_in_two_folders_each_load_their_own_rows(tmp_path: Path, sizes: tuple[int, int]) -> None:
    """Issue 16's recipe: two WildFeedback builds with different rows into two different folders, both
    loaded with plain ``datasets.load_dataset`` through one cache; each must give its own rows (datasets keys
    a local folder's cache on the folder name and the card's metadata, not on the Parquet content)."""
    sample = json.loads((repo_root() / "dataset_scripts" / "wildfeedback" / "sample" / "wildfeedback.json")
                        .read_text(encoding="utf-8"))
    cache = tmp_path / "hf-cache"
    for build, (start, n) in enumerate(zip((0, sizes[0]), sizes, strict=True)):
        src = tmp_path / f"src{build}"
        src.mkdir()
        rows = sample[start:start + n] if start + n <= len(sample) else sample[-n:]
        (src / "wildfeedback.json").write_text(json.dumps(rows), encoding="utf-8")
        folder = build_from_source(HubTarget(root=tmp_path / f"hub{build}", namespace="t"), repo_root(), src)
        loaded = datasets.load_dataset(str(folder), "wildfeedback", split="train", cache_dir=str(cache))
        assert loaded.num_rows == n
        assert [p[-1]["content"] for p in loaded["prompt"]] == [r["conversations"][-1]["value"] for r in rows]
