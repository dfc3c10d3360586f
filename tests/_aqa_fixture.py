"""A small WildChat-AQA dataset folder that follows /work/brief/AQA_CONTRACT.md (the dataset contract).

Built in well under a second with convohub.hub's writer, so it loads with plain ``load_dataset(folder,
config)``: 48 conversations of 4 users from 3 countries over 3 weeks of May 2023, each on one of 6 topics
whose summary and turns name the topic's words (so retrieval can find them), and 6 questions whose options,
option weights and supports are computed from those rows as the construction pipeline computes them
(options = the most frequent target values among the matching conversations, topped up from the target's
global vocabulary to exactly 10, then shuffled so that no ranker profits from the options' order; weight =
frequency among the matching conversations; support = the hashes of the matching conversations). Shared by the AQA answering tests, the Space tests and the Space benchmark.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

DATASET_NAME = "wildchat-aqa"
START = datetime(2023, 5, 1, 9, 0, 0)  # a Monday
USERS = {"lostclasp37": "France", "toughcue8": "France", "brightowl12": "Germany", "quietfox5": "Brazil"}
LANGUAGE = {"France": "French", "Germany": "German", "Brazil": "Portuguese"}
#: topic -> (subtopic, keyword type or None, keyword, what users ask, words of the answer)
TOPICS: dict[str, tuple[str, str | None, str, str, str]] = {
    "Software and Programming": ("Python scripting", "Programming Language", "python",
                                 "How do I sort a list of dictionaries by a key in Python?",
                                 "Use sorted() with a key function; the Python code is short."),
    "Cooking and Recipes": ("Baking", None, "bread",
                            "Give me a simple recipe for sourdough bread at home.",
                            "Mix flour, water, salt and starter, then bake the bread."),
    "Travel and Tourism": ("Trip planning", None, "lisbon",
                           "Plan a three-day trip to Lisbon with museums and food.",
                           "Day one: the old town of Lisbon; day two: museums; day three: the coast."),
    "Creative Writing": ("Fan fiction", "Video Games", "zelda",
                         "Write a short story where Link from Zelda meets a dragon.",
                         "Link raised his shield as the dragon circled the castle of Zelda."),
    "Health and Fitness": ("Running", None, "marathon",
                           "How should I train for my first marathon in twelve weeks?",
                           "Build mileage slowly, run long on weekends and rest before the marathon."),
    "Finance": ("Personal budgeting", None, "budget",
                "Help me make a monthly budget to save money for a car.",
                "List income and expenses, set a savings goal and track the budget weekly."),
}
#: what each user mostly asks about (the first topic twice as often), so aggregates differ by user/country
PREFERENCES = {
    "lostclasp37": ["Cooking and Recipes", "Cooking and Recipes", "Travel and Tourism", "Finance"],
    "toughcue8": ["Software and Programming", "Software and Programming", "Cooking and Recipes", "Finance"],
    "brightowl12": ["Software and Programming", "Software and Programming", "Creative Writing", "Health and Fitness"],
    "quietfox5": ["Creative Writing", "Creative Writing", "Health and Fitness", "Travel and Tourism"],
}
#: top-up vocabulary per target type (the construction pipeline draws from the global distribution)
FILLERS = {
    "label_level_1": [*TOPICS, "Education", "Science", "Entertainment", "Business"],
    "label_level_2": [t[0] for t in TOPICS.values()] + ["Homework help", "Job interviews", "Movie reviews",
                                                        "Stock trading"],
    "country": ["France", "Germany", "Brazil", "United States", "China", "Russia", "India", "Japan", "Canada",
                "Spain", "Italy"],
    "language": ["French", "German", "Portuguese", "English", "Chinese", "Russian", "Spanish", "Italian",
                 "Japanese", "Korean"],
    "user_name": [*USERS, "greenlamp2", "oddstone9", "calmriver4", "fastkite1", "boldpine6", "softmoon3",
                  "wildreed8"],
    "keywords_aggregated": ["python", "zelda", "javascript", "c++", "pokemon", "minecraft", "java", "rust",
                            "harry potter", "sql"],
}
N_PER_USER = 12


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def conversations(seed: int = 0) -> list[dict[str, Any]]:
    """The corpus rows (config ``conversations``), in timestamp order."""
    rng = random.Random(seed)
    rows = []
    for user, country in USERS.items():
        for i in range(N_PER_USER):
            topic = PREFERENCES[user][i % len(PREFERENCES[user])]
            subtopic, keyword_type, keyword, ask, reply = TOPICS[topic]
            when = START + timedelta(days=rng.randrange(21), hours=rng.randrange(10), minutes=rng.randrange(60))
            monday = when - timedelta(days=when.weekday())
            conversation_id = f"{user}-{i}"
            keywords = [{"keyword_type": keyword_type or "technology", "value": keyword,
                         "description": f"the {keyword} the user asks about"}]
            rows.append({
                "conversation_id": conversation_id, "hash": _hash(conversation_id),
                "user_name": user, "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S"),
                "time_day": when.strftime("%Y-%m-%d"), "time_week": monday.strftime("%Y-%m-%d"),
                "time_month": when.strftime("%Y-%m"), "country": country, "reigon": "",
                "language": LANGUAGE[country], "token_count": 40,
                "conversation": [{"role": "user", "content": ask}, {"role": "assistant", "content": reply}],
                "summary": f"The user asks about {topic.lower()}: {ask.rstrip('?.').lower()}.",
                "intent": f"Get help with {subtopic.lower()}.",
                "keywords": keywords,
                "keywords_aggregated": ([{"keyword_type": keyword_type, "value": keyword}] if keyword_type else []),
                "label_level_1": [topic], "label_level_2": [subtopic], "labeller": "fixture",
            })
    return sorted(rows, key=lambda r: r["timestamp"])


def _values(row: Mapping[str, Any], field: str) -> list[str]:
    value = row[field]
    if field == "keywords_aggregated":
        return [k["value"] for k in value]
    return list(value) if isinstance(value, list) else [str(value)]


#: (question, condition types, condition values, target type, keyword type, style)
QUESTIONS: list[tuple[str, list[str], list[str], str, str | None, str]] = [
    ("Which topics did users from France talk about most with the chatbot?",
     ["country"], ["France"], "label_level_1", None, "direct"),
    ("From which countries did users chat most in the week starting 2023-05-08?",
     ["time_week"], ["2023-05-08"], "country", None, "direct"),
    ("What subtopics did the user brightowl12 ask about most often?",
     ["user_name"], ["brightowl12"], "label_level_2", None, "direct"),
    ("Which users asked the most questions about cooking and recipes?",
     ["label_level_1"], ["Cooking and Recipes"], "user_name", None, "descriptive"),
    ("Which programming languages or video games came up most in conversations?",
     [], [], "keywords_aggregated", "Programming Language", "descriptive"),
    ("What did German-speaking users from Germany ask about most, by topic?",
     ["country", "language"], ["Germany", "German"], "label_level_1", None, "descriptive"),
]


def questions(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The question rows (config ``questions``), computed from ``rows``."""
    out = []
    for text, types, values, target, keyword_type, style in QUESTIONS:
        matching = [r for r in rows if all(v in _values(r, t) for t, v in zip(types, values, strict=True))]
        counts = Counter(v for r in matching for v in _values(r, target))
        options = [v for v, _ in counts.most_common(10)]
        options += [v for v in FILLERS[target] if v not in options][: 10 - len(options)]
        random.Random(text).shuffle(options)  # the authors' options are not in gold order either
        total = sum(counts.values())
        out.append({
            "hash": _hash(text), "question": text, "style": style, "condition_type": types,
            "condition_value": values, "target_type": target, "keywords_type": keyword_type,
            "options": options, "option_weights": [counts.get(o, 0) / total for o in options],
            "support": [r["hash"] for r in matching], "phrased_by": "fixture",
        })
    return out


COUNTRIES = ["France", "Germany", "Brazil", "United States", "China", "Russia", "India", "Japan"]
WORDS = ["amber", "brisk", "cedar", "dusty", "ember", "frost", "glade", "hazel", "ivory", "jolly"]


def scaled_conversations(n_users: int = 40, per_user: int = 13, seed: int = 0) -> list[dict[str, Any]]:
    """A larger corpus of the same kind (measurements: about the size of the release's tiny profile): users
    with random names, countries and topic preferences over six weeks."""
    rng = random.Random(seed)
    topics = list(TOPICS)
    rows = []
    for u in range(n_users):
        user = f"{rng.choice(WORDS)}{rng.choice(WORDS)}{u}"
        country = COUNTRIES[min(int(rng.expovariate(0.5)), len(COUNTRIES) - 1)]
        liked = rng.sample(topics, 3)
        for i in range(per_user):
            topic = liked[0] if rng.random() < 0.5 else rng.choice(topics)
            subtopic, keyword_type, keyword, ask, reply = TOPICS[topic]
            when = START + timedelta(days=rng.randrange(42), hours=rng.randrange(10), minutes=rng.randrange(60))
            monday = when - timedelta(days=when.weekday())
            conversation_id = f"{user}-{i}"
            rows.append({
                "conversation_id": conversation_id, "hash": _hash(conversation_id), "user_name": user,
                "timestamp": when.strftime("%Y-%m-%dT%H:%M:%S"), "time_day": when.strftime("%Y-%m-%d"),
                "time_week": monday.strftime("%Y-%m-%d"), "time_month": when.strftime("%Y-%m"), "country": country,
                "reigon": "", "language": LANGUAGE.get(country, "English"), "token_count": 40,
                "conversation": [{"role": "user", "content": ask}, {"role": "assistant", "content": reply}],
                "summary": f"The user asks about {topic.lower()}: {ask.rstrip('?.').lower()}.",
                "intent": f"Get help with {subtopic.lower()}.",
                "keywords": [{"keyword_type": keyword_type or "technology", "value": keyword, "description": keyword}],
                "keywords_aggregated": ([{"keyword_type": keyword_type, "value": keyword}] if keyword_type else []),
                "label_level_1": [topic], "label_level_2": [subtopic], "labeller": "fixture",
            })
    return sorted(rows, key=lambda r: r["timestamp"])


def scaled_questions(rows: Sequence[Mapping[str, Any]], limit: int = 40) -> list[dict[str, Any]]:
    """Questions over :func:`scaled_conversations` from the same construction rule (at least 10 matches)."""
    specs = []
    for country in sorted({r["country"] for r in rows}):
        specs.append((f"Which topics did users from {country} ask the chatbot about most?",
                      ["country"], [country], "label_level_1"))
    for week in sorted({r["time_week"] for r in rows}):
        specs.append((f"From which countries did users chat most in the week starting {week}?",
                      ["time_week"], [week], "country"))
    for topic in TOPICS:
        specs.append((f"Which users asked the most about {topic.lower()}?", ["label_level_1"], [topic], "user_name"))
    users = Counter(r["user_name"] for r in rows)
    for user, _ in users.most_common(10):
        specs.append((f"What subtopics did the user {user} ask about most often?", ["user_name"], [user],
                      "label_level_2"))
    out = []
    for text, types, values, target in specs:
        matching = [r for r in rows if all(v in _values(r, t) for t, v in zip(types, values, strict=True))]
        if len(matching) < 10:
            continue
        counts = Counter(v for r in matching for v in _values(r, target))
        vocabulary = sorted({v for r in rows for v in _values(r, target)}) + FILLERS.get(target, [])
        options = [v for v, _ in counts.most_common(10)]
        options += [v for v in dict.fromkeys(vocabulary) if v not in options][: 10 - len(options)]
        random.Random(text).shuffle(options)
        total = sum(counts.values())
        out.append({"hash": _hash(text), "question": text, "style": "direct", "condition_type": types,
                    "condition_value": values, "target_type": target, "keywords_type": None, "options": options,
                    "option_weights": [counts.get(o, 0) / total for o in options],
                    "support": [r["hash"] for r in matching], "phrased_by": "fixture"})
    return out[:limit]


def build_fixture(root: Path, *, seed: int = 0, namespace: str = "convohub", scaled: bool = False,
                  extra_questions: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None) -> Path:
    """Write the dataset folder under ``root`` (a hub root) and return it; ``scaled``: the larger corpus and
    its ~40 questions instead of the 48 conversations and 6 questions."""
    import datasets

    from convohub.hub import DatasetCardInfo, HubTarget, write_dataset

    rows = scaled_conversations(seed=seed) if scaled else conversations(seed)
    qs = scaled_questions(rows) if scaled else questions(rows)
    if extra_questions is not None:
        qs += extra_questions(rows)
    summaries = [{k: v for k, v in r.items() if k != "conversation"} for r in rows]
    configs = {
        "conversations": {"train": datasets.Dataset.from_list(rows)},
        "summaries": {"train": datasets.Dataset.from_list(summaries)},
        "questions": {"test": datasets.Dataset.from_list(qs)},
        "questions_subset": {"test": datasets.Dataset.from_list(qs[::2])},
    }
    card = DatasetCardInfo(pretty_name="WildChat-AQA (test fixture)", license="odc-by",
                           description="A hand-made fixture following the WildChat-AQA dataset contract.")
    return write_dataset(HubTarget(Path(root), namespace=namespace), DATASET_NAME, configs, card,
                         default_config="questions")
