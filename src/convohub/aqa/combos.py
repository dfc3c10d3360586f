"""The 73 condition/target combinations of WildChat-AQA's questions (paper Table 8), with the paper's counts.

A combination names 0-3 condition attributes and one target attribute; the paper enumerated every
combination of up to three conditions and kept the 73 that read naturally. The short names are Table 8's;
each maps to a field of the conversation records. How several conditions combine (see
:mod:`convohub.aqa.proposal`): conditions on different attributes must all hold; several values of the
list-valued attributes (topics, subtopics, keywords) must all be present (the authors' ``$all``); several
users mean conversations of any of them (a conversation has one user, as in the authors' ``$in``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Table 8's short names -> record fields (the spec's ``condition_type``/``target_type`` values)
ATTRIBUTES = {
    "user": "user_name", "time": "time_week", "topic": "label_level_1", "subtopic": "label_level_2",
    "loc": "country", "lang": "language", "keywords": "keywords_aggregated",
}
SHORT = {field: short for short, field in ATTRIBUTES.items()}
LIST_VALUED = frozenset({"label_level_1", "label_level_2", "keywords_aggregated"})

_TABLE_8 = """
none|topic|1
none|loc|1
none|lang|1
user|keywords|370
user|time|100
keywords|user|96
user|lang|60
user|topic|54
time|user|39
topic|subtopic|26
loc|topic|20
loc|keywords|17
lang|topic|9
time|topic|6
time|keywords|6
topic|loc|6
topic|user|6
topic|lang|4
topic|keywords|4
time|lang|4
lang|keywords|1
user,topic|subtopic|199
user,topic|keywords|185
user,user|subtopic|141
user,topic|time|114
topic,lang|subtopic|100
time,topic|user|98
time,topic|subtopic|98
topic,lang|user|98
topic,loc|time|97
topic,keywords|user|97
topic,loc|subtopic|96
topic,keywords|time|96
time,user|keywords|94
topic,subtopic|user|93
subtopic,subtopic|user|93
topic,loc|keywords|82
topic,lang|time|74
time,topic|loc|60
topic,subtopic|keywords|55
topic,topic|user|55
time,user|topic|53
user,user|topic|53
time,topic|keywords|49
topic,subtopic|loc|39
time,loc|topic|34
time,lang|topic|31
topic,lang|keywords|27
time,topic|lang|15
topic,subtopic|lang|13
topic,loc|user|10
loc,topic,subtopic|user|287
lang,topic,subtopic|user|284
user,topic,subtopic|keywords|276
time,loc,topic|user|199
time,topic,subtopic|keywords|175
user,user,user|subtopic|132
user,topic,keywords|time|114
time,topic,keywords|user|100
time,loc,topic|subtopic|100
time,user,topic|subtopic|100
loc,topic,keywords|user|99
user,topic,subtopic|time|98
user,topic,keywords|subtopic|98
loc,topic,keywords|time|98
lang,topic,keywords|time|98
time,topic,subtopic|user|97
lang,topic,keywords|user|96
topic,subtopic,keywords|user|94
loc,topic,subtopic|keywords|93
lang,topic,subtopic|keywords|82
time,topic,subtopic|loc|76
user,user,user|topic|51
"""


@dataclass(frozen=True)
class Combination:
    """Condition attributes (record fields, in Table 8's order), the target field, and the paper's count."""

    conditions: tuple[str, ...]
    target: str
    paper_count: int

    @property
    def name(self) -> str:
        """Table 8's label, e.g. ``user,topic -> keywords`` (``none -> topic`` without conditions)."""
        left = ",".join(SHORT[c] for c in self.conditions) or "none"
        return f"{left} -> {SHORT[self.target]}"

    @property
    def n_conditions(self) -> int:
        return len(self.conditions)


def _parse() -> tuple[Combination, ...]:
    out = []
    for line in _TABLE_8.strip().splitlines():
        left, target, count = line.split("|")
        conditions = () if left == "none" else tuple(ATTRIBUTES[c] for c in left.split(","))
        out.append(Combination(conditions, ATTRIBUTES[target], int(count)))
    return tuple(out)


COMBINATIONS: tuple[Combination, ...] = _parse()
