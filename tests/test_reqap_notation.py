"""The authors' notation in full: operator trees written the way ReQAP's in-context examples write them.

Each case is a decomposition in the authors' dialogue form -- one operator per step, list arguments as
``QUD("...")`` sub-questions, spaced like their examples (``l= QUD("...") ,``) -- assembled into a tree
and run over a small persona. The trees are convohub's own; each exercises one piece of the vocabulary
the authors' engine accepts because it evaluates lambdas as Python (date methods such as ``isocalendar``,
``relativedelta`` between two dates, ``range``/``zip``/``enumerate``, ``strptime``, format specs,
type conversions in ``attr_types``, an ``attr_types`` list shorter than ``attr_names``). Every widened
name stays checked: the hostile variants at the end are refused or stopped by the engine's bounds.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest

from convohub.reqap import EventStore, Executor, OracleRetriever, TreeSyntaxError, assemble, parse_tree


def _ev(i: str, etype: str, sd: str, st: str | None, ed: str | None, et: str | None, **data: Any) -> dict:
    return {"id": i, "structured_event_id": f"s{i}", "start_date": sd, "start_time": st, "end_date": ed,
            "end_time": et, "event_type": etype, "event_data": json.dumps(data), "properties_mentioned": "[]"}


RECORDS = [
    # workouts; 2024-11-25 (the reference date) is the Monday of ISO week 48
    _ev("w1", "workout", "2024-11-18", "07:00:00", "2024-11-18", "07:42:00", workout_type="running",
        duration="42", duration_unit="min"),
    _ev("w2", "workout", "2024-11-20", "18:30:00", "2024-11-20", "19:30:00", workout_type="cycling",
        duration="60", duration_unit="min"),
    _ev("w3", "workout", "2024-11-04", "06:50:00", "2024-11-04", "07:20:00", workout_type="running",
        duration="30", duration_unit="min"),
    _ev("w4", "workout", "2023-12-31", "10:00:00", "2023-12-31", "12:05:00", workout_type="running",
        duration="125", duration_unit="min"),
    _ev("w5", "workout", "2024-11-23", "09:00:00", "2024-11-23", "09:35:00", workout_type="running",
        duration="35", duration_unit="min"),
    # music
    _ev("m1", "music_stream", "2024-11-18", "07:05:00", "2024-11-18", "07:09:00", song_name="Blue Hour",
        song_artist=["Mira Sol"], duration="210", duration_unit="seconds"),
    _ev("m2", "music_stream", "2024-11-18", "07:10:00", "2024-11-18", "07:14:00", song_name="Night Drive",
        song_artist=["Mira Sol", "Kay Row"], duration="230", duration_unit="seconds"),
    _ev("m3", "music_stream", "2024-11-20", "20:00:00", "2024-11-20", "20:04:00", song_name="Blue Hour",
        song_artist=["Mira Sol"], duration="210", duration_unit="seconds"),
    # purchases
    _ev("p1", "online_purchase", "2024-11-02", "12:00:00", None, None, product="Trail socks",
        product_quantity="2", price="12.50 EUR"),
    _ev("p2", "online_purchase", "2024-10-15", "18:20:00", None, None, product="Rain jacket",
        product_quantity="1", price="89.99 EUR"),
    _ev("p3", "online_purchase", "2023-11-30", "09:00:00", None, None, product="Sci-fi novel",
        product_quantity="1", price="5.99 EUR"),
    # movies (stream_end_time as the export writes it)
    _ev("v1", "movie_stream", "2024-11-22", "21:00:00", "2024-11-22", "23:10:00", movie_title="Dark Orbit",
        stream_end_time="23:10:00", duration="7800", duration_unit="seconds"),
    _ev("v2", "movie_stream", "2024-11-09", "15:00:00", "2024-11-09", "16:40:00", movie_title="Paper Moon",
        stream_end_time="16:40:00", duration="6000", duration_unit="seconds"),
    # calendar
    _ev("c1", "calendar", "2024-11-22", "19:00:00", "2024-11-22", "20:30:00", summary="Dinner with Anna",
        location="Luigi's, Park Street", description='["Anna", "Ben"]'),
    _ev("c2", "calendar", "2024-11-12", "10:00:00", "2024-11-12", "10:45:00", summary="Dentist",
        location="Dr. Berg, Main Square", description="[]"),
    _ev("c3", "calendar", "2024-08-30", "18:00:00", "2024-08-30", "19:00:00", summary="Dinner with Ben",
        location="Casa Verde, Hill Road", description='["Ben"]'),
]
ORACLE = {
    "I went running": ["w1", "w3", "w4", "w5"],
    "I did a workout": ["w1", "w2", "w3", "w4", "w5"],
    "I listened to a song": ["m1", "m2", "m3"],
    "I bought something online": ["p1", "p2", "p3"],
    "I watched a movie": ["v1", "v2"],
    "I had dinner with someone": ["c1", "c3"],
    "I had an appointment": ["c1", "c2", "c3"],
}


@pytest.fixture(scope="module")
def store() -> EventStore:
    return EventStore.from_records(RECORDS)


def _tree(dialogue: str) -> str:
    """Assemble an authors'-style dialogue (``Input: QUD("q")`` / ``Assistant: OP(...)`` lines) into one tree."""
    steps: dict[str, str] = {}
    root = None
    question = None
    for line in dialogue.strip().splitlines():
        line = line.strip()
        if line.startswith("User:"):
            question = line.split('QUD("', 1)[1].rsplit('")', 1)[0]
        elif line.startswith("Assistant:"):
            assert question is not None
            steps[question] = line[len("Assistant:"):].strip()
            root = root or question
    assert root is not None
    return assemble(steps[root], steps).text


# question -> (dialogue, expected answer); each dialogue uses one piece of the authors' vocabulary
CASES: dict[str, tuple[str, Any]] = {
    "isocalendar_week": ("""
User: Starting with new question. Input: QUD("How many times did I go running last week?")
Assistant: APPLY(l= QUD("my runs last week") , fct=len)
User: Input: QUD("my runs last week")
Assistant: FILTER(l= QUD("my runs with date") , filter=lambda attr: attr["start_date"].isocalendar()[1] == date.today().isocalendar()[1] - 1 and attr["start_date"].isocalendar().year == date.today().isocalendar().year)
User: Input: QUD("my runs with date")
Assistant: EXTRACT(l= QUD("I went running") , attr_names=["start_date"], attr_types=[date.fromisoformat])
User: Input: QUD("I went running")
Assistant: RETRIEVE(query="I went running")
""", 2),
    "isocalendar_weekday_attribute": ("""
User: Starting with new question. Input: QUD("How often did I work out on a weekend?")
Assistant: APPLY(l= QUD("my workouts on a weekend") , fct=len)
User: Input: QUD("my workouts on a weekend")
Assistant: FILTER(l= QUD("my workouts with date") , filter=lambda attr: attr["start_date"].isocalendar().weekday in (6, 7))
User: Input: QUD("my workouts with date")
Assistant: EXTRACT(l= QUD("I did a workout") , attr_names=["start_date"], attr_types=[date.fromisoformat])
User: Input: QUD("I did a workout")
Assistant: RETRIEVE(query="I did a workout")
""", 2),
    "shorter_attr_types": ("""
User: Starting with new question. Input: QUD("What did I buy online this year?")
Assistant: EXTRACT(l= QUD("my online purchases this year") , attr_names=["product"], attr_types=[str])
User: Input: QUD("my online purchases this year")
Assistant: FILTER(l= QUD("my online purchases with date and product") , filter=lambda attr: attr["purchase_date"].year == date.today().year)
User: Input: QUD("my online purchases with date and product")
Assistant: EXTRACT(l= QUD("I bought something online") , attr_names=["purchase_date", "product"], attr_types=[date.fromisoformat])
User: Input: QUD("I bought something online")
Assistant: RETRIEVE(query="I bought something online")
""", None),  # a list of events: checked below by product names
    "relativedelta_between_dates": ("""
User: Starting with new question. Input: QUD("How many months ago was my earliest run?")
Assistant: APPLY(l= QUD("my runs with date") , fct=lambda l: relativedelta(date.today(), min(e["start_date"] for e in l)).months + 12 * relativedelta(date.today(), min(e["start_date"] for e in l)).years)
User: Input: QUD("my runs with date")
Assistant: EXTRACT(l= QUD("I went running") , attr_names=["start_date"], attr_types=[date.fromisoformat])
User: Input: QUD("I went running")
Assistant: RETRIEVE(query="I went running")
""", 10),
    "range_of_hours": ("""
User: Starting with new question. Input: QUD("How many of my appointments were in the evening?")
Assistant: APPLY(l= QUD("my appointments in the evening") , fct=len)
User: Input: QUD("my appointments in the evening")
Assistant: FILTER(l= QUD("my appointments with start time") , filter=lambda attr: attr["start_time"].hour in range(18, 24))
User: Input: QUD("my appointments with start time")
Assistant: EXTRACT(l= QUD("I had an appointment") , attr_names=["start_time"], attr_types=[time.fromisoformat])
User: Input: QUD("I had an appointment")
Assistant: RETRIEVE(query="I had an appointment")
""", 2),
    "zip_longest_gap": ("""
User: Starting with new question. Input: QUD("What was the longest break between two of my runs, in days?")
Assistant: APPLY(l= QUD("my runs with date") , fct=lambda l: max((b - a).days for a, b in zip(sorted(e["start_date"] for e in l), sorted(e["start_date"] for e in l)[1:])))
User: Input: QUD("my runs with date")
Assistant: EXTRACT(l= QUD("I went running") , attr_names=["start_date"], attr_types=[date.fromisoformat])
User: Input: QUD("I went running")
Assistant: RETRIEVE(query="I went running")
""", 309),
    "enumerate_rank": ("""
User: Starting with new question. Input: QUD("On which position of my purchases, by date, was the rain jacket?")
Assistant: APPLY(l= QUD("my online purchases with date and product") , fct=lambda l: [n + 1 for n, e in enumerate(sorted(l, key=lambda e: e["start_date"])) if e["product"] == "Rain jacket"][0])
User: Input: QUD("my online purchases with date and product")
Assistant: EXTRACT(l= QUD("I bought something online") , attr_names=["start_date", "product"], attr_types=[date.fromisoformat, str])
User: Input: QUD("I bought something online")
Assistant: RETRIEVE(query="I bought something online")
""", 2),
    "strptime_end_hour": ("""
User: Starting with new question. Input: QUD("How many movies did I finish after 11 pm?")
Assistant: APPLY(l= QUD("movies I finished after 11 pm") , fct=len)
User: Input: QUD("movies I finished after 11 pm")
Assistant: FILTER(l= QUD("movies I watched with end time") , filter=lambda attr: datetime.strptime(attr["stream_end_time"], "%H:%M:%S").hour >= 23)
User: Input: QUD("movies I watched with end time")
Assistant: EXTRACT(l= QUD("I watched a movie") , attr_names=["stream_end_time"], attr_types=[str])
User: Input: QUD("I watched a movie")
Assistant: RETRIEVE(query="I watched a movie")
""", 1),
    "format_spec_month": ("""
User: Starting with new question. Input: QUD("In which month did I work out the most?")
Assistant: ARGMAX(l= QUD("number of workouts per month") , arg_attr_name="num_workouts", val_attr_name="month")
User: Input: QUD("number of workouts per month")
Assistant: MAP(l= QUD("my workouts grouped by month") , fct=len, res_name="num_workouts")
User: Input: QUD("my workouts grouped by month")
Assistant: GROUP_BY(l= QUD("my workouts with month") , attr_names=["month"])
User: Input: QUD("my workouts with month")
Assistant: MAP(l= QUD("my workouts with date") , fct=lambda attr: f"{attr['start_date'].year}-{attr['start_date'].month:02d}", res_name="month")
User: Input: QUD("my workouts with date")
Assistant: EXTRACT(l= QUD("I did a workout") , attr_names=["start_date"], attr_types=[date.fromisoformat])
User: Input: QUD("I did a workout")
Assistant: RETRIEVE(query="I did a workout")
""", ["2024-11"]),
    "partition_location": ("""
User: Starting with new question. Input: QUD("Where did I have dinner with Anna?")
Assistant: MAP(l= QUD("dinners with Anna with location") , fct=lambda attr: attr["location"].partition(",")[0].strip())
User: Input: QUD("dinners with Anna with location")
Assistant: FILTER(l= QUD("my dinners with summary and location") , filter=lambda attr: "anna" in attr["summary"].lower())
User: Input: QUD("my dinners with summary and location")
Assistant: EXTRACT(l= QUD("I had dinner with someone") , attr_names=["summary", "location"], attr_types=[str, str])
User: Input: QUD("I had dinner with someone")
Assistant: RETRIEVE(query="I had dinner with someone")
""", ["Luigi's"]),
    "toordinal_span": ("""
User: Starting with new question. Input: QUD("How many days lie between my first and my last purchase?")
Assistant: APPLY(l= QUD("my online purchases with date") , fct=lambda l: max(e["purchase_date"].toordinal() for e in l) - min(e["purchase_date"].toordinal() for e in l))
User: Input: QUD("my online purchases with date")
Assistant: EXTRACT(l= QUD("I bought something online") , attr_names=["purchase_date"], attr_types=[date.fromisoformat])
User: Input: QUD("I bought something online")
Assistant: RETRIEVE(query="I bought something online")
""", 338),
    "divmod_hours": ("""
User: Starting with new question. Input: QUD("How many full hours did my longest run take?")
Assistant: APPLY(l= QUD("my runs with duration") , fct=lambda l: divmod(max(e["duration"] for e in l), 60)[0])
User: Input: QUD("my runs with duration")
Assistant: EXTRACT(l= QUD("I went running") , attr_names=["duration"], attr_types=[int])
User: Input: QUD("I went running")
Assistant: RETRIEVE(query="I went running")
""", 2),
    "json_loads_guests": ("""
User: Starting with new question. Input: QUD("How many people did I have dinner with in total?")
Assistant: SUM(l= QUD("my dinners with number of guests") , attr_name="guests")
User: Input: QUD("my dinners with number of guests")
Assistant: MAP(l= QUD("my dinners with description") , fct=lambda attr: len(json.loads(attr["description"])), res_name="guests")
User: Input: QUD("my dinners with description")
Assistant: EXTRACT(l= QUD("I had dinner with someone") , attr_names=["description"], attr_types=[str])
User: Input: QUD("I had dinner with someone")
Assistant: RETRIEVE(query="I had dinner with someone")
""", 3),
    "list_conversion_types": ("""
User: Starting with new question. Input: QUD("How many different artists did I listen to?")
Assistant: APPLY(l= QUD("artists I listened to") , fct=lambda l: len(set(e["artist"] for e in l)))
User: Input: QUD("artists I listened to")
Assistant: UNNEST(l= QUD("songs I listened to with artist names") , nested_attr_name="artist_names", unnested_attr_name="artist")
User: Input: QUD("songs I listened to with artist names")
Assistant: EXTRACT(l= QUD("I listened to a song") , attr_names=["artist_names"], attr_types=[tuple])
User: Input: QUD("I listened to a song")
Assistant: RETRIEVE(query="I listened to a song")
""", 2),
    "json_loads_type": ("""
User: Starting with new question. Input: QUD("Who came to my dinners?")
Assistant: APPLY(l= QUD("my dinners with guests") , fct=lambda l: sorted(set(g for e in l for g in e["description"])))
User: Input: QUD("my dinners with guests")
Assistant: EXTRACT(l= QUD("I had dinner with someone") , attr_names=["description"], attr_types=[json.loads])
User: Input: QUD("I had dinner with someone")
Assistant: RETRIEVE(query="I had dinner with someone")
""", ["Anna", "Ben"]),
    "type_names_as_strings": ("""
User: Starting with new question. Input: QUD("How much did I spend online in 2024?")
Assistant: SUM(l= QUD("my online purchases in 2024 with amounts") , attr_name="amount_spent")
User: Input: QUD("my online purchases in 2024 with amounts")
Assistant: FILTER(l= QUD("my online purchases with date and amount") , filter=lambda attr: attr["purchase_date"].year == 2024)
User: Input: QUD("my online purchases with date and amount")
Assistant: EXTRACT(l= QUD("I bought something online") , attr_names=["purchase_date", "amount_spent"], attr_types=["date.fromisoformat", "float"])
User: Input: QUD("I bought something online")
Assistant: RETRIEVE(query="I bought something online")
""", 102.49),
    "reversed_latest": ("""
User: Starting with new question. Input: QUD("Which song did I listen to last?")
Assistant: APPLY(l= QUD("songs I listened to with datetime") , fct=lambda l: list(reversed(sorted(l, key=lambda e: e["start_datetime"])))[0]["song_name"])
User: Input: QUD("songs I listened to with datetime")
Assistant: EXTRACT(l= QUD("I listened to a song") , attr_names=["start_datetime", "song_name"], attr_types=[datetime.fromisoformat, str])
User: Input: QUD("I listened to a song")
Assistant: RETRIEVE(query="I listened to a song")
""", "Blue Hour"),
    "string_methods": ("""
User: Starting with new question. Input: QUD("Which appointment names start with 'Dinner'?")
Assistant: MAP(l= QUD("appointments starting with Dinner") , fct=lambda attr: attr["summary"].removeprefix("Dinner with ").zfill(5))
User: Input: QUD("appointments starting with Dinner")
Assistant: FILTER(l= QUD("my appointments with summary") , filter=lambda attr: attr["summary"].partition(" ")[0].isalpha() and attr["summary"].startswith("Dinner"))
User: Input: QUD("my appointments with summary")
Assistant: EXTRACT(l= QUD("I had an appointment") , attr_names=["summary"], attr_types=[str])
User: Input: QUD("I had an appointment")
Assistant: RETRIEVE(query="I had an appointment")
""", ["00Ben", "0Anna"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_authors_notation_parses_and_runs(name: str, store: EventStore) -> None:
    dialogue, expected = CASES[name]
    tree = _tree(dialogue)
    assert parse_tree(tree).text == tree  # renders back to the same notation
    run = Executor(store, OracleRetriever(ORACLE), reference_date=date(2024, 11, 25)).execute(tree)
    assert run.error is None, run.error
    if name == "shorter_attr_types":
        # the second name has no type: its value is kept as extracted (no conversion), the event is not dropped
        assert sorted(e["product"] for e in run.answer) == ["Rain jacket", "Trail socks"]
        return
    if isinstance(expected, float):
        assert run.answer == pytest.approx(expected)
    elif isinstance(expected, list):  # RETRIEVE orders events by time, the cases' lists by name
        assert sorted(run.answer) == expected
    else:
        assert run.answer == expected


def test_shorter_attr_types_keeps_untyped_keys_and_renders_as_written() -> None:
    tree = ('EXTRACT(l=RETRIEVE(query="I bought something online"), attr_names=["purchase_date", "price", '
            '"product"], attr_types=[date.fromisoformat, float])')
    node = parse_tree(tree)
    assert node.args["attr_types"] == ("date.fromisoformat", "float")
    assert parse_tree(node.text).text == node.text
    with pytest.raises(TreeSyntaxError, match="more attr_types than attr_names"):
        parse_tree('EXTRACT(l=RETRIEVE(query="x"), attr_names=["a"], attr_types=[int, float])')


@pytest.mark.parametrize("tree, message", [
    # the widened names keep their checks: no way out of the whitelist through them
    ('APPLY(l=RETRIEVE(query="x"), fct=lambda l: json.load(l))', "json.load"),
    ('APPLY(l=RETRIEVE(query="x"), fct=lambda l: datetime.strptime.__call__("1", "%d"))', "private"),
    ('APPLY(l=RETRIEVE(query="x"), fct=lambda l: date.today().isocalendar().__class__)', "private"),
    ('APPLY(l=RETRIEVE(query="x"), fct=lambda l: range)', "may only be called"),
    ('APPLY(l=RETRIEVE(query="x"), fct=lambda l: zip(l, l, strict=True))', "keyword 'strict'"),
    ('APPLY(l=RETRIEVE(query="x"), fct=lambda l: f"{len(l):{len(l)}}")', "format spec"),
    ('EXTRACT(l=RETRIEVE(query="x"), attr_names=["a"], attr_types=[eval])', "unknown type conversion"),
    ('EXTRACT(l=RETRIEVE(query="x"), attr_names=["a"], attr_types=["os.system"])', "unknown type conversion"),
])
def test_widened_vocabulary_is_still_checked(tree: str, message: str) -> None:
    with pytest.raises(TreeSyntaxError, match=message):
        parse_tree(tree)


@pytest.mark.parametrize("fct, error", [
    ("lambda l: len(range(10 ** 12))", "MemoryBudgetExceeded"),  # range is materialised, so it is bounded
    ('lambda l: f"{len(l):>99}" * 10 ** 5', "MemoryBudgetExceeded"),
    ('lambda l: "7".zfill(10 ** 9)', "MemoryBudgetExceeded"),
    ('lambda l: len(json.loads("[" * 100000 + "]" * 100000))', "ResourceLimitError|ExecutionError"),
    ('lambda l: datetime.strptime("x" * 1000, "%Y")', "ExecutionError"),
])
def test_widened_functions_are_bounded_at_run_time(fct: str, error: str, store: EventStore) -> None:
    tree = f'APPLY(l=RETRIEVE(query="I went running"), fct={fct})'
    run = Executor(store, OracleRetriever(ORACLE), time_budget=20).execute(tree)
    assert run.error is not None and run.error.split(":")[0] in error.split("|"), run.error


def test_invariant_subexpressions_are_computed_once_and_bound_names_never(store: EventStore) -> None:
    """What reads no bound name is computed once per question; a parameter named like a namespace is bound."""
    import ast

    from convohub.reqap.engine.interpreter import Evaluator

    node = parse_tree('FILTER(l=RETRIEVE(query="I went running"), filter=lambda attr: attr["start_date"] >= '
                      '(date.today() - relativedelta(months=1)).replace(day=1))')
    fn = node.args["filter"]
    assert [ast.unparse(n) for n in ast.walk(fn.body) if id(n) in fn.invariant] == [
        "(date.today() - relativedelta(months=1)).replace(day=1)"]
    evaluator = Evaluator(date(2024, 11, 25))
    kept = [e for e in Executor(store, OracleRetriever(ORACLE)).execute(
        'EXTRACT(l=RETRIEVE(query="I went running"), attr_names=["start_date"])').raw if evaluator.call(fn, e)]
    assert sorted(e["id"] for e in kept) == ["w1", "w3", "w5"] and len(evaluator._invariants) == 1
    shadow = parse_tree('FILTER(l=RETRIEVE(query="x"), filter=lambda json: json.get("n") > len([1]))').args["filter"]
    assert [ast.unparse(n) for n in ast.walk(shadow.body) if id(n) in shadow.invariant] == ["len([1])"]
    assert [Evaluator(date(2024, 11, 25)).call(shadow, {"n": n}) for n in (0, 2)] == [False, True]
