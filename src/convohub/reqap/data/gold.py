"""Hand-written gold operator trees for the PerQA question templates, their QUD decompositions and the
oracle retriever they are evaluated with.

Why: ReQAP's QUD model learns to emit operator trees. Gold trees give (a) an upper bound for the engine
(oracle retrieval + lookup extraction must reproduce the DuckDB gold answers), (b) SFT data for the QUD
model (:func:`decompose` turns a tree into one training step per operator) and (c) a workload for
benchmarking the engine against DuckDB.

Trees run over the *observable* events (the corpus), never over the canonical tables:

* structured sources (movie_stream, tvseries_stream, music_stream, online_purchase, workout) carry their
  keys as strings; trees read them with ``EXTRACT`` (typed via ``attr_types``) and filter/group on them;
* calendar, mail and social-media events only verbalise a canonical event. Their canonical keys (doctor
  type, participants, destination...) are not event keys, so the lookup extractor cannot read them.
  What a text retriever *can* do is find the events that mention them ("I met Anna" finds the calendar
  entry "Walk with Anna"), so those facts go into the ``RETRIEVE`` query; everything the tree computes
  from these events uses their typed time spans only (dates, weekdays, months, durations in days).
  Templates whose answer needs a canonical-only value (a genre, a category, a destination, companions,
  a meet-up location...) cannot be answered with the lookup extractor and have no tree here: see
  :data:`SKIPPED`.

Tree templates use two kinds of variable slots: ``{name}`` becomes a Python literal (``"Dark Orbit"``,
``2023``) inside lambdas, ``%name%`` becomes the raw text inside a string literal (RETRIEVE queries and
sub-questions). Template variables are recovered from a generated question's text (the question dicts
do not store the binding) and checked by re-instantiating the template's question and SQL.

Oracle retriever (:class:`OracleIndex`, :func:`oracle_retriever`): every RETRIEVE query of a gold tree
follows one of the patterns of :data:`QUERY_INTENTS`, each naming what a perfect retriever returns:

* a structured kind (``"I watched a movie"`` -> ``movie_stream``): the structured exports of that source
  (observables whose ``event_type`` is the kind). The 1-3 % of stream/purchase/workout events that the
  generator verbalises as text are left out: the lookup extractor could not read their keys anyway, and
  :func:`visible_canonical` gives the gold answer without them;
* a canonical-only kind (``"I had a %doctor_type% appointment"``): the calendar/mail/social-media
  observables whose ``structured_event_id`` points to a canonical event of that type with the given
  values, and only those observables whose ``properties_mentioned`` include every key bound from a
  question variable (the value must be readable in the text; literal category codes such as
  ``milestone_type: new_job`` are implied by the wording). The engine's RETRIEVE de-duplication then
  merges the calendar entry, mail and post of one happening (they share its time span).

:class:`GoldTreeDecomposer` is the decomposer built on these trees: an ORACLE (``--decomposer gold``) for
upper bounds, offline demos and error attribution, never a system result.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convohub.perqa.templates import TEMPLATES, QuestionTemplate
from convohub.reqap.components.retrieve import OracleRetriever
from convohub.reqap.engine.expr import Function
from convohub.reqap.engine.pace import TimeCheck
from convohub.reqap.engine.parse import OpNode, Placeholder, parse_tree

__all__ = [
    "GOLD_TREES", "GoldTree", "GoldTreeDecomposer", "Intent", "OracleIndex", "QUERY_INTENTS", "SKIPPED",
    "decompose", "gold_template", "gold_tree", "oracle_retriever", "template_bindings", "visible_canonical"
]

#: The structured observable sources: their events carry the keys trees EXTRACT.
STRUCTURED_KINDS = frozenset({"movie_stream", "music_stream", "online_purchase", "tvseries_stream", "workout"})
#: Template variables that are integers in SQL (everything else is a string).
INT_VARIABLES = frozenset({"year"})


@dataclass(frozen=True)
class GoldTree:
    """A tree template and its sub-questions, one per non-root operator in pre-order (children of an
    operator in argument order, a lambda's nested operators after the list arguments)."""

    template_id: str
    tree: str
    sub_questions: tuple[str, ...]


@dataclass(frozen=True)
class Intent:
    """What a RETRIEVE query asks for: a canonical event kind plus required canonical values.

    ``where`` holds (canonical key, value, gated): list-valued keys match when they contain the value;
    ``gated`` conditions also require the key in the observable's ``properties_mentioned``.
    """

    kind: str
    where: tuple[tuple[str, str, bool], ...] = ()


# -- the oracle's query patterns ----------------------------------------------------------------------------
#: query pattern -> (canonical kind, {canonical key: value or %variable%}). Patterns are matched as whole
#: strings; the most specific (longest literal text) first, so "I met someone at a park" is not read as
#: a meeting with a person called "someone at a park".
QUERY_INTENTS: dict[str, tuple[str, dict[str, str]]] = {
    "I watched a movie": ("movie_stream", {}),
    "I watched an episode of a TV series": ("tvseries_stream", {}),
    "I listened to a song": ("music_stream", {}),
    "I bought something online": ("online_purchase", {}),
    "I did a workout": ("workout", {}),
    "I had a doctor appointment": ("doctor_appointment", {}),
    "I had a %doctor_type% appointment": ("doctor_appointment", {"doctor_type": "%doctor_type%"}),
    "I took %pet_name% to the vet": ("doctor_appointment", {"doctor_type": "veterinarian",
                                                            "patient": "%pet_name%"}),
    "%kid_name% saw the paediatrician": ("doctor_appointment", {"doctor_type": "paediatrician",
                                                                "patient": "%kid_name%"}),
    "I met someone": ("meet_up", {}),
    "I met someone at a %location_type%": ("meet_up", {"location_type": "%location_type%"}),
    "I met %friend_name%": ("meet_up", {"participants": "%friend_name%"}),
    "I met %friend_name% at a %location_type%": ("meet_up", {"participants": "%friend_name%",
                                                             "location_type": "%location_type%"}),
    "I went on a trip": ("trip", {}),
    "I went on a trip to %trip_city%": ("trip", {"destination_city": "%trip_city%"}),
    "I started a new job": ("personal_milestone", {"milestone_type": "new_job"}),
    "I started working at %company%": ("personal_milestone", {"milestone_type": "new_job",
                                                              "organisation": "%company%"}),
    "I moved to %residence_city%": ("personal_milestone", {"milestone_type": "new_residence",
                                                           "city": "%residence_city%"}),
    "%kid_name% was born": ("personal_milestone", {"milestone_type": "new_kid", "person": "%kid_name%"}),
    "I celebrated my birthday": ("annual_celebration", {"celebration": "birthday"}),
}

_SLOT = re.compile(r"%([a-z_]+)%")

# Shared leaves (plain strings, no slots).
_TV = 'RETRIEVE(query="I watched an episode of a TV series")'
_MOVIE = 'RETRIEVE(query="I watched a movie")'
_SONG = 'RETRIEVE(query="I listened to a song")'
_BUY = 'RETRIEVE(query="I bought something online")'
_WORKOUT = 'RETRIEVE(query="I did a workout")'
_DOCTOR = 'RETRIEVE(query="I had a doctor appointment")'
_TRIP = 'RETRIEVE(query="I went on a trip")'
_YEAR = 'lambda attr: attr["start_date"].year == {year}'
_IN_TRIP = '"i1.start_date >= i2.start_date and i1.start_date <= i2.end_date"'
_Q_TV, _Q_MOVIE, _Q_SONG = ("Which TV series episodes did I watch?", "Which movies did I watch?",
                            "Which songs did I listen to?")
_Q_BUY, _Q_WORKOUT, _Q_TRIP = "What did I buy online?", "Which workouts did I do?", "Which trips did I go on?"


def _argmax_count(inner: str, key: str, count: str) -> str:
    """ARGMAX over GROUP_BY ``key`` + MAP len: "which X the most" (ties kept, as in the gold rule)."""
    return (f'ARGMAX(l=MAP(l=GROUP_BY(l={inner}, attr_names=["{key}"]), fct=len, res_name="{count}"), '
            f'arg_attr_name="{count}", val_attr_name="{key}")')


def _weekday(inner: str) -> str:
    return f'MAP(l={inner}, fct=lambda attr: attr["start_date"].strftime("%A"), res_name="weekday")'


def _g(template_id: str, tree: str, *subs: str) -> GoldTree:
    return GoldTree(template_id, tree, subs)


_TREES: tuple[GoldTree, ...] = (
    # ------------------------------------------------------------------ TV series
    _g("tv_episode_count",
       f'APPLY(l=FILTER(l=EXTRACT(l={_TV}, attr_names=["tvseries_title", "watching_continuation"], '
       'attr_types=[str, bool]), filter=lambda attr: attr["tvseries_title"] == {tvseries_name} '
       'and not attr["watching_continuation"]), fct=len)',
       "Which episodes of %tvseries_name% did I watch, not counting resumed streams?",
       "Which series did each TV episode I watched belong to, and was it a resumed stream?", _Q_TV),
    _g("tv_hours_total",
       f'APPLY(l=EXTRACT(l={_TV}, attr_names=["duration"], attr_types=[float]), '
       'fct=lambda l: round(sum(attr["duration"] for attr in l) / 60, 2))',
       "How many minutes did each TV series episode I watched last?", _Q_TV),
    _g("tv_top_series_year",
       _argmax_count(f'EXTRACT(l=FILTER(l={_TV}, filter={_YEAR}), attr_names=["tvseries_title"], '
                     'attr_types=[str])', "tvseries_title", "episodes"),
       "How many episodes of each TV series did I watch in %year%?",
       "Which TV series episodes did I watch in %year%, grouped by series?",
       "Which series did each TV episode I watched in %year% belong to?",
       "Which TV series episodes did I watch in %year%?", _Q_TV),
    _g("tv_weekday",
       _argmax_count(_weekday(_TV), "weekday", "streams"),
       "How many TV series episodes did I watch on each day of the week?",
       "Which TV series episodes did I watch, grouped by day of the week?",
       "On which day of the week did I watch each TV series episode?", _Q_TV),
    _g("tv_first_watch",
       f'MIN(l=FILTER(l=EXTRACT(l={_TV}, attr_names=["tvseries_title"], attr_types=[str]), '
       'filter=lambda attr: attr["tvseries_title"] == {tvseries_name}), attr_name="start_date")',
       "Which episodes of %tvseries_name% did I watch?",
       "Which series did each TV episode I watched belong to?", _Q_TV),
    _g("tv_latest_season",
       f'ARGMAX(l=FILTER(l=EXTRACT(l={_TV}, attr_names=["tvseries_title", "tvseries_season"], '
       'attr_types=[str, int]), filter=lambda attr: attr["tvseries_title"] == {tvseries_name}), '
       'arg_attr_name="start_datetime", val_attr_name="tvseries_season")',
       "Which episodes of %tvseries_name% did I watch, and from which season?",
       "Which series and season did each TV episode I watched belong to?", _Q_TV),
    # ------------------------------------------------------------------ movies
    _g("movie_distinct_count",
       f'APPLY(l=EXTRACT(l={_MOVIE}, attr_names=["movie_title"], attr_types=[str]), '
       'fct=lambda l: len(set(attr["movie_title"] for attr in l)))',
       "What are the titles of the movies I watched?", _Q_MOVIE),
    _g("movie_longest",
       f'ARGMAX(l=FILTER(l=EXTRACT(l={_MOVIE}, attr_names=["movie_title", "duration", "watching_continuation"], '
       'attr_types=[str, float, bool]), filter=lambda attr: not attr["watching_continuation"]), '
       'arg_attr_name="duration", val_attr_name="movie_title")',
       "Which movie streams were not resumed streams, with their titles and durations?",
       "What were the title, duration and resumed-stream flag of each movie I watched?", _Q_MOVIE),
    _g("movie_last",
       f'ARGMAX(l=EXTRACT(l={_MOVIE}, attr_names=["movie_title"], attr_types=[str]), '
       'arg_attr_name="start_datetime", val_attr_name="movie_title")',
       "What are the titles of the movies I watched?", _Q_MOVIE),
    _g("movie_during_trips",
       f'APPLY(l=JOIN(l1=EXTRACT(l={_MOVIE}, attr_names=["movie_title"], attr_types=[str]), l2={_TRIP}, '
       f'condition={_IN_TRIP}), fct=lambda l: sorted(set(attr["movie_title"] for attr in l)))',
       "Which movie streams happened during one of my trips?",
       "What are the titles of the movies I watched?", _Q_MOVIE, _Q_TRIP),
    _g("movie_minutes_30d",
       f'SUM(l=EXTRACT(l=FILTER(l={_MOVIE}, filter=lambda attr: attr["start_date"] >= date.today() - '
       'timedelta(days=30)), attr_names=["duration"], attr_types=[float]), attr_name="duration")',
       "How many minutes did each movie I watched in the last 30 days last?",
       "Which movies did I watch in the last 30 days?", _Q_MOVIE),
    _g("movie_rewatched",
       _argmax_count(f'FILTER(l=EXTRACT(l={_MOVIE}, attr_names=["movie_title", "watching_continuation"], '
                     'attr_types=[str, bool]), filter=lambda attr: not attr["watching_continuation"])',
                     "movie_title", "times"),
       "How many times did I watch each movie?",
       "Which movies did I start watching, grouped by title?",
       "Which movie streams were not resumed streams?",
       "What were the title and resumed-stream flag of each movie I watched?", _Q_MOVIE),
    _g("movie_country",
       f'APPLY(l=FILTER(l=EXTRACT(l={_MOVIE}, attr_names=["country", "watching_continuation"], '
       'attr_types=[str, bool]), filter=lambda attr: attr["country"] == {country} '
       'and not attr["watching_continuation"]), fct=len)',
       "Which movies did I start watching while in %country%?",
       "In which country was I for each movie I watched, and was it a resumed stream?", _Q_MOVIE),
    # ------------------------------------------------------------------ music
    _g("music_top_song_year",
       _argmax_count(f'EXTRACT(l=FILTER(l={_SONG}, filter={_YEAR}), attr_names=["song_name"], attr_types=[str])',
                     "song_name", "plays"),
       "How many times did I play each song in %year%?",
       "Which songs did I play in %year%, grouped by song?",
       "What are the names of the songs I played in %year%?",
       "Which songs did I listen to in %year%?", _Q_SONG),
    _g("music_top_artist",
       _argmax_count(f'UNNEST(l=EXTRACT(l={_SONG}, attr_names=["song_artist"], attr_types=[list]), '
                     'nested_attr_name="song_artist", unnested_attr_name="artist")', "artist", "plays"),
       "How many times did I play songs by each artist?",
       "Which songs did I play, grouped by artist?",
       "Which artist performed each song I played, one entry per artist?",
       "Who are the artists of the songs I listened to?", _Q_SONG),
    _g("music_artist_plays",
       f'APPLY(l=FILTER(l=EXTRACT(l={_SONG}, attr_names=["song_artist"], attr_types=[list]), '
       'filter=lambda attr: {artist} in attr["song_artist"]), fct=len)',
       "Which songs by %artist% did I play?",
       "Who are the artists of the songs I listened to?", _Q_SONG),
    _g("music_hours_last_month",
       f'APPLY(l=EXTRACT(l=FILTER(l={_SONG}, filter=lambda attr: (date.today() - relativedelta(months=1))'
       '.replace(day=1) <= attr["start_date"] < date.today().replace(day=1)), attr_names=["duration"], '
       'attr_types=[float]), fct=lambda l: round(sum(attr["duration"] for attr in l) / 3600, 2))',
       "How many seconds did each song I played last month last?",
       "Which songs did I listen to last month?", _Q_SONG),
    _g("music_after_workout",
       _argmax_count(
           'JOIN(l1=MAP(l=FILTER(l=EXTRACT(l=' + _WORKOUT + ', attr_names=["workout_type"], attr_types=[str]), '
           'filter=lambda attr: attr["workout_type"] == {workout_type}), fct=lambda attr: attr["end_datetime"] + '
           'timedelta(hours=1), res_name="hour_after_end"), l2=EXTRACT(l=' + _SONG + ', attr_names=["song_name"], '
           'attr_types=[str]), condition="i2.start_datetime >= i1.end_datetime and '
           'i2.start_datetime <= i1.hour_after_end")', "song_name", "plays"),
       "How many times did I play each song within an hour after a %workout_type% workout?",
       "Which songs did I play within an hour after a %workout_type% workout, grouped by song?",
       "Which songs did I play within an hour after a %workout_type% workout?",
       "When did the hour after each of my %workout_type% workouts end?",
       "Which %workout_type% workouts did I do?",
       "What type was each of my workouts?", _Q_WORKOUT,
       "What are the names of the songs I listened to?", _Q_SONG),
    _g("music_first_artist",
       f'MIN(l=FILTER(l=EXTRACT(l={_SONG}, attr_names=["song_artist"], attr_types=[list]), '
       'filter=lambda attr: {artist} in attr["song_artist"]), attr_name="start_date")',
       "Which songs by %artist% did I play?",
       "Who are the artists of the songs I listened to?", _Q_SONG),
    _g("music_distinct_summer",
       f'APPLY(l=EXTRACT(l=FILTER(l={_SONG}, filter=lambda attr: attr["start_date"].year == {{year}} and '
       '6 <= attr["start_date"].month <= 8), attr_names=["song_name"], attr_types=[str]), '
       'fct=lambda l: len(set(attr["song_name"] for attr in l)))',
       "What are the names of the songs I played in the summer of %year%?",
       "Which songs did I listen to in the summer of %year%?", _Q_SONG),
    _g("music_morning_song",
       _argmax_count(f'EXTRACT(l=FILTER(l={_SONG}, filter=lambda attr: attr["start_datetime"].hour < 9), '
                     'attr_names=["song_name"], attr_types=[str])', "song_name", "plays"),
       "How many times did I play each song before 9 in the morning?",
       "Which songs did I play before 9 in the morning, grouped by song?",
       "What are the names of the songs I played before 9 in the morning?",
       "Which songs did I listen to before 9 in the morning?", _Q_SONG),
    # ------------------------------------------------------------------ shopping
    _g("shop_total_last_year",
       f'SUM(l=EXTRACT(l=FILTER(l={_BUY}, filter=lambda attr: attr["start_date"].year == date.today().year - 1), '
       'attr_names=["price"], attr_types=[float]), attr_name="price")',
       "How much did each thing I bought online last year cost?",
       "What did I buy online last year?", _Q_BUY),
    _g("shop_most_expensive",
       f'ARGMAX(l=MAP(l=EXTRACT(l={_BUY}, attr_names=["product", "price", "product_quantity"], '
       'attr_types=[str, float, int]), fct=lambda attr: attr["price"] / attr["product_quantity"], '
       'res_name="unit_price"), arg_attr_name="unit_price", val_attr_name="product")',
       "What was the price per item of each thing I bought online?",
       "What product, price and quantity did each online purchase have?", _Q_BUY),
    _g("shop_top_month",
       f'ARGMAX(l=MAP(l=GROUP_BY(l=MAP(l=EXTRACT(l=FILTER(l={_BUY}, filter={_YEAR}), attr_names=["price"], '
       'attr_types=[float]), fct=lambda attr: attr["start_date"].strftime("%B"), res_name="month"), '
       'attr_names=["month"]), fct=lambda g: sum(attr["price"] for attr in g), res_name="total"), '
       'arg_attr_name="total", val_attr_name="month")',
       "How much did I spend online in each month of %year%?",
       "What did I buy online in %year%, grouped by month?",
       "In which month did I make each online purchase of %year%?",
       "How much did each thing I bought online in %year% cost?",
       "What did I buy online in %year%?", _Q_BUY),
    _g("shop_during_trip",
       f'SUM(l=JOIN(l1=EXTRACT(l={_BUY}, attr_names=["price"], attr_types=[float]), '
       f'l2=RETRIEVE(query="I went on a trip to %trip_city%"), condition={_IN_TRIP}), attr_name="price")',
       "Which online purchases did I make during my trips to %trip_city%?",
       "How much did each thing I bought online cost?", _Q_BUY,
       "Which trips to %trip_city% did I go on?"),
    _g("shop_items_year",
       f'SUM(l=EXTRACT(l=FILTER(l={_BUY}, filter={_YEAR}), attr_names=["product_quantity"], attr_types=[int]), '
       'attr_name="product_quantity")',
       "How many items did each online purchase of %year% contain?",
       "What did I buy online in %year%?", _Q_BUY),
    # ------------------------------------------------------------------ workouts
    _g("workout_distance_since_job",
       f'SUM(l=FILTER(l=EXTRACT(l={_WORKOUT}, attr_names=["workout_type", "distance"], attr_types=[str, float]), '
       'filter=lambda attr: attr["workout_type"] == {distance_workout} and attr["start_date"] >= '
       'MIN(l=RETRIEVE(query="I started working at %company%"), attr_name="start_date")), attr_name="distance")',
       "Which %distance_workout% workouts did I do since I started working at %company%, and how far did I go?",
       "What type and distance did each of my workouts have?", _Q_WORKOUT,
       "When did I start working at %company%?",
       "Which events mention that I started working at %company%?"),
    _g("workout_recent_max_hr",
       f'ARGMAX(l=EXTRACT(l={_WORKOUT}, attr_names=["maximum_heart_rate"], attr_types=[int]), '
       'arg_attr_name="start_datetime", val_attr_name="maximum_heart_rate")',
       "What was the maximum heart rate of each of my workouts?", _Q_WORKOUT),
    _g("workout_high_hr_year",
       f'APPLY(l=FILTER(l=EXTRACT(l={_WORKOUT}, attr_names=["maximum_heart_rate"], attr_types=[int]), '
       'filter=lambda attr: attr["start_date"].year == {year} and attr["maximum_heart_rate"] > 170), fct=len)',
       "Which workouts in %year% had a maximum heart rate above 170?",
       "What was the maximum heart rate of each of my workouts?", _Q_WORKOUT),
    _g("workout_january_distance",
       f'SUM(l=FILTER(l=EXTRACT(l={_WORKOUT}, attr_names=["workout_type", "distance"], attr_types=[str, float]), '
       'filter=lambda attr: attr["workout_type"] == {distance_workout} and attr["start_date"].year == {year} '
       'and attr["start_date"].month == 1), attr_name="distance")',
       "Which %distance_workout% workouts did I do in January %year%, and how far did I go?",
       "What type and distance did each of my workouts have?", _Q_WORKOUT),
    _g("workout_avg_duration",
       f'AVG(l=FILTER(l=EXTRACT(l={_WORKOUT}, attr_names=["workout_type", "duration"], attr_types=[str, float]), '
       'filter=lambda attr: attr["workout_type"] == {workout_type}), attr_name="duration")',
       "How many minutes did each of my %workout_type% sessions last?",
       "What type and duration did each of my workouts have?", _Q_WORKOUT),
    _g("workout_top_type_year",
       _argmax_count(f'EXTRACT(l=FILTER(l={_WORKOUT}, filter={_YEAR}), attr_names=["workout_type"], '
                     'attr_types=[str])', "workout_type", "workouts"),
       "How many workouts of each kind did I do in %year%?",
       "Which workouts did I do in %year%, grouped by kind?",
       "What kind was each workout I did in %year%?",
       "Which workouts did I do in %year%?", _Q_WORKOUT),
    _g("workout_longest_distance_date",
       f'ARGMAX(l=FILTER(l=EXTRACT(l={_WORKOUT}, attr_names=["workout_type", "distance"], '
       'attr_types=[str, float]), filter=lambda attr: attr["workout_type"] == {distance_workout}), '
       'arg_attr_name="distance", val_attr_name="start_date")',
       "Which %distance_workout% workouts did I do, and how far did I go?",
       "What type and distance did each of my workouts have?", _Q_WORKOUT),
    _g("workout_weekday",
       _argmax_count(_weekday(_WORKOUT), "weekday", "workouts"),
       "How many workouts did I do on each day of the week?",
       "Which workouts did I do, grouped by day of the week?",
       "On which day of the week did I do each workout?", _Q_WORKOUT),
    _g("workout_minutes_this_year",
       f'SUM(l=EXTRACT(l=FILTER(l={_WORKOUT}, filter=lambda attr: attr["start_date"].year == date.today().year), '
       'attr_names=["duration"], attr_types=[float]), attr_name="duration")',
       "How many minutes did each workout I did this year last?",
       "Which workouts did I do this year?", _Q_WORKOUT),
    # ------------------------------------------------------------------ meet-ups
    _g("meet_friend_count",
       'APPLY(l=RETRIEVE(query="I met %friend_name%"), fct=len)',
       "Which meet-ups did I have with %friend_name%?"),
    _g("meet_friend_place",
       'APPLY(l=RETRIEVE(query="I met %friend_name% at a %location_type%"), fct=len)',
       "Which meet-ups did I have with %friend_name% at a %location_type%?"),
    _g("meet_place_year",
       f'APPLY(l=FILTER(l=RETRIEVE(query="I met someone at a %location_type%"), filter={_YEAR}), fct=len)',
       "Which meet-ups at a %location_type% did I have in %year%?",
       "Which meet-ups at a %location_type% did I have?"),
    _g("meet_last_with",
       'MAX(l=RETRIEVE(query="I met %friend_name%"), attr_name="start_date")',
       "Which meet-ups did I have with %friend_name%?"),
    # ------------------------------------------------------------------ doctors
    _g("doctor_weekday",
       _argmax_count(_weekday(_DOCTOR), "weekday", "appointments"),
       "How many doctor appointments did I have on each day of the week?",
       "Which doctor appointments did I have, grouped by day of the week?",
       "On which day of the week was each doctor appointment?",
       "Which doctor appointments did I have?"),
    _g("doctor_type_since",
       'APPLY(l=FILTER(l=RETRIEVE(query="I had a %doctor_type% appointment"), '
       'filter=lambda attr: attr["start_date"].year >= {year}), fct=len)',
       "Which %doctor_type% appointments have there been since %year%?",
       "Which %doctor_type% appointments have there been?"),
    _g("doctor_last",
       'MAX(l=RETRIEVE(query="I had a %doctor_type% appointment"), attr_name="start_date")',
       "Which %doctor_type% appointments have there been?"),
    _g("doctor_vet_pet",
       'APPLY(l=RETRIEVE(query="I took %pet_name% to the vet"), fct=len)',
       "Which vet appointments did %pet_name% have?"),
    _g("doctor_kid_visits",
       f'APPLY(l=FILTER(l=RETRIEVE(query="%kid_name% saw the paediatrician"), filter={_YEAR}), fct=len)',
       "Which paediatrician visits did %kid_name% have in %year%?",
       "Which paediatrician visits did %kid_name% have?"),
    # ------------------------------------------------------------------ travel and milestones
    _g("trip_count_since_move",
       f'APPLY(l=FILTER(l={_TRIP}, filter=lambda attr: attr["start_date"] >= '
       'MAX(l=RETRIEVE(query="I moved to %residence_city%"), attr_name="start_date")), fct=len)',
       "Which trips did I take since I moved to %residence_city%?", _Q_TRIP,
       "When did I move to %residence_city%?",
       "Which events mention that I moved to %residence_city%?"),
    _g("trip_days_year",
       f'SUM(l=MAP(l=FILTER(l={_TRIP}, filter={_YEAR}), fct=lambda attr: (attr["end_date"] - '
       'attr["start_date"]).days + 1, res_name="days"), attr_name="days")',
       "How many days did each trip I started in %year% last?",
       "Which trips did I start in %year%?", _Q_TRIP),
    _g("milestone_kid_born",
       'MIN(l=RETRIEVE(query="%kid_name% was born"), attr_name="start_date")',
       "Which events mention the birth of %kid_name%?"),
    _g("milestone_jobs_since",
       'APPLY(l=FILTER(l=RETRIEVE(query="I started a new job"), '
       'filter=lambda attr: attr["start_date"].year >= {year}), fct=len)',
       "Which new jobs did I start since %year%?",
       "Which new jobs did I start?"),
    _g("milestone_move_date",
       'MAX(l=RETRIEVE(query="I moved to %residence_city%"), attr_name="start_date")',
       "Which events mention that I moved to %residence_city%?"),
    # ------------------------------------------------------------------ across sources
    _g("multi_weekend_events",
       f'APPLY(l=FILTER(l=APPLY(l={_DOCTOR}, fct=lambda l: l + RETRIEVE(query="I met someone")), '
       'filter=lambda attr: attr["start_date"].year == {year} and attr["start_date"].weekday() >= 5), fct=len)',
       "Which doctor appointments and meet-ups fell on a weekend in %year%?",
       "Which doctor appointments and meet-ups did I have?",
       "Which doctor appointments did I have?", "Which meet-ups did I have?"),
    _g("multi_movies_or_series",
       f'APPLY(l=EXTRACT(l=FILTER(l={_MOVIE}, filter={_YEAR}), attr_names=["duration"], attr_types=[float]), '
       'fct=lambda l: "movies" if sum(attr["duration"] for attr in l) > SUM(l=EXTRACT(l=FILTER(l=' + _TV
       + ', filter=' + _YEAR + '), attr_names=["duration"], attr_types=[float]), attr_name="duration") '
       'else "TV series")',
       "How many minutes did each movie I watched in %year% last?",
       "Which movies did I watch in %year%?", _Q_MOVIE,
       "How many minutes of TV series did I watch in %year%?",
       "How many minutes did each TV series episode I watched in %year% last?",
       "Which TV series episodes did I watch in %year%?", _Q_TV),
    _g("multi_busiest_month",
       _argmax_count(f'MAP(l=FILTER(l=APPLY(l={_DOCTOR}, fct=lambda l: l + RETRIEVE(query="I met someone") + '
                     f'{_TRIP}), filter={_YEAR}), fct=lambda attr: attr["start_date"].strftime("%B"), '
                     'res_name="month")', "month", "events"),
       "How many appointments, meet-ups and trips did I have in each month of %year%?",
       "Which appointments, meet-ups and trips did I have in %year%, grouped by month?",
       "In which month was each appointment, meet-up and trip of %year%?",
       "Which appointments, meet-ups and trips did I have in %year%?",
       "Which doctor appointments, meet-ups and trips did I have?",
       "Which doctor appointments did I have?", "Which meet-ups did I have?", _Q_TRIP),
    _g("multi_workouts_on_trips",
       f'APPLY(l=JOIN(l1={_WORKOUT}, l2={_TRIP}, condition={_IN_TRIP}), fct=len)',
       "Which workouts did I do during one of my trips?", _Q_WORKOUT, _Q_TRIP),
    _g("multi_songs_on_birthday",
       f'APPLY(l=JOIN(l1={_SONG}, l2=FILTER(l=RETRIEVE(query="I celebrated my birthday"), filter={_YEAR}), '
       'condition="i1.start_date == i2.start_date"), fct=len)',
       "Which songs did I play on the day of my birthday celebration in %year%?", _Q_SONG,
       "When did I celebrate my birthday in %year%?",
       "When did I celebrate my birthday?"),
    _g("multi_episodes_after_meetups",
       f'APPLY(l=FILTER(l={_TV}, filter=lambda attr: attr["start_date"] in '
       'MAP(l=RETRIEVE(query="I met %friend_name%"), fct=lambda attr: attr["start_date"])), fct=len)',
       "Which TV series episodes did I watch on days when I met %friend_name%?", _Q_TV,
       "On which days did I meet %friend_name%?",
       "Which meet-ups did I have with %friend_name%?"),
)

#: template_id -> gold tree template.
GOLD_TREES: dict[str, GoldTree] = {t.template_id: t for t in _TREES}

_NEEDS = "its answer needs a canonical-only key that no observable event carries as a key"
#: Templates without a gold tree, and why (the lookup extractor cannot produce their answers).
SKIPPED: dict[str, str] = {
    "tv_genre_hours_last_year": "genre is not in tvseries_stream events (nor in any text)",
    "movie_genre_year": "genre is not in movie_stream events",
    "movie_top_genre": "genre is not in movie_stream events",
    "music_top_genre_last_year": "genre is not in music_stream events",
    "shop_category_orders": "category is not in online_purchase events",
    "shop_avg_price": "category is not in online_purchase events",
    "shop_top_category": "category is not in online_purchase events",
    "meet_most_met_last_year": f"{_NEEDS}: participants (only in calendar/mail/post text)",
    "meet_top_cuisine": f"{_NEEDS}: cuisine (only in text)",
    "meet_restaurant_place": f"{_NEEDS}: location (calendar 'location' is 'place, city'; mails have none)",
    "trip_countries_year": f"{_NEEDS}: destination_country (calendar 'location' is 'city, country')",
    "trip_longest": f"{_NEEDS}: destination_city (only in text)",
    "trip_highlights": f"{_NEEDS}: highlight (only in post text)",
    "trip_top_region": f"{_NEEDS}: region (not mentioned at all)",
    "trip_companions": f"{_NEEDS}: companions (only in text)",
    "trip_first_of_year": f"{_NEEDS}: destination_city (only in text)",
    "celebration_location": f"{_NEEDS}: location (calendar 'location' is 'place, city')",
    "celebration_birthday_guests": f"{_NEEDS}: participants (only in text)",
}

_TEMPLATES: dict[str, QuestionTemplate] = {t.template_id: t for t in TEMPLATES}


# -- template variables ------------------------------------------------------------------------------------
def _pattern(text: str) -> re.Pattern[str]:
    """An anchored regex for a template text whose ``{name}`` fields capture their values."""
    parts = []
    for literal, name, _, _ in string.Formatter().parse(text):
        parts.append(re.escape(literal))
        if name:
            parts.append(f"(?P<{name}>.+?)")
    return re.compile("^" + "".join(parts) + "$", re.DOTALL)


def template_bindings(question: Mapping[str, Any]) -> dict[str, Any]:
    """The template variables of a generated question, recovered from its text.

    Question dicts do not store their binding; the question text is the template with the values
    formatted in, so an anchored regex gives them back. The result is checked by re-instantiating the
    template (question and, when present, SQL), so an ambiguous parse raises instead of misleading.
    """
    from convohub.perqa.questions import instantiate

    template = _TEMPLATES[question["template_id"]]
    if not template.variables:
        return {}
    m = _pattern(template.question).match(question["question"])
    if m is None:
        raise ValueError(f"question {question['question']!r} does not fit template {template.template_id}")
    binding: dict[str, Any] = {k: int(v) if k in INT_VARIABLES else v for k, v in m.groupdict().items()}
    missing = set(template.variables) - set(binding)
    if missing:
        raise ValueError(f"template {template.template_id}: variables {sorted(missing)} are not in the question")
    text, sql = instantiate(template, binding)
    if text != question["question"] or ("sql_query" in question and sql != question["sql_query"]):
        raise ValueError(f"cannot recover the variables of {question['question']!r} unambiguously")
    return binding


def _fill(text: str, binding: Mapping[str, Any]) -> str:
    """Fill ``%name%`` (raw text inside a string literal) and ``{name}`` (a literal) slots."""
    def raw(m: re.Match[str]) -> str:
        name = m.group(1)
        return json.dumps(str(binding[name]), ensure_ascii=False)[1:-1] if name in binding else m.group(0)

    out = _SLOT.sub(raw, text)
    for name, value in binding.items():
        literal = str(value) if isinstance(value, int) else json.dumps(str(value), ensure_ascii=False)
        out = out.replace("{" + name + "}", literal)
    return out


def _text(text: str, binding: Mapping[str, Any]) -> str:
    """Fill ``%name%`` slots of a sub-question with plain text."""
    return _SLOT.sub(lambda m: str(binding.get(m.group(1), m.group(0))), text)


def gold_template(question: Mapping[str, Any]) -> GoldTree | None:
    """The gold tree template of a question's template, None when the template has none."""
    return GOLD_TREES.get(question.get("template_id", ""))


def gold_tree(question: Mapping[str, Any]) -> str | None:
    """The instantiated gold tree (canonical text) for a generated question, None without a template."""
    gold = gold_template(question)
    if gold is None:
        return None
    return parse_tree(_fill(gold.tree, template_bindings(question))).text


def gold_tree_or_none(question: Mapping[str, Any]) -> str | None:
    """:func:`gold_tree`, or None also when the question's text does not fit its template (a paraphrase,
    an authors' question): callers that score or derive data skip such questions instead of failing."""
    try:
        return gold_tree(question)
    except (KeyError, ValueError):
        return None


# -- QUD decomposition ------------------------------------------------------------------------------------
def _children(node: OpNode) -> list[OpNode]:
    """Operator children in pre-order position: list arguments, then operators nested in lambdas."""
    out: list[OpNode] = []
    for v in node.args.values():
        if isinstance(v, OpNode):
            out.append(v)
    for v in node.args.values():
        if isinstance(v, Function):
            out.extend(s for s in v.subtrees if isinstance(s, OpNode))
    return out


def _preorder(node: OpNode) -> list[OpNode]:
    out = [node]
    for child in _children(node):
        out.extend(_preorder(child))
    return out


def _labels(question: Mapping[str, Any]) -> dict[str, str]:
    """Subtree text -> sub-question for the question's gold tree (the root gets the question itself)."""
    gold = gold_template(question)
    if gold is None:
        raise KeyError(f"template {question.get('template_id')!r} has no gold tree")
    binding = template_bindings(question)
    nodes = _preorder(parse_tree(_fill(gold.tree, binding)))  # type: ignore[arg-type]
    subs = [question["question"], *(_text(s, binding) for s in gold.sub_questions)]
    if len(subs) != len(nodes):
        raise ValueError(f"template {gold.template_id}: {len(nodes) - 1} operators below the root but "
                         f"{len(subs) - 1} sub-questions")
    labels: dict[str, str] = {}
    for node, sub in zip(nodes, subs, strict=True):
        if labels.setdefault(node.text, sub) != sub:
            raise ValueError(f"template {gold.template_id}: one subtree has two sub-questions")
    if len(set(labels.values())) != len(labels):
        raise ValueError(f"template {gold.template_id}: two subtrees share a sub-question")
    return labels


def _step(node: OpNode, labels: Mapping[str, str]) -> OpNode:
    """``node`` with every operator child replaced by its ``{{ QU(question=...) }}`` placeholder."""
    def hole(child: Any) -> Any:
        return Placeholder(labels[child.text]) if isinstance(child, OpNode) else child

    args: dict[str, Any] = {}
    for k, v in node.args.items():
        if isinstance(v, OpNode):
            v = hole(v)
        elif isinstance(v, Function) and v.subtrees:
            v = v.with_subtrees(tuple(hole(s) for s in v.subtrees))
        args[k] = v
    return OpNode(node.op, args)


def decompose(tree: str | OpNode, question: Mapping[str, Any]) -> list[tuple[str, str]]:
    """QUD steps of ``tree`` for ``question``: ``[(sub_question, step_text), ...]`` in pre-order.

    The first pair is (the question, the root operator); each step is one operator whose operator
    arguments are ``{{ QU(question="...") }}`` placeholders, and every placeholder's question is the
    first element of a later pair, so :func:`convohub.reqap.engine.parse.assemble` rebuilds the tree. Sub-question
    texts come from the question's gold template; a subtree the gold tree does not contain raises KeyError.
    """
    labels = _labels(question)
    node = parse_tree(tree) if isinstance(tree, str) else tree
    if not isinstance(node, OpNode):
        raise ValueError("a tree to decompose must not be a bare placeholder")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for n in _preorder(node):
        if n.text not in labels:
            raise KeyError(f"subtree {n.text[:80]!r} is not part of the gold tree of {question['template_id']}")
        if n.text in seen:
            continue
        seen.add(n.text)
        out.append((labels[n.text], _step(n, labels).text))
    return out


# -- oracle retrieval -------------------------------------------------------------------------------------
def _query_patterns() -> list[tuple[re.Pattern[str], str, dict[str, str]]]:
    """Compiled QUERY_INTENTS, most literal text first (see the table's comment)."""
    out = []
    for pattern, (kind, where) in QUERY_INTENTS.items():
        parts, last = [], 0
        for m in _SLOT.finditer(pattern):
            parts.append(re.escape(pattern[last:m.start()]) + f"(?P<{m.group(1)}>.+?)")
            last = m.end()
        parts.append(re.escape(pattern[last:]))
        literal = len(_SLOT.sub("", pattern))
        out.append((literal, re.compile("^" + "".join(parts) + "$", re.DOTALL), kind, where))
    out.sort(key=lambda p: -p[0])
    return [(rx, kind, where) for _, rx, kind, where in out]


_QUERY_PATTERNS = _query_patterns()


def intent_of(query: str) -> Intent | None:
    """The :class:`Intent` of a RETRIEVE query written with the :data:`QUERY_INTENTS` patterns."""
    for rx, kind, where in _QUERY_PATTERNS:
        m = rx.match(query)
        if m is None:
            continue
        values = m.groupdict()
        conditions = []
        for key, value in where.items():
            slot = _SLOT.fullmatch(value)
            conditions.append((key, values[slot.group(1)], True) if slot else (key, value, False))
        return Intent(kind, tuple(conditions))
    return None


class OracleIndex:
    """Resolves intents to observable event ids for one persona (the rules are in the module docstring).

    Built once per persona; resolved intents are cached, so many questions share the work.
    """

    def __init__(self, observable: Iterable[Mapping[str, Any]], canonical: Iterable[Mapping[str, Any]]) -> None:
        self.canonical = {str(e["id"]): e for e in canonical}
        self.structured: dict[str, list[str]] = {}
        self.verbalised: dict[str, list[tuple[str, Mapping[str, Any], frozenset[str]]]] = {}
        for o in observable:
            source = o["event_type"]
            if source in STRUCTURED_KINDS:
                self.structured.setdefault(source, []).append(str(o["id"]))
                continue
            c = self.canonical.get(str(o.get("structured_event_id")))
            if c is None:
                continue
            mentioned = o.get("properties_mentioned") or []
            if isinstance(mentioned, str):
                mentioned = json.loads(mentioned)
            self.verbalised.setdefault(c["event_type"], []).append((str(o["id"]), c, frozenset(mentioned)))
        self._cache: dict[Intent, list[str]] = {}
        self.unknown: list[str] = []

    def resolve(self, intent: Intent) -> list[str]:
        if intent not in self._cache:
            self._cache[intent] = self._resolve(intent)
        return self._cache[intent]

    def _resolve(self, intent: Intent) -> list[str]:
        if intent.kind in STRUCTURED_KINDS:
            if intent.where:
                raise ValueError(f"structured kind {intent.kind} takes no canonical conditions")
            return list(self.structured.get(intent.kind, []))
        out = []
        for oid, c, mentioned in self.verbalised.get(intent.kind, []):
            data = c["event_data"]
            if all(_matches(data.get(key), value) and (not gated or key in mentioned)
                   for key, value, gated in intent.where):
                out.append(oid)
        return out

    def ids(self, query: str, store: Any = None) -> list[str]:
        """Event ids for a query text; unknown queries return nothing and are recorded in ``unknown``."""
        intent = intent_of(query)
        if intent is None:
            self.unknown.append(query)
            return []
        return self.resolve(intent)


def _matches(actual: Any, wanted: str) -> bool:
    if isinstance(actual, list):
        return wanted in [str(a) for a in actual]
    return actual is not None and str(actual) == wanted


def oracle_retriever(index: OracleIndex) -> OracleRetriever:
    """An :class:`OracleRetriever` answering every :data:`QUERY_INTENTS` query from ``index``."""
    return OracleRetriever(index.ids)


def visible_canonical(canonical: Sequence[Mapping[str, Any]],
                      observable: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Canonical events minus stream/purchase/workout events seen only as text (no structured export).

    Gold SQL over these is the answer a perfect tree can reach with the lookup extractor; a question
    whose gold answer differs here is one the lookup extractor cannot answer exactly.
    """
    exported = {str(o["structured_event_id"]) for o in observable if o["event_type"] in STRUCTURED_KINDS}
    return [e for e in canonical if e["event_type"] not in STRUCTURED_KINDS or str(e["id"]) in exported]


class GoldTreeDecomposer:
    """ORACLE decomposer: the gold tree of the question's PerQA template (see :mod:`convohub.reqap.data.gold`).

    Questions registered with :meth:`add` (dicts with ``question`` and ``template_id``, and ``sql_query``
    when known, which disambiguates the variables) are looked up by text; any other text is matched against
    every gold template's question pattern, so free-text questions in the Space work when they follow a
    template. Yields at most one tree per matching template.
    """

    name = "gold-tree-oracle"

    def __init__(self, questions: Iterable[Mapping[str, Any]] = ()) -> None:
        self._known: dict[str, Mapping[str, Any]] = {}
        for q in questions:
            self.add(q)

    def add(self, question: Mapping[str, Any]) -> None:
        self._known[str(question["question"]).strip()] = question

    def tree_for(self, question: Mapping[str, Any]) -> str | None:
        """The gold tree of one question dict, None when its template has none or does not fit."""

        return gold_tree_or_none(question)

    def candidates(self, question: str, check_time: TimeCheck | None = None) -> Iterator[str]:
        from convohub.perqa.templates import TEMPLATES

        text = question.strip()
        if text in self._known:
            tree = self.tree_for(self._known[text])
            if tree is not None:
                yield tree
            return
        seen: set[str] = set()
        for template in TEMPLATES:
            if template.template_id not in GOLD_TREES:
                continue
            if not template.variables and text.lower() != template.question.lower():
                continue  # gold_tree() checks the text only where there are variables to recover
            tree = self.tree_for({"template_id": template.template_id, "question": text})
            if tree is not None and tree not in seen:
                seen.add(tree)
                yield tree
