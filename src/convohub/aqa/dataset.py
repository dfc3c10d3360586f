"""Build the ``wildchat-aqa`` dataset repository: configs ``questions`` and ``questions_subset`` (split
``test``), ``conversations`` and ``summaries`` (split ``train``), with a card of the paper's statistics.

Without a source the rows come from the construction pipeline (:mod:`convohub.aqa.pipeline`) over the sample
corpus (tiny profile) or WildChat-1M (paper profile); with ``--source`` they are the authors' released
datasets (:mod:`convohub.aqa.source`). Field names follow the authors' release (the dataset contract in the
card), so answerers read either the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from convohub.aqa.questions import DATASET_NAME
from convohub.conversations.pii import NOT_SCRUBBED, SCRUB_SCOPE
from convohub.corpus.dataset import WILDCHAT_CITATION
from convohub.hub import DatasetCardInfo, HubTarget, markdown_table, write_dataset

if TYPE_CHECKING:  # pragma: no cover
    import datasets

    from convohub.aqa.pipeline import Build

QUESTIONS, SUBSET, CONVERSATIONS, SUMMARIES = "questions", "questions_subset", "conversations", "summaries"
AQA_CITATION = """@inproceedings{zhang2025aqa,
  title     = {From Chat Logs to Collective Insights: Aggregative Question Answering},
  author    = {Wentao Zhang and Woojeong Kim and Yuntian Deng},
  booktitle = {Proceedings of the 2025 Conference on Empirical Methods in Natural Language Processing},
  year      = {2025},
  eprint    = {2505.23765},
  archivePrefix = {arXiv}
}"""
#: the published conversation fields, in the contract's order
CONVERSATION_FIELDS = ("conversation_id", "hash", "user_name", "timestamp", "time_day", "time_week", "time_month",
                       "country", "reigon", "language", "token_count", "conversation", "summary", "intent",
                       "keywords", "keywords_aggregated", "label_level_1", "label_level_2", "labeller")
QUESTION_FIELDS = ("hash", "question", "style", "condition_type", "condition_value", "target_type", "keywords_type",
                   "options", "option_weights", "support", "phrased_by", "combination", "qc_scorers", "qc_scores")


def conversation_features(with_text: bool = True) -> datasets.Features:
    import datasets

    string, integer = datasets.Value("string"), datasets.Value("int64")
    columns: dict[str, Any] = {
        "conversation_id": string, "hash": string, "user_name": string, "timestamp": string, "time_day": string,
        "time_week": string, "time_month": string, "country": string, "reigon": string, "language": string,
        "token_count": integer,
        "conversation": datasets.List({"role": string, "content": string}),
        "summary": string, "intent": string,
        "keywords": datasets.List({"keyword_type": string, "value": string, "description": string}),
        "keywords_aggregated": datasets.List({"keyword_type": string, "value": string}),
        "label_level_1": datasets.List(string), "label_level_2": datasets.List(string), "labeller": string,
    }
    if not with_text:
        columns.pop("conversation")
    return datasets.Features(columns)


def question_features() -> datasets.Features:
    import datasets

    string, number = datasets.Value("string"), datasets.Value("float64")
    return datasets.Features({
        "hash": string, "question": string, "style": string, "condition_type": datasets.List(string),
        "condition_value": datasets.List(string), "target_type": string, "keywords_type": string,
        "options": datasets.List(string), "option_weights": datasets.List(number), "support": datasets.List(string),
        "phrased_by": string, "combination": string, "qc_scorers": string,
        "qc_scores": {"s_context": number, "s_no_context": number, "s_random": number, "s_threshold": number},
    })


def combination_label(condition_type: Sequence[str], target_type: str) -> str:
    """Table 8's label of a question (``user,topic -> keywords``)."""
    from convohub.aqa.combos import Combination

    return Combination(tuple(condition_type), target_type, 0).name


def question_rows(questions: Sequence[Mapping[str, Any]], qc_scorers: str = "") -> list[dict[str, Any]]:
    empty = {"s_context": None, "s_no_context": None, "s_random": None, "s_threshold": None}
    return [{
        **{f: q.get(f) for f in QUESTION_FIELDS},
        "combination": q.get("combination") or combination_label(q["condition_type"], q["target_type"]),
        "qc_scorers": q.get("qc_scorers") or qc_scorers, "qc_scores": q.get("qc_scores") or empty,
    } for q in questions]


# ------------------------------------------------------------------------------------------ card tables
def question_statistics(questions: Sequence[Mapping[str, Any]]) -> str:
    """Questions per number of conditions, per target type, and per combination (with Table 8's count)."""
    from convohub.aqa.combos import COMBINATIONS, SHORT

    by_n = Counter(len(q["condition_type"]) for q in questions)
    paper_n = Counter()
    for c in COMBINATIONS:
        paper_n[c.n_conditions] += c.paper_count
    parts = [markdown_table(["conditions", "questions", "paper"],
                            [[n, by_n.get(n, 0), paper_n[n]] for n in range(4)]
                            + [["all", len(questions), sum(paper_n.values())]])]
    by_target = Counter(SHORT.get(q["target_type"], q["target_type"]) for q in questions)
    parts.append(markdown_table(["target type", "questions"], sorted(by_target.items(), key=lambda kv: -kv[1])))
    by_combo = Counter(q.get("combination") or combination_label(q["condition_type"], q["target_type"])
                       for q in questions)
    rows = [[c.name, by_combo.get(c.name, 0), c.paper_count] for c in COMBINATIONS]
    parts.append(markdown_table(["combination (Table 8)", "questions", "paper"], rows))
    by_keywords = Counter(q["keywords_type"] for q in questions if q.get("keywords_type"))
    if by_keywords:
        parts.append("Keyword categories of keyword questions: "
                     + ", ".join(f"{k} ({n})" for k, n in by_keywords.most_common()))
    return "\n\n".join(parts)


def conversation_statistics(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "No conversations in this build."
    tokens = [r["token_count"] for r in rows]
    summary_words = [len(str(r["summary"]).split()) for r in rows]
    table = markdown_table(["conversations", "users", "weeks", "countries", "languages", "topics", "subtopics",
                            "keyword categories", "mean tokens", "mean summary words"],
                           [[len(rows), len({r["user_name"] for r in rows}), len({r["time_week"] for r in rows}),
                             len({r["country"] for r in rows}), len({r["language"] for r in rows}),
                             len({t for r in rows for t in r["label_level_1"]}),
                             len({t for r in rows for t in r["label_level_2"]}),
                             len({(k["keyword_type"], k["value"]) for r in rows for k in r["keywords_aggregated"]}),
                             f"{sum(tokens) / len(tokens):.1f}", f"{sum(summary_words) / len(rows):.1f}"]])
    languages = Counter(r["language"] for r in rows).most_common(10)
    return table + "\n\nLanguages: " + ", ".join(f"{lang} ({n})" for lang, n in languages)


def _taxonomy_table(rows: Sequence[Mapping[str, Any]], searches: Mapping[str, Mapping[str, Any]]) -> str:
    """Topics with their conversations and their own subtopics (``searches``: the subtopic stage's report)."""
    topics = Counter(t for r in rows for t in r["label_level_1"])
    subs: dict[str, Counter[str]] = {}
    for r in rows:
        for t in r["label_level_1"]:
            own = set(searches.get(t, {}).get("subtopics", []))
            subs.setdefault(t, Counter()).update(s for s in r["label_level_2"]
                                                 if s in own or s.removesuffix(f" ({t})") in own)
    return markdown_table(["topic", "conversations", "subtopics (conversations)"],
                          [[t, n, ", ".join(f"{s} ({m})" for s, m in subs[t].most_common(6))]
                           for t, n in topics.most_common()])


def _pipeline_sections(build: Build, settings: Any, tokenizer: str) -> dict[str, str]:
    from convohub.aqa.settings import describe

    report = build.report
    c = report["corpus"]["counts"]
    corpus = markdown_table(
        ["step", "conversations", "note"],
        [["rows read", c["rows_read"], f"{c.get('empty_dropped', 0)} empty dropped"],
         ["MinHash/LSH de-duplication", c["after_dedup"], f"{c['near_duplicates']} near-duplicates removed"],
         [f"<= {settings.max_tokens} tokens", c["after_length"], f"{c['over_max_tokens']} longer ones removed "
                                                                  f"({tokenizer})"],
         [f"users with >= {settings.min_sessions} sessions", c["after_users"],
          f"{c['inactive_user_conversations']} conversations of {c['inactive_users']} users removed"],
         ["annotation validated", c["after_users"] - report["annotations"]["dropped"],
          f"{report['annotations']['dropped']} without a valid summary or intent"],
         ["verified topic and subtopic", len(build.conversations),
          f"{report['unlabelled_dropped']} without one removed"]])
    fields = report["annotations"]["fields"]
    annotation = markdown_table(
        ["field", "asked", "valid on the 1st try", "valid", "failed", "calls"],
        [[f, v["asked"], f"{v['valid_first_try']} ({v['valid_first_try'] / max(v['asked'], 1):.0%})",
          f"{v['valid']} ({v['valid'] / max(v['asked'], 1):.0%})", v["failed"], v["calls"]] for f, v in fields.items()])
    items = report["annotations"]["items"]
    annotation += ("\n\nKeyword items written: " + str(items.get("keyword_items", 0)) + ", kept " +
                   str(items.get("keyword_kept", 0)) + "; dropped: " + (", ".join(
                       f"{k.removeprefix('keyword_dropped_').replace('_', ' ')} {v}" for k, v in sorted(items.items())
                       if k.startswith("keyword_dropped")) or "none") + ". Answers cut at the word limit: summary "
                   f"{items.get('summary_cut', 0)}, intent {items.get('intent_cut', 0)}.")
    topics = report["topics"]
    rounds = "; ".join(f"round {r['round']}: {r['action']}" + (f" (score {r['score']:g})" if r.get("score") is not None
                                                                 else "") + (f", {r['classes']} classes" if
                                                                             r.get("classes") else "")
                       + (f", stopped: {r['stopped']}" if r.get("stopped") else "")
                       for r in topics["taxonomy"]["rounds"])
    q_l, q_v = topics["quality_labelled"], topics["quality_verified"]
    s_v = report["subtopics"]["quality_verified"]
    taxonomy = (f"Topic taxonomy rounds ({topics['taxonomy']['made_by']}): {rounds}.\n\n" + markdown_table(
        ["labels", "s_coverage", "s_certainty", "s_quality"],
        [["topics, as labelled", q_l["coverage"], q_l["certainty"], q_l["quality"]],
         ["topics, verified", q_v["coverage"], q_v["certainty"], q_v["quality"]],
         ["subtopics, verified", s_v["coverage"], s_v["certainty"], s_v["quality"]]]))
    k_rows = []
    for topic, entry in sorted(report["subtopics"]["topics"].items()):
        sil = ", ".join(f"K={k}: {s}" for k, s in entry.get("silhouette", {}).items())
        quality = ", ".join(f"K={k}: {v['quality']}" if "quality" in v else f"K={k}: failed"
                            for k, v in entry.get("candidates", {}).items())
        k_rows.append([topic, entry["conversations"], sil or entry.get("skipped", ""), quality,
                       entry.get("chosen_k", "-")])
    taxonomy += "\n\nSubtopic K per topic (silhouette of the k-means clusterings, s_quality of the taxonomies " \
                "generated for the best ones):\n\n" + markdown_table(
                    ["topic", "conversations", "silhouette", "s_quality", "chosen K"], k_rows)
    taxonomy += "\n\n" + _taxonomy_table(build.conversations, report["subtopics"]["topics"])
    kw = report["keywords"]
    keywords = (f"{kw['keyword_categories']} keyword categories (distinct named entities) over "
                f"{kw['conversations_with_keywords']} conversations; per category: "
                + (", ".join(f"{c} {n}" for c, n in kw["categories"].items()) or "none")
                + ". Names merged by the rules: " + (", ".join(f"{c} {n}" for c, n in kw["names_merged"].items())
                                                     or "none") + ".")
    proposal = report["proposal"]
    combos = []
    for name, entry in proposal["combinations"].items():
        if entry["supported"] or entry.get("not_askable"):
            combos.append([name, entry["supported"], entry["top3_passed"], entry["proposed"],
                           entry.get("not_askable", "")])
    phrasing = report["phrasing"]
    quality = report["quality"]
    means = quality.get("mean", {})
    questions = (
        f"{proposal['proposed']} questions proposed, {quality['after']} kept by quality control "
        f"({quality.get('removed', 0)} removed), {report['subset']} in the stratified subset.\n\n"
        + markdown_table(["combination", "configurations with support", "top-3 passed", "proposed", "not askable"],
                         combos)
        + f"\n\nWording: {phrasing.get('rewritten', 0)} of {phrasing.get('asked', 0)} rewrites by the LLM kept "
          f"({phrasing.get('rewritten_first_try', 0)} on the first try, {phrasing.get('calls', 0)} calls); "
          f"{phrasing.get('template', 0)} questions keep the template wording. Rejections: "
        + (", ".join(f"{k} {v}" for k, v in phrasing.get("rejections", {}).items()) or "none") + ".\n\n"
        + "Quality control scorers: " + "; ".join(f"{k}: {v}" for k, v in quality.get("scorers", {}).items())
        + (f". Mean NDCG@{quality.get('k', 10)}: s_context {means.get('s_context', 0):.4f}, s_no_context "
           f"{means.get('s_no_context', 0):.4f}, s_random {means.get('s_random', 0):.4f}, threshold "
           f"{means.get('s_threshold', 0):.4f} (z = {quality.get('z', 0)})." if means else "."))
    seconds = markdown_table(["stage", "wall s", "CPU s"],
                             [[k, v["wall"], v["cpu"]] for k, v in report["seconds"].items()])
    backends = markdown_table(["role", "model or stand-in"], list(report["backends"].items()))
    return {"corpus": corpus, "annotation": annotation, "taxonomy": taxonomy, "keywords": keywords,
            "questions_build": questions, "seconds": seconds, "backends": backends,
            "settings": markdown_table(["setting", "this build", "paper", "tiny"], describe(settings))}


def build_dataset(target: HubTarget, repo: Path, *, build: Build | None = None, source_data: Any = None,
                  settings: Any = None, provenance: str, pii: Mapping[str, int], tokenizer: str) -> Path:
    """Write the dataset folder from a pipeline ``build`` or from ``source_data`` and return it."""
    import datasets

    if build is not None:
        conversations, summaries = build.conversations, None
        questions, subset = build.questions, build.subset
        sections = _pipeline_sections(build, settings, tokenizer)
    else:
        conversations, summaries = source_data.conversations, source_data.summaries
        questions, subset = source_data.questions, source_data.questions_subset
        sections = {k: "Not part of a `--source` build: the authors' release was read as it is."
                    for k in ("corpus", "annotation", "taxonomy", "keywords", "questions_build", "seconds",
                              "backends", "settings")}
    configs: dict[str, dict[str, datasets.Dataset]] = {}
    if questions is not None:
        configs[QUESTIONS] = {"test": datasets.Dataset.from_list(question_rows(questions, "authors (o4-mini)"
                                                                               if build is None else ""),
                                                                 features=question_features())}
    if subset is not None:
        configs[SUBSET] = {"test": datasets.Dataset.from_list(question_rows(subset, "authors (o4-mini)"
                                                                            if build is None else ""),
                                                              features=question_features())}
    if conversations is not None:
        rows = [{f: r[f] for f in CONVERSATION_FIELDS} for r in conversations]
        configs[CONVERSATIONS] = {"train": datasets.Dataset.from_list(rows, features=conversation_features())}
        summaries = [{f: r[f] for f in CONVERSATION_FIELDS if f != "conversation"} for r in conversations]
    if summaries is not None:
        rows = [{f: r[f] for f in CONVERSATION_FIELDS if f != "conversation"} for r in summaries]
        configs[SUMMARIES] = {"train": datasets.Dataset.from_list(rows, features=conversation_features(False))}
    corpus_rows = conversations if conversations is not None else summaries or []
    body = Template((repo / "dataset_scripts" / "wildchat_aqa" / "card.md").read_text(encoding="utf-8"))
    description = body.substitute(
        provenance=provenance, question_statistics=question_statistics(questions or []),
        conversation_statistics=conversation_statistics(corpus_rows), tokenizer=tokenizer,
        pii=", ".join(f"{k} {v}" for k, v in sorted(pii.items()) if v) or "none",
        pii_scope=SCRUB_SCOPE, not_scrubbed=NOT_SCRUBBED, **sections)
    card = DatasetCardInfo(
        pretty_name="WildChat-AQA: aggregative question answering over chat logs (convohub)",
        license="odc-by", description=description, citation=AQA_CITATION + "\n\n" + WILDCHAT_CITATION,
        language=("en", "zh", "ru", "de", "fr", "es", "pt"),
        task_categories=("question-answering", "text-retrieval"),
        tags=("convohub", "wildchat", "wildchat-aqa", "aggregative-qa", "chat-logs", "ranking"),
    )
    return write_dataset(target, DATASET_NAME, configs, card,
                         default_config=QUESTIONS if QUESTIONS in configs else None)
