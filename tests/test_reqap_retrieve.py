"""RETRIEVE cross-encoders of ReQAP: training-data derivation, the pattern/event pipeline on a hand-made
store, and a tiny end-to-end training whose saved models load with CrossEncoder and whose card carries the
numbers the evaluation measured."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from convohub.hub import HubTarget, read_card
from convohub.perqa import PerQAConfig, build_perqa, generate_perqa
from convohub.reqap import EventStore, Executor
from convohub.reqap.components.retrieve import (
    EVENT_LABELS,
    PATTERN_LABELS,
    CrossEncoderRetriever,
    Pattern,
    PatternIndex,
    event_text,
    pattern_value,
)
from convohub.reqap.data.gold import OracleIndex, gold_tree
from convohub.reqap.data.retrieve import (
    PARTIAL,
    RetrieveDataConfig,
    _Collector,
    derive,
    derive_from_dataset,
    derive_from_perqa,
    retrieve_queries,
    to_rows,
)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = RetrieveDataConfig(pattern_threshold=20)


@pytest.fixture(scope="module")
def data():
    return generate_perqa(PerQAConfig(n_personas=4, start_date=date(2024, 6, 1)))


@pytest.fixture(scope="module")
def train_data(data):
    return derive_from_perqa(data, "train", CONFIG)


@pytest.fixture(scope="module")
def dataset_dir(data, tmp_path_factory):
    return build_perqa(HubTarget(tmp_path_factory.mktemp("hub")), ROOT, data=data)


def test_pattern_values_are_non_numeric() -> None:
    assert pattern_value("running") == "running"
    assert pattern_value(["Karl Haas"]) == '["Karl Haas"]'
    for value in ("42", "5.99 EUR", "2024-01-01", "12:30:00", "2019-01-01 15:35:00", "", None, 3, "x" * 200):
        assert pattern_value(value) is None, value
    assert Pattern("mail").text == "source: mail"
    assert Pattern("calendar", "summary", "Team meeting").text == "source: calendar, summary: Team meeting"


def test_calls_are_derived_and_capped(data) -> None:
    """One persona: every kind of example at most 5 per call, positives gold, negatives not."""
    p = data.split("train")[0]
    one = derive([(p.persona_id, p.observable, p.canonical, p.questions)], CONFIG)
    assert one.stats["calls_used"] > 0 and one.events and one.patterns
    per_call = Counter((e.query, e.kind) for e in one.events)
    assert max(per_call.values()) <= 5
    assert {k for _, k in per_call} == {"positive", "hard_negative", "random_negative"}
    store = EventStore.from_records(p.observable)
    oracle = OracleIndex(p.observable, p.canonical)
    for e in one.events:
        gold_texts = {event_text(store.by_id[i]) for i in oracle.ids(e.query)}
        assert (e.text in gold_texts) == (e.label == 1) == (e.kind == "positive"), e
    kinds = Counter((e.query, e.kind) for e in one.patterns)
    assert all(n <= 5 for (_, k), n in kinds.items() if k in ("positive", "negative"))
    # every used call has one source pattern per source of its candidates (at least one)
    assert {e.query for e in one.patterns if e.kind == "source"} == {e.query for e in one.events}
    assert all(e.text.startswith("source: ") for e in one.patterns)


def test_labels_splits_dedup_and_determinism(data, train_data) -> None:
    assert {e.label for e in train_data.events} == set(EVENT_LABELS)
    assert {e.label for e in train_data.patterns} <= set(PATTERN_LABELS)
    assert {e.label for e in train_data.patterns if e.kind == "source"} >= {0, 2}
    train_ids = {p.persona_id for p in data.split("train")}
    assert all(set(e.personas) <= train_ids for e in train_data.events + train_data.patterns)
    for examples in (train_data.events, train_data.patterns):
        keys = [(e.query, e.text) for e in examples]
        assert len(keys) == len(set(keys))
    again = derive_from_perqa(data, "train", CONFIG)
    assert again.events == train_data.events and again.patterns == train_data.patterns
    other = derive_from_perqa(data, "train", RetrieveDataConfig(pattern_threshold=20, seed=1))
    assert other.events != train_data.events
    random_sources = {e.text.split("\n", 1)[0] for e in train_data.events
                      if e.kind == "random_negative"}
    assert len(random_sources) >= 3  # inverse source frequency: not only the dominant music streams
    rows = to_rows(train_data.patterns)
    assert list(rows) == ["query", "text", "label"] and len(rows["label"]) == len(train_data.patterns)
    test = derive_from_perqa(data, "test", CONFIG)
    assert all(e.personas[0].startswith("test_") for e in test.events)


def test_conflicting_labels() -> None:
    c = _Collector()
    c.add("q", "source: mail", 1, "source", "a")
    c.add("q", "source: mail", 0, "source", "b")
    c.add("q", "source: calendar", 0, "source", "a")
    patterns, n = c.examples(on_conflict=PARTIAL)
    assert n == 1 and [(e.text, e.label, e.personas) for e in patterns] == [
        ("source: mail", PARTIAL, ("a", "b")), ("source: calendar", 0, ("a",))]
    events, _ = c.examples(on_conflict=None)
    assert [e.text for e in events] == ["source: calendar"]


def test_dataset_folder_matches_memory(data, dataset_dir) -> None:
    from_folder = derive_from_dataset(dataset_dir, "dev", CONFIG)
    assert from_folder.events == derive_from_perqa(data, "dev", CONFIG).events


# -- the pipeline on a hand-made store ----------------------------------------------------------------------
def _event(i: int, source: str, day: int, **data: str) -> dict:
    return {"id": str(i), "start_date": f"2024-03-{day:02d}", "start_time": "10:00:00", "event_type": source,
            "event_data": data}


STORE_EVENTS = [
    *[_event(i, "workout", i, workout_type="running", event="recorded a workout") for i in range(1, 5)],
    *[_event(i, "workout", i, workout_type="gym", event="recorded a workout") for i in range(5, 8)],
    *[_event(i, "music_stream", i, song_name="Run Run", event="played a song") for i in range(8, 12)],
    _event(12, "calendar", 20, summary="Running with Anna"),
    _event(13, "calendar", 21, summary="Dentist"),
    _event(14, "calendar", 22, summary="Running club"),
]


class FixedFirstStage:
    """A first stage returning fixed candidates (so a pattern can reach events it missed)."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def scores(self, query: str, store: EventStore) -> list[tuple[str, float]]:
        return [(i, 1.0) for i in self.ids]


class RuleClassifier:
    """A transparent PairClassifier: the first rule whose needle is in the text gives the label."""

    def __init__(self, rules: list[tuple[str, str]], default: str) -> None:
        self.rules, self.default, self.calls = rules, default, []

    def classify(self, pairs):
        self.calls.append(list(pairs))
        return [next((lab for needle, lab in self.rules if needle in text), self.default) for _, text in pairs]


def test_pipeline_patterns_and_events() -> None:
    store = EventStore.from_records(STORE_EVENTS)
    # workout 4 is not a candidate; the music streams are
    first = FixedFirstStage(["1", "2", "3", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14"])
    patterns = RuleClassifier([("workout_type: running", "relevant"), ("source: music_stream", "irrelevant"),
                               ("workout_type: gym", "irrelevant")], "partial")
    events = RuleClassifier([("Running", "relevant")], "irrelevant")
    retriever = CrossEncoderRetriever(events, patterns, first_stage=first, pattern_threshold=3)
    got = retriever.retrieve("I went running", store)
    assert got == ["1", "2", "3", "4", "12", "14"]  # 4 kept by its pattern, music dropped, gym dropped
    trace = retriever.traces["I went running"]
    assert ("source: workout, workout_type: running", "relevant") in trace.patterns
    assert trace.dropped_sources == ["music_stream"] and trace.classified == 3  # calendar 12, 13, 14
    assert [t for _, t in events.calls[0]] == [event_text(store.by_id[i]) for i in ("12", "13", "14")]
    # cached per (store, query): no new classification
    assert retriever.retrieve("I went running", store) == got and len(events.calls) == 1
    other = EventStore.from_records(STORE_EVENTS)
    retriever.retrieve("I went running", other)
    assert len(events.calls) == 2
    # without models the pipeline returns the first stage's candidates (all patterns partial)
    plain = CrossEncoderRetriever(first_stage=first, pattern_threshold=3)
    assert plain.retrieve("I went running", store) == sorted(first.ids, key=int)


def test_pattern_index_matches_patterns() -> None:
    store = EventStore.from_records(STORE_EVENTS)
    index = PatternIndex(store)
    p = Pattern("workout", "workout_type", "running")
    assert index.ids(p) == ["1", "2", "3", "4"] and all(p.matches(store.by_id[i]) for i in index.ids(p))
    assert index.ids(Pattern("calendar")) == ["12", "13", "14"]
    found = index.detect(["1", "2", "8", "9", "12"], threshold=2)
    assert found == [Pattern("music_stream", "event", "played a song"), Pattern("music_stream", "song_name", "Run Run"),
                     Pattern("workout", "event", "recorded a workout"), Pattern("workout", "workout_type", "running"),
                     Pattern("workout"), Pattern("music_stream"), Pattern("calendar")]


def test_executor_uses_the_pipeline() -> None:
    store = EventStore.from_records(STORE_EVENTS)
    retriever = CrossEncoderRetriever(RuleClassifier([("Running", "relevant")], "irrelevant"),
                                      RuleClassifier([("source: workout", "irrelevant")], "partial"),
                                      first_stage=FixedFirstStage(["1", "12", "13", "14"]), pattern_threshold=50)
    res = Executor(store, retriever).execute('APPLY(l=RETRIEVE(query="I went running"), fct=len)')
    assert res.error is None and res.answer == 2


class SlowRules(RuleClassifier):
    """A RuleClassifier whose every call takes ``seconds`` (a cross-encoder batch on a slow CPU)."""

    def __init__(self, seconds: float, *args) -> None:
        super().__init__(*args)
        self.seconds = seconds

    def classify(self, pairs):
        import time

        time.sleep(self.seconds)
        return super().classify(pairs)


def test_the_event_cross_encoder_starts_no_batch_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """RETRIEVE hands the question's time check to the pipeline: between chunks of the event step, a chunk
    that the chunks before it say would end past the budget is not started (0.2 s a chunk, 0.3 s budget)."""
    from convohub.reqap.components import retrieve as module

    monkeypatch.setattr(module, "CLASSIFY_CHUNK", 2)
    store = EventStore.from_records(STORE_EVENTS)
    events = SlowRules(0.2, [("Running", "relevant")], "irrelevant")
    retriever = CrossEncoderRetriever(events, first_stage=FixedFirstStage(["1", "2", "3", "12", "13"]),
                                      pattern_threshold=50)
    res = Executor(store, retriever, time_budget=0.3).execute('APPLY(l=RETRIEVE(query="I went running"), fct=len)')
    assert res.answer is None and res.error.startswith("TimeoutError: time budget of 0.3 s exceeded")
    assert "the event cross-encoder of RETRIEVE 'I went running' on 2 more of 5 events would take about" in res.error
    assert len(events.calls) == 1 and retriever.paces["event"].units == 2  # stopped before the second chunk
    assert "I went running" not in retriever._cache.get(store, {})  # nothing half-classified is cached

    # the next question's first chunk is estimated at the pace of the earlier ones (0.1 s a pair here)
    retriever.paces["event"] = module.Pace(seconds=0.4, units=2)
    res = Executor(store, retriever, time_budget=0.3).execute('APPLY(l=RETRIEVE(query="a run"), fct=len)')
    assert "on 2 of 5 events would take about 0.4 s" in res.error and len(events.calls) == 1
    # without a time check every chunk runs (three chunks of at most 2 pairs), with the labels of one call
    assert retriever.retrieve("I went running", store) == \
        CrossEncoderRetriever(RuleClassifier([("Running", "relevant")], "irrelevant"),
                              first_stage=FixedFirstStage(["1", "2", "3", "12", "13"]),
                              pattern_threshold=50).retrieve("I went running", store)
    assert [len(c) for c in events.calls[1:]] == [2, 2, 1]


def test_retrieve_queries_of_gold_trees(data) -> None:
    q = next(q for p in data.split("train") for q in p.questions if gold_tree(q) and "JOIN" in gold_tree(q))
    assert len(retrieve_queries(gold_tree(q))) >= 2


# -- tiny training end to end, evaluation, card ----------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(dataset_dir, tmp_path_factory):
    """Both models trained with their tiny recipes, launched like the release launches them, with CLI
    overrides (pattern threshold lowered for this 6-month PerQA) that evaluation must see."""
    from convohub.reqap.release import retrieve as release

    tmp = tmp_path_factory.mktemp("retrieve")
    out = {}
    for task, extra in (("patterns", ()), ("events", ("--max_length", "64"))):
        overrides = ("--pattern_threshold", "20", "--max_train_examples", "48", "--max_eval_examples", "32", *extra)
        model_dir = release.SPECS[task].train(ROOT, "tiny", dataset_dir, tmp / task, 0, extra=overrides)
        out[task] = (model_dir, json.loads((model_dir / "eval_results.json").read_text()))
    return out


def test_trained_models_load_with_their_labels(trained) -> None:
    from sentence_transformers.cross_encoder import CrossEncoder
    from transformers import AutoModelForSequenceClassification

    from convohub.training.runs import saved_arguments

    for task, labels in (("events", EVENT_LABELS), ("patterns", PATTERN_LABELS)):
        model_dir, results = trained[task]
        model = CrossEncoder(str(model_dir))
        assert model.num_labels == len(labels) and dict(model.config.id2label) == labels
        hf = AutoModelForSequenceClassification.from_pretrained(model_dir)
        assert hf.config.label2id == {v: k for k, v in labels.items()}
        assert model.predict([("I did a workout", "source: workout")]).shape == (1, len(labels))
        assert results["accuracy_before"] == results["before"]["accuracy"] and results["train_examples"] == 48
        assert 0.0 <= results["accuracy_after"] <= 1.0 and results["after"]["examples"] > 0
        assert results["task"] == task and results["data_train"]["calls_used"] > 0
        saved = saved_arguments(model_dir)  # launched under accelerate; the run's resolved arguments
        assert saved["script"]["pattern_threshold"] == 20 and saved["training"]["output_dir"] == str(model_dir)
    assert trained["events"][1]["max_length"] == 64


def test_evaluate_and_card(trained, dataset_dir, tmp_path) -> None:
    from convohub.reqap.release import retrieve as release

    events_dir, _ = trained["events"]
    results = release.evaluate(events_dir, dataset_dir, "test", task="events",
                                      pattern_model_dir=trained["patterns"][0], max_examples=24, max_calls=3,
                                      max_classified=8)
    json.dumps(results)  # the release writes it as JSON
    r = results["retrieval"]
    assert results["split"] == "test" and results["examples"] == 24 and r["calls"] >= 1
    assert 0.0 <= r["pipeline_recall"] <= 1.0 and r["bm25_recall"] > 0.5 and r["classified_events"] <= 8 * 3
    card_dir = release.EVENTS.publish(HubTarget(tmp_path / "hub"), ROOT, "tiny", events_dir, results)
    meta, body = read_card(card_dir / "README.md")
    assert meta["license"] == "mit" and meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert meta["library_name"] == "sentence-transformers" and "events" in meta["tags"]
    metrics = {m["name"]: m["value"] for e in meta["model-index"][0]["results"] for m in e["metrics"]}
    assert metrics["Accuracy (events)"] == results["accuracy"]
    assert metrics["Macro-F1 (events)"] == results["f1_macro"]
    assert metrics["RETRIEVE recall vs oracle (pipeline)"] == r["pipeline_recall"]
    assert metrics["RETRIEVE recall vs oracle (BM25 alone)"] == r["bm25_recall"]
    assert "christmann2025reqap" in body and "CC BY 4.0" in body
    assert str(results["training"]["accuracy_after"]) in body
    from sentence_transformers.cross_encoder import CrossEncoder

    assert dict(CrossEncoder(str(card_dir)).config.id2label) == EVENT_LABELS
    patterns = release.evaluate(trained["patterns"][0], dataset_dir, "test", task="patterns",
                                       max_examples=20)
    assert "retrieval" not in patterns and patterns["labels"] == PATTERN_LABELS


def test_retriever_from_pretrained(trained, tmp_path) -> None:
    import shutil

    both = tmp_path / "retriever"
    for task in ("events", "patterns"):
        shutil.copytree(trained[task][0], both / task)
    r = CrossEncoderRetriever.from_pretrained(both, pattern_threshold=20)
    assert r.events is not None and r.patterns is not None and r.pattern_threshold == 20
    assert set(r.patterns.labels.values()) == set(PATTERN_LABELS.values())
    only_patterns = CrossEncoderRetriever.from_pretrained(trained["patterns"][0])
    assert only_patterns.events is None and only_patterns.patterns is not None
    store = EventStore.from_records(STORE_EVENTS)
    assert set(r.retrieve("I went running", store)) <= set(store.by_id)
    with pytest.raises(FileNotFoundError, match="events/ or patterns/"):
        CrossEncoderRetriever.from_pretrained(tmp_path)
