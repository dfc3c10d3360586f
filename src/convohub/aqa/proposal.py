"""Question proposal (paper Appendix E.6-E.7): aggregates over the annotated corpus with DuckDB, the support
and top-3 rules, entropy ordering, round-robin sampling, and the ten graded options.

The corpus is written once as a long Parquet table ``attributes(hash, attribute, value, category)``: one
row per conversation and value of each of the seven attributes (``category`` is the keyword category of a
``keywords_aggregated`` value and the parent topic of a ``label_level_2`` value). Every combination of
:mod:`convohub.aqa.combos` becomes one SQL query over it (DuckDB reads the Parquet file in place; no server,
unlike the authors' MongoDB): the matching relation joins the condition attributes on ``hash`` (a repeated
list-valued attribute takes its values in increasing order, so each set is counted once; a subtopic
condition next to a topic condition must belong to that topic; several users are sets of users, any of whom
matches), then ``count(DISTINCT hash)`` gives each configuration's support and its target distribution.

Rules, with the thresholds of :class:`~convohub.aqa.settings.Settings`:

* support: at least ``min_support`` matching conversations (``min_support_user`` when a user is a condition);
* top-3: the three most frequent target values hold at least ``top3_share`` of the target occurrences
  (a conversation counts once per target value it has; keyword targets are split by keyword category);
* askable: the target attribute (and keyword category) has at least ``n_options`` distinct values in the
  corpus, so every question has ten options;
* sampling: per combination (and keyword category), configurations are grouped by their top-1 target value,
  each group sorted by the normalised entropy of its target distribution (lowest first: the most clear-cut
  answers), and taken round-robin over the groups, at most ``max_per_value`` per top-1 value and
  ``max_per_combination`` in all.

Options are the ten most frequent target values; when fewer occur, the rest are drawn (seeded, without
replacement) from the corpus-wide distribution of the target attribute, the same keyword category first.
``option_weights`` are the share of the matching conversations that have the option value (0 for drawn
fillers), so the gold ranking is the aggregate itself; options are shuffled with a seed derived from the
question. ``support`` lists the matching conversations (the gold context of an oracle answerer).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.aqa.combos import COMBINATIONS, LIST_VALUED, Combination
from convohub.aqa.settings import Settings
from convohub.aqa.taxonomy import normalised_entropy
from convohub.stages import digest

USER = "user_name"
#: user sets enumerated per combination at most; beyond it a seeded sample (every user already passes the
#: support rule: users are kept only with >= 10 sessions)
MAX_USER_SETS = 20_000


@dataclass
class Candidate:
    """One condition configuration of a combination that passed the support rule, with its aggregate."""

    combination: Combination
    values: tuple[str, ...]
    keywords_type: str | None
    support: int
    counts: list[tuple[str, int]]

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def top1(self) -> str:
        return self.counts[0][0]

    @property
    def top3_share(self) -> float:
        return sum(n for _, n in self.counts[:3]) / self.total if self.total else 0.0

    @property
    def entropy(self) -> float:
        return normalised_entropy([n for _, n in self.counts])

    def key(self) -> str:
        return digest({"combination": self.combination.name, "values": list(self.values),
                       "keywords_type": self.keywords_type})


@dataclass
class Proposal:
    questions: list[dict[str, Any]]
    report: dict[str, Any] = field(default_factory=dict)


def attribute_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The long ``attributes`` table of the corpus (see the module doc)."""
    rows = []
    for r in records:
        h = r["hash"]
        for attribute in ("user_name", "time_week", "country", "language"):
            rows.append({"hash": h, "attribute": attribute, "value": str(r[attribute]), "category": ""})
        parents = dict(r.get("subtopic_parents") or {})
        for value in r["label_level_1"]:
            rows.append({"hash": h, "attribute": "label_level_1", "value": value, "category": ""})
        for value in r["label_level_2"]:
            rows.append({"hash": h, "attribute": "label_level_2", "value": value, "category": parents.get(value, "")})
        for kw in r["keywords_aggregated"]:
            rows.append({"hash": h, "attribute": "keywords_aggregated", "value": kw["value"],
                         "category": kw["keyword_type"]})
    return rows


def write_attributes(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = attribute_rows(records)
    table = pa.table({k: pa.array([r[k] for r in rows], pa.string()) for k in ("hash", "attribute", "value", "category")})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


class Aggregates:
    """DuckDB over the attributes Parquet file: the SQL of every rule lives here."""

    def __init__(self, parquet: Path) -> None:
        import duckdb

        self.db = duckdb.connect()
        quoted = "'" + str(parquet).replace("'", "''") + "'"
        self.db.execute(f"CREATE VIEW attributes AS SELECT * FROM read_parquet({quoted})")

    def close(self) -> None:
        self.db.close()

    def vocabulary(self, attribute: str) -> dict[tuple[str, str], int]:
        """``{(value, category): conversations}`` of an attribute over the whole corpus."""
        rows = self.db.execute("SELECT value, category, count(DISTINCT hash) FROM attributes WHERE attribute = ? "
                               "GROUP BY value, category", [attribute]).fetchall()
        return {(v, c): int(n) for v, c, n in rows}

    def conversations(self) -> int:
        return int(self.db.execute("SELECT count(DISTINCT hash) FROM attributes").fetchone()[0])

    def _user_sets(self, size: int, seed: int) -> None:
        users = [u for (u,) in self.db.execute(
            "SELECT DISTINCT value FROM attributes WHERE attribute = 'user_name' ORDER BY value").fetchall()]
        total = math.comb(len(users), size)
        if total <= MAX_USER_SETS:
            sets = list(itertools.combinations(users, size))
        else:
            rng = random.Random(f"user-sets/{size}/{seed}")
            chosen: set[tuple[str, ...]] = set()
            while len(chosen) < MAX_USER_SETS:
                chosen.add(tuple(sorted(rng.sample(users, size))))
            sets = sorted(chosen)
        self.db.execute("DROP TABLE IF EXISTS user_sets")
        columns = ", ".join(f"u{i} VARCHAR" for i in range(size))
        self.db.execute(f"CREATE TEMP TABLE user_sets (set_id INTEGER, {columns})")
        if sets:
            placeholders = ", ".join("?" for _ in range(size + 1))
            self.db.executemany(f"INSERT INTO user_sets VALUES ({placeholders})",
                                [(i, *s) for i, s in enumerate(sets)])

    def matching_sql(self, combination: Combination, seed: int) -> str:
        """SQL of the matching relation ``(v0.., k0.., hash)`` of a combination's configurations."""
        conditions = list(combination.conditions)
        n_users = conditions.count(USER)
        select, joins, where = [], [], []
        position = {}
        if n_users > 1:
            self._user_sets(n_users, seed)
            joins.append("user_sets s")
            joins.append("JOIN attributes u ON u.attribute = 'user_name' AND u.value IN ("
                         + ", ".join(f"s.u{i}" for i in range(n_users)) + ")")
            anchor = "u"
        else:
            anchor = None
        user_seen = 0
        for i, attribute in enumerate(conditions):
            if attribute == USER and n_users > 1:
                select += [f"s.u{user_seen} AS v{i}", f"'' AS k{i}"]
                user_seen += 1
                continue
            alias = f"a{i}"
            table = f"attributes {alias}"
            if anchor is None:
                joins.append(table)
                anchor = alias
            else:
                joins.append(f"JOIN {table} ON {alias}.hash = {anchor}.hash")
            where.append(f"{alias}.attribute = '{attribute}'")
            earlier = position.get(attribute)
            if earlier is not None:
                where.append(f"{alias}.value > {earlier}.value")
            position.setdefault(attribute, alias)
            select += [f"{alias}.value AS v{i}", f"{alias}.category AS k{i}"]
        if "label_level_1" in position and "label_level_2" in position:
            where.append(f"{position['label_level_2']}.category = {position['label_level_1']}.value")
        if anchor is None:  # no condition: every conversation
            return "SELECT DISTINCT hash FROM attributes"
        sql = f"SELECT DISTINCT {', '.join(select)}, {anchor}.hash AS hash FROM {' '.join(joins)}"
        return sql + (f" WHERE {' AND '.join(where)}" if where else "")

    def candidates(self, combination: Combination, settings: Settings) -> list[Candidate]:
        """Every configuration with enough support, with its target distribution (split by keyword category
        for keyword targets), target values sorted by count then value."""
        n = combination.n_conditions
        keys = [f"v{i}" for i in range(n)] + [f"k{i}" for i in range(n)]
        threshold = settings.min_support_user if USER in combination.conditions else settings.min_support
        self.db.execute("DROP TABLE IF EXISTS matching")
        self.db.execute(f"CREATE TEMP TABLE matching AS {self.matching_sql(combination, settings.seed)}")
        group = ", ".join(keys)
        support_sql = (f"SELECT {group + ', ' if keys else ''}count(DISTINCT hash) AS support FROM matching "
                       + (f"GROUP BY {group} " if keys else "") + "HAVING count(DISTINCT hash) >= ?")
        using = f"USING ({group})" if keys else "ON TRUE"
        sql = (f"WITH s AS ({support_sql}) SELECT {', '.join('m.' + k for k in keys) + ', ' if keys else ''}"
               "t.value, t.category, count(DISTINCT m.hash) AS n, any_value(s.support) AS support "
               f"FROM matching m JOIN s {using} JOIN attributes t ON t.hash = m.hash AND t.attribute = ? "
               f"GROUP BY {', '.join('m.' + k for k in keys) + ', ' if keys else ''}t.value, t.category")
        rows = self.db.execute(sql, [threshold, combination.target]).fetchall()
        grouped: dict[tuple[Any, ...], list[tuple[str, int]]] = defaultdict(list)
        supports: dict[tuple[Any, ...], int] = {}
        is_keyword = combination.target == "keywords_aggregated"
        for row in rows:
            values, categories = tuple(row[:n]), tuple(row[n:2 * n])
            value, category, count, support = row[2 * n:]
            keyword_type = category if is_keyword else next((c for c, a in zip(categories, combination.conditions,
                                                                                strict=True)
                                                              if a == "keywords_aggregated"), None)
            key = (values, keyword_type)
            grouped[key].append((value, int(count)))
            supports[key] = int(support)
        out = []
        for (values, keyword_type), counts in grouped.items():
            counts.sort(key=lambda vc: (-vc[1], vc[0]))
            out.append(Candidate(combination, values, keyword_type, supports[(values, keyword_type)], counts))
        out.sort(key=lambda c: (c.keywords_type or "", c.values))
        return out

    def support_of(self, candidate: Candidate) -> list[str]:
        """The matching conversations of a configuration (the table of the last :meth:`candidates` call)."""
        where = " AND ".join(f"v{i} = ?" for i in range(len(candidate.values))) or "TRUE"
        rows = self.db.execute(f"SELECT DISTINCT hash FROM matching WHERE {where} ORDER BY hash",
                               list(candidate.values)).fetchall()
        return [h for (h,) in rows]


def round_robin(candidates: Sequence[Candidate], max_per_value: int, cap: int | None) -> list[Candidate]:
    """Round-robin over top-1 values (groups ordered by their best entropy), lowest entropy first inside a
    group, at most ``max_per_value`` per top-1 value and ``cap`` in all."""
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        groups[c.top1].append(c)
    for members in groups.values():
        members.sort(key=lambda c: (c.entropy, -c.support, c.values))
    order = sorted(groups, key=lambda v: (groups[v][0].entropy, -groups[v][0].support, v))
    chosen: list[Candidate] = []
    for turn in range(max_per_value):
        for value in order:
            if len(groups[value]) > turn:
                chosen.append(groups[value][turn])
                if cap is not None and len(chosen) >= cap:
                    return chosen
    return chosen


def options_for(candidate: Candidate, vocabulary: Mapping[tuple[str, str], int], n_options: int,
                seed: str) -> tuple[list[str], list[float]]:
    """Ten options and their weights (share of matching conversations), shuffled (module doc)."""
    top = candidate.counts[:n_options]
    chosen = [v for v, _ in top]
    weights = {v: n / candidate.support for v, n in top}
    if len(chosen) < n_options:
        rng = random.Random(f"fill/{seed}")
        same = candidate.keywords_type
        for pool in ([k for k in vocabulary if k[1] == same] if same else [], list(vocabulary)):
            names = sorted({v for v, _ in pool if v not in weights})
            mass = Counter()
            for (v, _), n in vocabulary.items():
                if v in names:
                    mass[v] += n
            while names and len(chosen) < n_options:
                pick = rng.choices(names, weights=[mass[v] for v in names])[0]
                names.remove(pick)
                chosen.append(pick)
                weights[pick] = 0.0
    if len(chosen) < n_options:
        raise ValueError(f"{candidate.combination.name}: only {len(chosen)} distinct target values exist")
    random.Random(f"order/{seed}").shuffle(chosen)
    return chosen, [weights[v] for v in chosen]


def propose(records: Sequence[Mapping[str, Any]], settings: Settings, work: Path,
            combinations: Sequence[Combination] = COMBINATIONS) -> Proposal:
    """Structured questions (no wording yet) for every combination, and the per-combination report."""
    parquet = write_attributes(records, work / "attributes.parquet")
    db = Aggregates(parquet)
    questions: list[dict[str, Any]] = []
    report: dict[str, Any] = {"combinations": {}}
    try:
        vocabularies = {target: db.vocabulary(target) for target in {c.target for c in combinations}}
        for combination in combinations:
            vocabulary = vocabularies[combination.target]
            entry = {"paper": combination.paper_count, "supported": 0, "top3_passed": 0, "askable": 0,
                     "proposed": 0}
            candidates = db.candidates(combination, settings)
            entry["supported"] = len(candidates)
            passed = [c for c in candidates if c.top3_share >= settings.top3_share]
            entry["top3_passed"] = len(passed)
            strata: dict[str | None, list[Candidate]] = defaultdict(list)
            for c in passed:
                strata[c.keywords_type].append(c)
            for _, members in sorted(strata.items(), key=lambda kv: kv[0] or ""):
                if len({v for v, _ in vocabulary}) < settings.n_options:
                    entry.setdefault("not_askable", f"fewer than {settings.n_options} distinct "
                                                    f"{combination.target} values in the corpus")
                    continue
                entry["askable"] += len(members)
                for candidate in round_robin(members, settings.max_per_value, settings.max_per_combination):
                    key = candidate.key()
                    options, weights = options_for(candidate, vocabulary, settings.n_options, key)
                    questions.append({
                        "hash": key, "combination": combination.name,
                        "condition_type": list(combination.conditions), "condition_value": list(candidate.values),
                        "target_type": combination.target, "keywords_type": candidate.keywords_type,
                        "options": options, "option_weights": weights, "support": db.support_of(candidate),
                        "top1": candidate.top1, "entropy": round(candidate.entropy, 6),
                        "top3_share": round(candidate.top3_share, 6),
                    })
                    entry["proposed"] += 1
            report["combinations"][combination.name] = entry
    finally:
        db.close()
    report["proposed"] = len(questions)
    return Proposal(questions, report)


def support_hashes(records: Sequence[Mapping[str, Any]], condition_type: Sequence[str],
                   condition_value: Sequence[str], keywords_type: str | None = None) -> list[str]:
    """The conversations matching a question's conditions, in plain Python (the rules of the module doc:
    different attributes all hold, several users any, several list values all; a keyword condition matches
    the value in the question's keyword category when one is given). Used for released questions, and by the
    tests to recompute DuckDB's aggregates by hand."""
    wanted: dict[str, list[str]] = defaultdict(list)
    for attribute, value in zip(condition_type, condition_value, strict=True):
        wanted[attribute].append(value)

    def values(record: Mapping[str, Any], attribute: str) -> set[str]:
        if attribute == "keywords_aggregated":
            return {kw["value"] for kw in record["keywords_aggregated"]
                    if keywords_type is None or kw["keyword_type"] == keywords_type}
        value = record[attribute]
        return set(value) if isinstance(value, list) else {str(value)}

    out = []
    for record in records:
        ok = True
        for attribute, needed in wanted.items():
            have = values(record, attribute)
            single = attribute not in LIST_VALUED
            if not (have & set(needed) if single else set(needed) <= have):
                ok = False
                break
        if ok:
            out.append(record["hash"])
    return sorted(out)
