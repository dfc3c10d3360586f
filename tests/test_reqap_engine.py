"""ReQAP operator engine: parser round trips, every operator, JOIN strategies, caching, budget, CLI."""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from datetime import date, datetime
from datetime import time as dtime
from typing import Any

import pytest

from convohub.reqap import (
    BM25Retriever,
    DirectExtractor,
    EventStore,
    Executor,
    FrozenMappingExtractor,
    OracleRetriever,
    TreeSyntaxError,
    assemble,
    convert,
    parse_tree,
    placeholders,
    substitute,
)
from convohub.reqap.cli import add_cli
from convohub.reqap.engine.interpreter import Evaluator
from convohub.reqap.engine.join import analyse_condition, join, safe_test

# -- fixture: ~30 hand-made observable events -------------------------------------------------------


def _ev(i: str, etype: str, sd: str | None, st: str | None, ed: str | None, et: str | None, **data: Any) -> dict:
    return {"id": i, "structured_event_id": f"s{i}", "start_date": sd, "start_time": st, "end_date": ed,
            "end_time": et, "event_type": etype, "event_data": json.dumps(data), "properties_mentioned": "[]"}


def _music(i: str, d: str, t: str, t2: str, song: str, artists: list[str]) -> dict:
    return _ev(i, "music_stream", d, t, d, t2, event="listened", duration="240", duration_unit="seconds",
               song_name=song, song_artist=artists)


RECORDS = [
    _ev("w1", "workout", "2024-11-20", "07:00:00", "2024-11-20", "07:42:00", event="workout", workout_type="running",
        duration="42", duration_unit="min", distance="7.5", distance_unit="km"),
    _ev("w2", "workout", "2024-11-22", "18:00:00", "2024-11-22", "18:30:00", event="workout", workout_type="running",
        duration="30", duration_unit="min"),
    _ev("w3", "workout", "2024-10-05", "10:00:00", "2024-10-05", "11:30:00", event="workout", workout_type="soccer",
        duration="90", duration_unit="min"),
    _ev("w4", "workout", "2024-11-24", "07:00:00", "2024-11-24", "07:50:00", event="workout", workout_type="running",
        duration="50 min", duration_unit="min"),
    _ev("c1", "calendar", "2024-11-20", "07:00:00", "2024-11-20", "07:45:00", summary="Morning run with Tom",
        location="City park", description="running"),
    _ev("s1", "social_media", "2024-11-22", None, None, None, text="Great run tonight! #running"),
    _music("m1", "2024-11-20", "07:05:00", "07:09:00", "One More Time", ["Daft Punk"]),
    _music("m2", "2024-11-20", "07:10:00", "07:14:00", "Get Lucky", ["Daft Punk", "Pharrell Williams"]),
    _music("m3", "2024-11-21", "12:00:00", "12:04:00", "Hello", ["Adele"]),
    _music("m4", "2024-11-22", "18:05:00", "18:09:00", "Skyfall", ["Adele"]),
    _music("m5", "2024-11-23", "09:00:00", "09:04:00", "Around the World", ["Daft Punk"]),
    _ev("p1", "online_purchase", "2022-03-05", "10:00:00", "2022-03-05", "10:00:00", event="purchase",
        order="1 x Cosmic Funk", product_quantity="1", product="Cosmic Funk", price="5.99 EUR"),
    _ev("p2", "online_purchase", "2022-03-20", "11:00:00", "2022-03-20", "11:00:00", event="purchase",
        order="2 x Socks", product_quantity="2", product="Socks", price="12.50 EUR"),
    _ev("p3", "online_purchase", "2022-04-01", "09:00:00", "2022-04-01", "09:00:00", event="purchase",
        order="1 x Pen", product_quantity="1", product="Pen", price="3.00 EUR"),
    _ev("p4", "online_purchase", "2024-10-01", "15:00:00", "2024-10-01", "15:00:00", event="purchase",
        order="3 x Mugs", product_quantity="3", product="Mugs", price="20 EUR"),
    _ev("p5", "online_purchase", "2024-11-24", "16:00:00", "2024-11-24", "16:00:00", event="purchase",
        order="1 x Lamp", product_quantity="1", product="Lamp", price=""),
    _ev("c2", "calendar", "2024-11-10", "12:00:00", "2024-11-10", "13:00:00", summary="Lunch with Mum",
        location="The Parthenon", description="Greek food"),
    _ev("c3", "calendar", "2024-11-10", "12:30:00", "2024-11-10", "14:00:00", summary="Coffee with Dad",
        location="Cafe Central", description="catch up"),
    _ev("c4", "calendar", "2024-09-03", "09:00:00", "2024-09-03", "09:30:00", summary="Dentist appointment",
        location="Dr. Smile", description="check-up"),
    _ev("c5", "calendar", "2024-10-15", "16:00:00", "2024-10-15", "16:30:00", summary="GP appointment",
        location="Health centre", description="flu shot"),
    _ev("c6", "calendar", "2024-11-23", "18:00:00", "2024-11-23", "20:00:00", summary="Dinner with Mum and Dad",
        location="Home", description="family dinner"),
    _ev("e1", "mail", "2024-11-15", "08:00:00", None, None, subject="Your order has shipped", timestamp="",
        sender="shop@example.com", recipient="me@example.com", text="Your mugs are on their way."),
    _ev("mv1", "movie_stream", "2024-11-23", "20:00:00", "2024-11-23", "21:51:00", event="watched",
        duration="6660", duration_unit="seconds", movie_title="Beverly Hills Cop III"),
    _ev("x1", "social_media", "", None, None, None, text="An undated thought about running"),
    _ev("tv1", "tvseries_stream", "2024-11-21", "21:00:00", "2024-11-21", "21:24:00", event="watched",
        duration="1440", tvseries_title="Scrubs", season_name="Scrubs, season 1", episode_name="My Nickname",
        episode_number="10", tvseries_season="1"),
    _ev("tv2", "tvseries_stream", "2024-11-22", "21:00:00", "2024-11-22", "21:24:00", event="watched",
        duration="1440", tvseries_title="Scrubs", season_name="Scrubs, season 1", episode_name="My Bed Banter",
        episode_number="11", tvseries_season="1"),
]
RUNS = ["w1", "w2", "w3", "w4", "c1", "s1"]
SONGS = ["m1", "m2", "m3", "m4", "m5"]
PURCHASES = ["p1", "p2", "p3", "p4", "p5"]
ORACLE = {"workouts": RUNS, "songs": SONGS, "purchases": PURCHASES, "mum": ["c2", "c6"], "dad": ["c3", "c6"], "family": ["c3", "c2"],
          "doctor": ["c4", "c5"], "undated": ["x1", "e1"], "movies": ["mv1"], "all": [r["id"] for r in RECORDS]}


@pytest.fixture(scope="module")
def store() -> EventStore:
    return EventStore.from_records(RECORDS)


def run(store: EventStore, tree: str, **kw: Any) -> Any:
    res = Executor(store, OracleRetriever(ORACLE), **kw).execute(tree)
    assert res.error is None, res.error
    return res


# -- parser ----------------------------------------------------------------------------------------

PAPER_TREES = [
    'SUM(l=QUD("my online purchases in March 2022 with amounts"), attr_name="amount_spent")',
    'EXTRACT(l=QUD("my online purchases in March 2022"), attr_names=["amount_spent"], attr_types=[float])',
    'FILTER(l=QUD("my online purchases with date"), filter=lambda attr: attr["purchase_date"].year == 2022 '
    'and attr["purchase_date"].month == 3)',
    'FILTER(l=QUD("my football training sessions with datetime"), '
    'filter=lambda attr: attr["start_datetime"] >=QUD("first start datetime as Engineer").result)',
    'JOIN(l1=QUD("restaurants we visited with date"), l2=QUD("we were in Bali, Indonesia with start and end date"), '
    'condition="i1.visit_date >= i2.start_date and i1.visit_date <= i2.end_date")',
    'ARGMIN(l=QUD("my doctor\'s appointments with start time"), arg_attr_name="start_time", '
    'val_attr_name="appointment_details")',
    'FILTER(l=QUD("products bought online with purchase date"), '
    'filter=lambda attr: attr["purchase_date"] >= (date.today() - relativedelta(months=6)))',
    'MAP(l= {{ QU(question="my songs I listened to grouped by day") }} , fct=len, res_name="num_songs")',
    'GROUP_BY(l= QUD("instances I listened to music with date") , attr_names=["start_date"])',
    'EXTRACT(l= QUD("I listened to music") , attr_names=["start_date"], attr_types=[date.fromisoformat])',
    'UNNEST(l= QUD("songs with artist names") , nested_attr_name="artist_names", unnested_attr_name="artist")',
    'FILTER(l= QUD("I met with someone with participants") , '
    'filter=lambda attr: any("robert" in p.lower() for p in attr["participants"]))',
    'APPLY(l= QUD("I met with Robert in the park") , fct=len)',
    'SELECT(l={{ QU(question="x") }}, attr_names=["start_datetime", "end_datetime"], '
    'attr_types=[datetime.fromtimestamp, datetime.fromtimestamp])',
    'RETRIEVE(query="I listened to music")',
]


@pytest.mark.parametrize("tree", PAPER_TREES)
def test_parser_round_trip(tree: str) -> None:
    node = parse_tree(tree)
    again = parse_tree(node.text)
    assert again.text == node.text and again == node


def test_placeholders_and_assembly() -> None:
    steps = {
        "how many runs?": 'APPLY(l={{ QU(question="my runs") }}, fct=len)',
        "my runs": 'FILTER(l={{ QU(question="my workouts") }}, filter=lambda attr: attr["workout_type"] == "running")',
        "my workouts": 'RETRIEVE(query="workouts")',
    }
    step = parse_tree(steps["how many runs?"])
    assert placeholders(step) == ["my runs"]
    whole = assemble(steps["how many runs?"], steps)
    direct = parse_tree('APPLY(l=FILTER(l=RETRIEVE(query="workouts"), '
                        'filter=lambda attr: attr["workout_type"] == "running"), fct=len)')
    assert whole == direct and placeholders(whole) == []
    # placeholders nested in a lambda are substituted too
    nested = substitute('FILTER(l=QUD("a"), filter=lambda attr: attr["start_date"] >= QUD("b").result)',
                        {"a": 'RETRIEVE(query="workouts")', "b": 'MIN(l=RETRIEVE(query="songs"), attr_name="start_date")'})
    assert placeholders(nested) == [] and "MIN(l=RETRIEVE" in nested.text
    with pytest.raises(TreeSyntaxError, match="deeper"):
        assemble('APPLY(l=QU(question="loop"), fct=len)', {"loop": 'APPLY(l=QU(question="loop"), fct=len)'})


def test_unresolved_placeholder_is_an_error(store: EventStore) -> None:
    res = Executor(store, OracleRetriever(ORACLE)).execute('APPLY(l={{ QU(question="x") }}, fct=len)')
    assert res.answer is None and "unresolved placeholder" in res.error


# -- RETRIEVE, events, de-duplication -----------------------------------------------------------------

def test_retrieve_types_times_and_drops_undated(store: EventStore) -> None:
    res = run(store, 'RETRIEVE(query="undated")')
    events = res.raw
    assert [e["id"] for e in events] == ["e1"]  # x1 has no start date
    e = events[0]
    assert e["start_date"] == date(2024, 11, 15) and e["end_date"] == date(2024, 11, 15)
    assert e["start_time"] == dtime(8, 0) and e["end_time"] == dtime(8, 0)  # missing end copies start
    assert e["start_datetime"] == datetime(2024, 11, 15, 8, 0) and e["source"] == "mail"
    assert res.answer[0]["start_date"] == "2024-11-15"  # JSON answer uses ISO strings


def test_missing_times_span_the_day(store: EventStore) -> None:
    e = store.typed("s1")
    assert (e["start_time"], e["end_time"]) == (dtime(0, 0), dtime(23, 59))


def test_dedup_merges_overlapping_into_structured(store: EventStore) -> None:
    merged = run(store, 'RETRIEVE(query="workouts")').raw
    assert [e["id"] for e in merged] == ["w3", "w1", "w2", "w4"]
    w1 = merged[1]
    assert w1["merged_ids"] == ["w1", "c1"] and w1["summary"] == "Morning run with Tom"
    assert w1["end_time"] == dtime(7, 42)  # the structured event's times win
    assert merged[2]["merged_ids"] == ["w2", "s1"]
    raw = run(store, 'RETRIEVE(query="workouts")', dedup=False).raw
    assert len(raw) == 6
    # overlapping unstructured events merge among themselves (tightest span kept)
    family = run(store, 'RETRIEVE(query="family")').raw
    assert [(e["id"], e["merged_ids"]) for e in family] == [("c2", ["c2", "c3"])]  # tighter span is the base
    assert family[0]["summary"] == "Lunch with Mum"


def test_retrieve_with_input_list_restricts(store: EventStore) -> None:
    res = run(store, 'RETRIEVE(query="songs", l=RETRIEVE(query="all"))')
    assert {e["id"] for e in res.raw} == set(SONGS)


def test_bm25_finds_the_right_events(store: EventStore) -> None:
    bm25 = BM25Retriever()
    runs = bm25.retrieve("running workouts", store)
    assert {"w1", "w2", "w4"} <= set(runs[:6]) and "p1" not in runs
    purchases = bm25.retrieve("my online purchases", store)
    assert set(purchases[:5]) == set(PURCHASES)
    assert bm25.retrieve("Beverly Hills Cop", store)[0] == "mv1"
    assert bm25.retrieve("the a of", store) == []
    res = Executor(store).execute('APPLY(l=FILTER(l=RETRIEVE(query="running workouts"), '
                                  'filter=lambda attr: attr["workout_type"] == "running"), fct=len)')
    assert res.answer == 3


def test_event_store_from_dataset_folder(tmp_path: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "perqa" / "data" / "observable_events"
    folder.mkdir(parents=True)
    rows = [{**r, "persona_id": "test_persona_0"} for r in RECORDS] + [{**RECORDS[0], "persona_id": "test_persona_1"}]
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000-of-00001.parquet")
    s = EventStore.from_dataset_folder(tmp_path / "perqa", "test_persona_0")
    assert len(s) == len(RECORDS) and s.by_id["w1"]["workout_type"] == "running"
    with pytest.raises(KeyError):
        EventStore.from_dataset_folder(tmp_path / "perqa", "nobody")


# -- EXTRACT and conversions -----------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "type_name", "expected"), [
    ("5.99 EUR", "float", 5.99), ("42 min", "int", 42), ("1,299.50 EUR", "float", 1299.5), ("EUR 3", "int", 3),
    (7, "float", 7.0), ("null", "float", None), ("", "str", None), ("abc", "float", None),
    ("2024-11-20", "date.fromisoformat", date(2024, 11, 20)), ("2024-11-20T07:00:00", "date.fromisoformat",
                                                                date(2024, 11, 20)),
    ("07:05", "time.fromisoformat", dtime(7, 5)), (datetime(2024, 1, 1, 8), "time.fromisoformat", dtime(8)),
    (0, "datetime.fromtimestamp", datetime(1970, 1, 1)), ("2024-11-20 07:00:00", "datetime.fromtimestamp",
                                                        datetime(2024, 11, 20, 7)),
    (["a", "b"], "list", ["a", "b"]), ('["a", "b"]', "list", ["a", "b"]), ("Tom, Anna", "list", ["Tom", "Anna"]),
    (["a", "b"], "str", "a, b"), ("yes", "bool", True), (date(2024, 1, 2), "str", "2024-01-02"),
])
def test_convert(value: Any, type_name: str, expected: Any) -> None:
    assert convert(value, type_name) == expected


def test_extract_converts_and_drops_missing(store: EventStore) -> None:
    res = run(store, 'EXTRACT(l=RETRIEVE(query="purchases"), attr_names=["price", "product_quantity"], '
                     'attr_types=[float, int])')
    assert [(e["id"], e["price"], e["product_quantity"]) for e in res.raw] == [
        ("p1", 5.99, 1), ("p2", 12.5, 2), ("p3", 3.0, 1), ("p4", 20.0, 3)]  # p5 has no price
    # SELECT is EXTRACT; the paper's key names resolve through the alias table
    total = run(store, 'SUM(l=SELECT(l=RETRIEVE(query="purchases"), attr_names=["amount_spent"], '
                       'attr_types=[float]), attr_name="amount_spent")')
    assert total.answer == pytest.approx(41.49)
    assert DirectExtractor(aliases={}).extract([{"price": "1"}], "amount_spent") == [None]


def test_frozen_mapping_rule() -> None:
    calls = []

    def model(event: dict, key: str) -> Any:
        calls.append(event["id"])
        return event["price"] if int(event["id"]) % 10 else "nonsense"  # 90% agree with the "price" key

    events = [{"id": str(i), "source": "online_purchase", "price": f"{i}.00 EUR"} for i in range(1, 121)]
    fx = FrozenMappingExtractor(model)
    values = fx.extract(events, "amount")
    assert fx.frozen == {("online_purchase", "amount"): "price"} and fx.model_calls == 50
    assert values[60] == "61.00 EUR" and len(calls) == 50
    weak = FrozenMappingExtractor(lambda e, k: e["price"] if int(e["id"]) % 2 else None)
    weak.extract(events, "amount")
    assert weak.frozen == {} and weak.model_calls == 120


@pytest.mark.parametrize("batch_size", [1, 7, 32, 200])
def test_frozen_mapping_in_batches_asks_the_model_what_one_at_a_time_asks(batch_size: int) -> None:
    """Two sources interleaved: batches close at each source's window, so the same events reach the model."""
    rng = random.Random(batch_size)
    events = [{"id": str(i), "source": rng.choice(["a", "b"]), "price": f"{i} EUR", "name": f"n{i}"}
              for i in range(300)]

    def answer(e: dict) -> str:
        return e["price"] if e["source"] == "a" or int(e["id"]) % 3 else "other"

    one = FrozenMappingExtractor(lambda e, k: answer(e), window=20)
    asked: list[str] = []

    def many(batch: list, key: str) -> list:
        asked.extend(e["id"] for e in batch)
        return [answer(e) for e in batch]

    batched = FrozenMappingExtractor(extract_many=many, window=20, batch_size=batch_size)
    assert batched.extract(events, "amount") == one.extract(events, "amount")
    assert batched.frozen == one.frozen and one.frozen[("a", "amount")] == "price"
    assert batched.model_calls == one.model_calls == len(asked)


# -- FILTER, MAP, APPLY, GROUP_BY, UNNEST, aggregates ---------------------------------------------------

def test_paper_example_march_purchases(store: EventStore) -> None:
    tree = ('SUM(l=EXTRACT(l=FILTER(l=EXTRACT(l=RETRIEVE(query="purchases"), attr_names=["purchase_date"], '
            'attr_types=[date.fromisoformat]), filter=lambda attr: attr["purchase_date"].year == 2022 and '
            'attr["purchase_date"].month == 3), attr_names=["amount_spent"], attr_types=[float]), '
            'attr_name="amount_spent")')
    assert run(store, tree).answer == pytest.approx(18.49)


def test_filter_drops_raising_items_and_handles_empty(store: EventStore) -> None:
    res = run(store, 'FILTER(l=RETRIEVE(query="all"), filter=lambda attr: attr["workout_type"] == "running")')
    assert {e["id"] for e in res.raw} == {"w1", "w2", "w4"}  # events without the key raise -> dropped
    assert run(store, 'FILTER(l=RETRIEVE(query="nothing"), filter=lambda attr: True)').answer == []
    assert run(store, 'APPLY(l=RETRIEVE(query="nothing"), fct=len)').answer == 0


def test_reference_date_replaces_today(store: EventStore) -> None:
    tree = ('APPLY(l=FILTER(l=RETRIEVE(query="purchases"), filter=lambda attr: attr["start_date"] >= '
            '(date.today() - relativedelta(months=6))), fct=len)')
    assert run(store, tree).answer == 2  # p4, p5 within 6 months of 2024-11-25
    assert run(store, tree, reference_date=date(2022, 9, 1)).answer == 5
    now = run(store, 'APPLY(l=RETRIEVE(query="nothing"), fct=lambda l: datetime.now())')
    assert now.answer == "2024-11-25T00:00:00"


def test_groupby_map_argmax_with_unnest_and_ties(store: EventStore) -> None:
    tree = ('ARGMAX(l=MAP(l=GROUP_BY(l=UNNEST(l=EXTRACT(l=RETRIEVE(query="songs"), attr_names=["artist_names"], '
            'attr_types=[list]), nested_attr_name="artist_names", unnested_attr_name="artist"), '
            'attr_names=["artist"]), fct=len, res_name="count"), arg_attr_name="count", val_attr_name="artist")')
    assert run(store, tree).answer == ["Daft Punk"]
    by_day = ('ARGMAX(l=MAP(l=GROUP_BY(l=RETRIEVE(query="songs"), attr_names=["start_date"]), fct=len, '
              'res_name="n"), arg_attr_name="n", val_attr_name="start_date")')
    assert run(store, by_day).answer == ["2024-11-20"]  # keys are str()'d
    ties = ('ARGMIN(l=MAP(l=GROUP_BY(l=RETRIEVE(query="songs"), attr_names=["start_date"]), fct=len, '
            'res_name="n"), arg_attr_name="n", val_attr_name="start_date")')
    assert run(store, ties).answer == ["2024-11-21", "2024-11-22", "2024-11-23"]
    assert run(store, 'ARGMAX(l=RETRIEVE(query="nothing"), arg_attr_name="x")').answer == []
    groups = run(store, 'GROUP_BY(l=RETRIEVE(query="songs"), attr_names=["song_name", "missing"])')
    assert groups.answer == []  # events without a grouping key are left out


def test_map_values_and_lambda_on_groups(store: EventStore) -> None:
    res = run(store, 'MAP(l=RETRIEVE(query="workouts"), fct=lambda e: e["start_datetime"].weekday())')
    assert res.answer == [5, 2, 4, 6]
    res = run(store, 'MAP(l=GROUP_BY(l=RETRIEVE(query="songs"), attr_names=["start_date"]), '
                     'fct=lambda g: g["start_date"] + ":" + str(len(g)), res_name="label")')
    assert [g["label"] for g in res.answer] == ["2024-11-20:2", "2024-11-21:1", "2024-11-22:1", "2024-11-23:1"]
    failing = run(store, 'MAP(l=RETRIEVE(query="songs"), fct=lambda e: e["nope"], res_name="x")')
    assert [e["x"] for e in failing.answer] == [None] * 5


def test_unnest_edge_cases(store: EventStore) -> None:
    ev = EventStore.from_records([
        {"id": "1", "start_date": "2024-01-01", "event_type": "calendar", "event_data": {"people": ["a", "b"]}},
        {"id": "2", "start_date": "2024-01-02", "event_type": "calendar", "event_data": {"people": []}},
        {"id": "3", "start_date": "2024-01-03", "event_type": "calendar", "event_data": {"people": '["c"]'}},
        {"id": "4", "start_date": "2024-01-04", "event_type": "calendar", "event_data": {"people": "d"}},
        {"id": "5", "start_date": "2024-01-05", "event_type": "calendar", "event_data": {"x": 1}},
    ])
    res = Executor(ev, OracleRetriever({"q": ["1", "2", "3", "4", "5"]}), dedup=False).execute(
        'MAP(l=UNNEST(l=RETRIEVE(query="q"), nested_attr_name="people", unnested_attr_name="p"), '
        'fct=lambda e: e["p"])')
    assert res.answer == ["a", "b", "c", "d"]


@pytest.mark.parametrize(("op", "expected"), [("SUM", 212), ("AVG", 53), ("MIN", 30), ("MAX", 90)])
def test_aggregates_skip_none(store: EventStore, op: str, expected: float) -> None:
    tree = (f'{op}(l=MAP(l=RETRIEVE(query="workouts"), fct=lambda e: int(e["duration"].split()[0]) '
            f'if e["source"] == "workout" else None, res_name="d"), attr_name="d")')
    assert run(store, tree).answer == expected
    assert run(store, f'{op}(l=RETRIEVE(query="nothing"), attr_name="d")').answer == 0


def test_min_of_datetimes_and_nested_operator_in_lambda(store: EventStore) -> None:
    tree = ('APPLY(l=FILTER(l=RETRIEVE(query="songs"), filter=lambda attr: attr["start_datetime"] >= '
            'MIN(l=FILTER(l=RETRIEVE(query="workouts"), filter=lambda a: a["workout_type"] == "running"), '
            'attr_name="end_datetime")), fct=len)')
    res = run(store, tree)
    assert res.answer == 3  # songs after the first run ended (2024-11-20 07:42)
    ops = [t["operator"] for t in res.trace]
    assert ops == ["APPLY", "FILTER", "RETRIEVE", "MIN", "FILTER", "RETRIEVE"]


def test_apply_failure_is_a_clean_error(store: EventStore) -> None:
    res = Executor(store, OracleRetriever(ORACLE)).execute('APPLY(l=RETRIEVE(query="songs"), fct=lambda l: l[99])')
    assert res.answer is None and res.error.startswith("ExecutionError")


# -- JOIN --------------------------------------------------------------------------------------------------

def test_join_meeting_mum_and_dad(store: EventStore) -> None:
    tree = ('APPLY(l=JOIN(l1=RETRIEVE(query="mum"), l2=RETRIEVE(query="dad"), '
            'condition="i1.start_datetime <= i2.end_datetime and i2.start_datetime <= i1.end_datetime"), fct=len)')
    res = run(store, tree)
    assert res.answer == 2  # c2 x c3 overlap, c6 is in both lists
    join_entry = next(t for t in res.trace if t["operator"] == "JOIN")
    assert join_entry["strategy"] == "sweep" and join_entry["input_sizes"] == [2, 2]


def _random_events(rng: random.Random, n: int, tag: str) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        s = rng.randint(0, 40)
        out.append({"id": f"{tag}{i}", "k": rng.choice([1, 2, 3, 2.0, None, "x"]), "s": s,
                    "e": s + rng.randint(0, 8), "v": rng.choice([rng.randint(0, 40), None]),
                    tag: i})
    return out


CONDITIONS = [
    "i1.k == i2.k",
    "lambda a, b: a['k'] == b['k'] and a['s'] < b['e']",
    "i1.s <= i2.e and i2.s <= i1.e",
    "i1.s >= i2.s and i1.e <= i2.e",
    "i1.v < i2.s",
    "i2.s >= i1.v",
    "i1.s < i2.s < i1.e",
    "i1.get('v') == i2.get('v')",
    "i1.s + 3 > i2.e or i1.k == 'x'",
    "lambda a, b: abs(a['s'] - b['s']) <= 2",
]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_join_strategies_agree_with_nested_loop(condition: str) -> None:
    text = condition if condition.startswith("lambda") else json.dumps(condition)
    node = parse_tree(f'JOIN(l1=RETRIEVE(query="a"), l2=RETRIEVE(query="b"), condition={text})')
    fn = node.args["condition"]
    ev = Evaluator(date(2024, 11, 25))
    test = safe_test(lambda a, b: ev.call(fn, a, b))
    for seed in range(6):
        rng = random.Random(seed)
        l1, l2 = _random_events(rng, rng.randint(0, 40), "a"), _random_events(rng, rng.randint(0, 40), "b")
        reference, _ = join(l1, l2, fn, test, "nested")
        for strategy in ("auto", "equi", "sweep"):
            got, used = join(l1, l2, fn, test, strategy)
            assert got == reference, (condition, seed, strategy, used)
    assert analyse_condition(fn) or condition in CONDITIONS[-2:]


# -- execution: trace, caching, time budget -----------------------------------------------------------------

def test_trace_and_subtree_cache(store: EventStore) -> None:
    oracle = OracleRetriever(ORACLE)
    tree = ('APPLY(l=JOIN(l1=RETRIEVE(query="songs"), l2=RETRIEVE(query="songs"), condition="i1.id == i2.id"), '
            'fct=len)')
    res = Executor(store, oracle).execute(tree)
    assert res.answer == 5 and oracle.calls == ["songs"]  # the second RETRIEVE came from the cache
    assert [(t["operator"], t["depth"], t["cached"]) for t in res.trace] == [
        ("APPLY", 0, False), ("JOIN", 1, False), ("RETRIEVE", 2, False), ("RETRIEVE", 2, True)]
    join_entry = res.trace[1]
    assert join_entry["input_sizes"] == [5, 5] and join_entry["output_size"] == 5 and join_entry["strategy"] == "equi"
    assert res.trace[0]["output_size"] is None and res.trace[0]["args"] == {"fct": "len"}
    assert res.trace[0]["output_preview"] == "5"
    shown = res.trace[2]["output_preview"]  # 5 events: the first 3 (cut to the length limit), then the count
    assert shown.startswith('[{"event": "listened"') and shown.endswith(", ... +2 more]") and len(shown) <= 300
    assert all(t["seconds"] >= 0 for t in res.trace)
    json.dumps(res.to_dict())


def test_retrieve_hands_every_retriever_the_questions_time_check(store: EventStore) -> None:
    """Whatever the retriever, RETRIEVE passes it the question's check, which refuses work past the budget."""

    class Paced:
        def retrieve(self, query: str, s: EventStore, check_time: Any = None) -> list[str]:
            assert check_time is not None
            check_time(0.0, "a short batch")
            check_time(60.0, "a long batch")
            return ORACLE["songs"]

    res = Executor(store, Paced(), time_budget=5).execute('APPLY(l=RETRIEVE(query="songs"), fct=len)')
    assert res.answer is None
    assert res.error.startswith("TimeoutError") and "a long batch would take about 60.0 s" in res.error
    assert Executor(store, OracleRetriever(ORACLE)).execute('APPLY(l=RETRIEVE(query="songs"), fct=len)').answer \
        == len(ORACLE["songs"])


def test_time_budget_aborts_cleanly(store: EventStore) -> None:
    class Slow:
        def retrieve(self, query: str, s: EventStore, check_time: object = None) -> list[str]:
            time.sleep(0.3)
            return ORACLE["songs"]

    res = Executor(store, Slow(), time_budget=0.1).execute('APPLY(l=RETRIEVE(query="songs"), fct=len)')
    assert res.answer is None and res.error.startswith("TimeoutError")
    started = time.monotonic()
    busy = ('APPLY(l=RETRIEVE(query="songs"), fct=lambda l: sum([len([y for y in [0] * 100000]) '
            'for x in [0] * 100000]))')
    res = Executor(store, OracleRetriever(ORACLE), time_budget=0.5).execute(busy)
    assert res.error.startswith("TimeoutError") and time.monotonic() - started < 5


class SlowModel:
    """An extraction function that takes ``seconds`` per batch, like a model, and records the batch sizes."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.asked = seconds, []

    def __call__(self, events: Sequence[dict[str, Any]], key: str) -> list[Any]:
        self.asked.append(len(events))
        time.sleep(self.seconds)
        return [e.get(key) for e in events]


def slow_extractor(seconds: float, **kw: Any) -> tuple[FrozenMappingExtractor, SlowModel]:
    model = SlowModel(seconds)
    return FrozenMappingExtractor(extract_many=model, batch_size=2, **kw), model


def test_time_budget_is_checked_inside_extract(store: EventStore) -> None:
    """The model extractor checks the deadline before each batch, at the pace of the batches before it."""
    extractor, model = slow_extractor(0.2)
    res = Executor(store, OracleRetriever(ORACLE), extractor, time_budget=0.3).execute(
        'EXTRACT(l=RETRIEVE(query="songs"), attr_names=["song_name"])')
    assert res.error.startswith("TimeoutError") and res.answer is None
    assert "extracting 'song_name' from 2 more of 5 events would take about 0.2 s" in res.error
    assert model.asked == [2] and len(ORACLE["songs"]) == 5  # stopped before the second batch
    assert res.seconds < 0.3  # ... so within the budget, as the executor measures it


def test_the_first_extract_batch_is_estimated_from_the_extractors_earlier_pace(store: EventStore) -> None:
    """A question's first batch is estimated at the pace the extractor kept over earlier questions (0.2 s an
    event, so 0.4 s for 2 events), which stops it within a 0.3 s budget; a pipeline's extractor keeps one pace."""
    from convohub.reqap.components.pipeline import ReQAP
    from convohub.reqap.components.qud import StaticDecomposer
    from convohub.reqap.engine.pace import Pace

    tree = 'EXTRACT(l=RETRIEVE(query="songs"), attr_names=["song_name"])'
    extractor, model = slow_extractor(0.05)
    extractor.pace = Pace(seconds=0.4, units=2)
    res = Executor(store, OracleRetriever(ORACLE), extractor, time_budget=0.3).execute(tree)
    assert "extracting 'song_name' from 2 of 5 events would take about 0.4 s" in res.error
    assert model.asked == [] and res.seconds < 0.3
    fresh, _ = slow_extractor(0.05)
    assert Executor(store, OracleRetriever(ORACLE), fresh, time_budget=0.3).execute(tree).ok  # no pace yet: runs

    extractor, model = slow_extractor(0.05)
    pipeline = ReQAP(StaticDecomposer({"q": [tree]}), OracleRetriever(ORACLE), extractor, budget_s=5.0)
    assert pipeline.answer("q", store).ok and pipeline.answer("q", store).ok
    assert extractor.pace.units == 10 and extractor.pace.per_unit() >= 0.025  # 0.05 s per 2 events


def test_events_a_frozen_mapping_answers_are_not_estimated(store: EventStore) -> None:
    """Once the answers of a source match one event key, the rest of its events are read by key without the
    model, so only the model's batches are estimated: a pace of 1 s an event does not stop a 2.5 s budget
    that the first batch (2 events, 2 s estimated) fits, although 5 events at that pace would not."""
    from convohub.reqap.engine.pace import Pace

    extractor, model = slow_extractor(0.01, window=2, share=1.0)
    extractor.pace = Pace(seconds=2.0, units=2)
    res = Executor(store, OracleRetriever(ORACLE), extractor, time_budget=2.5).execute(
        'EXTRACT(l=RETRIEVE(query="songs"), attr_names=["song_name"])')
    assert res.ok and model.asked == [2] and extractor.frozen == {("music_stream", "song_name"): "song_name"}
    assert len(res.answer) == 5


def test_budget_exceeded_keeps_its_reason_across_processes() -> None:
    import pickle

    from convohub.reqap.engine.errors import BudgetExceeded

    again = pickle.loads(pickle.dumps(BudgetExceeded("a batch would take about 9.0 s, 2.0 s are left")))
    assert str(again) == "time budget exceeded: a batch would take about 9.0 s, 2.0 s are left"
    assert again.reason.startswith("a batch") and str(pickle.loads(pickle.dumps(BudgetExceeded()))) == \
        "time budget exceeded"
    # a tree's budget is what decoding left of the question's: shown to a tenth of a second
    assert BudgetExceeded("a batch").message(36.1456) == "TimeoutError: time budget of 36.1 s exceeded (a batch)"
    assert BudgetExceeded().message(40) == "TimeoutError: time budget of 40 s exceeded"


def test_a_window_that_closed_without_a_mapping_keeps_full_batches() -> None:
    """Once a source's window of answers is decided and no key matched, its events go on to the model in whole
    batches (before the window closes, the batch is cut at its end, so the decision comes first)."""
    class Unmatched(SlowModel):  # answers that match no key of the events
        def __call__(self, events: Sequence[dict[str, Any]], key: str) -> list[Any]:
            return ["x" for _ in super().__call__(events, key)]

    model = Unmatched(0.0)
    extractor = FrozenMappingExtractor(extract_many=model, window=2, batch_size=3)
    events = [{"id": str(i), "source": "notes", "text": f"note {i}"} for i in range(8)]
    assert extractor.extract(events, "mood") == ["x"] * 8
    assert model.asked == [2, 3, 3] and extractor.frozen == {} and extractor.model_calls == 8


def test_a_tree_runs_on_what_its_decoding_left_of_the_budget(store: EventStore) -> None:
    """Decoding a tree takes its share of the question's budget: the tree runs on the rest, so a question that
    spends 0.2 s of 0.3 s decoding stops in a 0.2 s RETRIEVE instead of answering at 0.4 s."""
    from convohub.reqap.components.pipeline import ReQAP

    class SlowDecoding:
        def candidates(self, question: str, check_time: Any = None) -> Any:
            time.sleep(0.2)
            yield 'APPLY(l=RETRIEVE(query="songs"), fct=len)'

    class SlowRetrieval:
        def retrieve(self, query: str, s: EventStore, check_time: Any = None) -> list[str]:
            time.sleep(0.2)
            return ORACLE["songs"]

    result = ReQAP(SlowDecoding(), SlowRetrieval(), budget_s=0.3).answer("how many songs?", store)
    assert result.answer is None and result.tried and result.tried[0]["error"].startswith("TimeoutError")
    # the budget ran out in the tree: the question's error ends with the tree's, which names the step
    assert result.error == ("TimeoutError: time budget of 0.3 s exceeded; the last tree's error: "
                            f"{result.tried[0]['error']}")
    assert ReQAP(SlowDecoding(), SlowRetrieval(), budget_s=2.0).answer("how many songs?", store).answer == 5


def test_extract_within_budget_runs_every_batch(store: EventStore) -> None:
    extractor, model = slow_extractor(0.01)
    res = Executor(store, OracleRetriever(ORACLE), extractor, time_budget=5.0).execute(
        'EXTRACT(l=RETRIEVE(query="songs"), attr_names=["song_name"])')
    assert res.error is None and model.asked == [2, 2, 1]


# -- CLI ------------------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="convohub")
    add_cli(parser.add_subparsers(dest="command"))
    return parser


def test_cli_execute(tmp_path: Any, capsys: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "data" / "observable_events"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{**r, "persona_id": "test_persona_0"} for r in RECORDS]),
                   folder / "test-00000-of-00001.parquet")
    args = _parser().parse_args(["reqap", "execute", "--dataset", str(tmp_path), "--persona", "test_persona_0",
                                 "--tree", 'APPLY(l=FILTER(l=RETRIEVE(query="running workouts"), filter=lambda '
                                 'attr: attr["workout_type"] == "running"), fct=len)'])
    assert args.handler(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] == 3 and out["trace"][0]["operator"] == "APPLY" and out["error"] is None


def test_cli_rejects_before_touching_data(tmp_path: Any, capsys: Any) -> None:
    args = _parser().parse_args(["reqap", "execute", "--dataset", str(tmp_path / "missing"), "--persona", "p",
                                 "--tree", 'APPLY(l=RETRIEVE(query="x"), fct=lambda l: open("/etc/passwd"))'])
    assert args.handler(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rejected tree" in err and "open" in err


def test_paced_chunks_estimates_each_chunk_from_the_ones_before() -> None:
    """The first chunk is estimated at the earlier calls' pace (None before any), later ones at this call's;
    the results come back in order and every chunk's seconds go into the shared pace."""
    from convohub.reqap.engine.errors import BudgetExceeded
    from convohub.reqap.engine.pace import Pace, paced_chunks

    seen: list[tuple[float | None, str]] = []
    pace = Pace()
    out = paced_chunks(list(range(5)), 2, lambda chunk: [x * 10 for x in chunk], pace,
                       lambda seconds, what: seen.append((seconds, what)), lambda start, n: f"{n} from {start}")
    assert out == [0, 10, 20, 30, 40] and pace.units == 5
    assert seen[0] == (None, "2 from 0") and [w for _, w in seen[1:]] == ["2 from 2", "1 from 4"]
    assert all(s is not None and s >= 0 for s, _ in seen[1:])
    pace.seconds = 5.0  # 1 s a unit: the next call's first chunk of 2 is estimated at 2 s
    seen.clear()
    paced_chunks([1, 2], 2, list, pace, lambda seconds, what: seen.append((seconds, what)), lambda s, n: "")
    assert seen == [(2.0, "")]

    def refuse(seconds: float | None, what: str) -> None:
        raise BudgetExceeded(what)

    with pytest.raises(BudgetExceeded, match="first"):
        paced_chunks([1], 2, list, Pace(), refuse, lambda s, n: "first")


def test_pace_estimates_a_small_call_at_least_as_long_as_the_slowest_no_larger_one() -> None:
    """Decoding one request costs nearly what decoding eight does: after a 4 s call of 8 and a 3 s call of 1,
    and a 2 s call of 1, a call of 1 is estimated at 3 s (the mean, 0.9 s a request, would say 0.9 s)."""
    from convohub.reqap.engine.pace import Pace

    pace = Pace()
    assert pace.estimate(1) is None
    pace.add(8, 4.0)
    assert pace.estimate(1) == pytest.approx(0.5)  # no call of 1 yet: the mean
    assert pace.estimate(8) == pytest.approx(4.0)
    pace.add(1, 3.0)
    pace.add(1, 2.0)
    assert pace.estimate(1) == pytest.approx(3.0)
    assert pace.estimate(2) == pytest.approx(3.0)  # the floor over the mean's 1.8 s
    assert pace.estimate(4) == pytest.approx(3.6)  # the mean, 0.9 s a request, over the floor
    assert pace.estimate(8) == pytest.approx(7.2)  # the mean, although the one call of 8 took 4 s
    assert pace.slowest == {8: 4.0, 1: 3.0}


def test_refuse_past_checks_the_estimate_or_else_the_deadline() -> None:
    import time

    from convohub.reqap.engine.errors import BudgetExceeded
    from convohub.reqap.engine.pace import refuse_past

    now = time.monotonic()
    refuse_past(None, 99.0, "anything")  # no deadline
    refuse_past(now + 60, None, "a first call")  # no estimate, deadline ahead
    refuse_past(now + 60, 1.0, "a short call")
    with pytest.raises(BudgetExceeded, match=r"a long call would take about 90\.0 s, \d+\.\d s are left"):
        refuse_past(now + 60, 90.0, "a long call")
    with pytest.raises(BudgetExceeded, match="the budget ran out before a first call"):
        refuse_past(now - 1, None, "a first call")
