"""Build the ``wildfeedback`` dataset repository: preference pairs, SAT/DSAT annotations, user preferences,
the held-out test set, and a card with the paper's Table 1 / Table 6 statistics computed from the data.

Two ways in: ``source`` (a folder with any of the released files, normalised and PII-scrubbed; the configs
whose files are present are built) or no source (the pipeline of :mod:`convohub.wildfeedback.pipeline` over
the seeded WildChat-format sample corpus, with the configured LLM or the offline stand-ins).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from string import Template
from typing import Any

from convohub.conversations.pii import NOT_SCRUBBED, SCRUB_SCOPE
from convohub.hub import DatasetCardInfo, HubTarget, markdown_table, write_dataset
from convohub.wildfeedback.pipeline import (
    PAIR_COLUMNS,
    Backends,
    PipelineResult,
    Settings,
    messages_of,
    public_row,
    run_pipeline,
)
from convohub.wildfeedback.preferences import RULES_NAME

DATASET_NAME = "wildfeedback"
DEFAULT_USERS = 200
CITATION = """@article{shi2024wildfeedback,
  title   = {WildFeedback: Aligning LLMs With In-situ User Interactions And Feedback},
  author  = {Taiwei Shi and Zhuoer Wang and Longqi Yang and Ying-Chun Lin and Zexue He and Mengting Wan and
             Pei Zhou and Sujay Jauhar and Sihao Chen and Shan Xia and Hongfei Zhang and Jieyu Zhao and
             Xiaofeng Xu and Xia Song and Jennifer Neville},
  journal = {arXiv preprint arXiv:2408.15549},
  year    = {2024}
}"""


def _features(config: str) -> Any:
    import datasets

    s, strings, b = datasets.Value("string"), datasets.List(datasets.Value("string")), datasets.Value("bool")
    i = datasets.Value("int64")
    msgs = datasets.List({"role": s, "content": s})
    if config in ("wildfeedback", "test"):
        return datasets.Features({"id": s, "conversation_id": s, "user_id": s, "variant": s, "prompt": msgs,
                                  "preferences": strings, "chosen": s, "rejected": s, "sat_labels": strings,
                                  "dsat_labels": strings, "domain": s, "intent": s})
    if config == "sat_dsat_annotation":
        return datasets.Features({"conversation_id": s, "utterance_id": i, "turn_id": i, "role": s, "content": s,
                                  "summary": s, "state": s, "preceding_topical_relation": s, "domain": s,
                                  "intent": s, "sat": b, "dsat": b, "satisfaction": strings,
                                  "dissatisfaction": strings, "labeller": s})
    return datasets.Features({"id": s, "conversation_id": s, "user_id": s, "query": i, "prompt": msgs,
                              "preferences": strings, "labeller": s})


def annotation_rows(result: PipelineResult) -> Iterable[dict[str, Any]]:
    """One row per utterance of every labelled conversation (the released ``sat_dsat_annotation`` shape)."""
    for conv in result.conversations:
        entry = result.labels.get(conv["conversation_id"])
        if entry is None or "result" not in entry:
            continue
        labels = entry["result"]["turns"]
        k = 0
        for u, turn in enumerate(messages_of(conv)):
            is_user = turn["role"] == "user"
            k += is_user
            lab = labels[k - 1] if is_user and k >= 1 else None
            yield {"conversation_id": conv["conversation_id"], "utterance_id": u, "turn_id": max(k, 1),
                   "role": turn["role"], "content": turn["content"],
                   "summary": lab["summary"] if lab else None, "state": lab["state"] if lab else None,
                   "preceding_topical_relation": lab["preceding_topical_relation"] if lab else None,
                   "domain": lab["domain"] if lab else None, "intent": lab["intent"] if lab else None,
                   "sat": bool(lab) and any(x != "N/A" for x in lab["satisfaction"]),
                   "dsat": bool(lab) and any(x != "N/A" for x in lab["dissatisfaction"]),
                   "satisfaction": [x for x in lab["satisfaction"] if x != "N/A"] if lab else [],
                   "dissatisfaction": [x for x in lab["dissatisfaction"] if x != "N/A"] if lab else [],
                   "labeller": entry["result"]["labeller"]}


def preference_rows(result: PipelineResult) -> list[dict[str, Any]]:
    by_id = {c["conversation_id"]: c for c in result.conversations}
    out = []
    for cid, summary in result.summaries.items():
        conv = by_id[cid]
        msgs = messages_of(conv)
        users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
        labeller = result.backends.get("summariser") or RULES_NAME
        for entry in summary:
            out.append({"id": f"{cid}-q{entry['query']}", "conversation_id": cid, "user_id": conv["user_id"],
                        "query": entry["query"], "prompt": msgs[: users[entry["query"] - 1] + 1],
                        "preferences": entry["preferences"], "labeller": labeller})
    return out


def table1(annotations: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The paper's Table 1 from utterance rows (streamed: only per-conversation flags are kept)."""
    convs: dict[str, list[bool]] = {}
    utt = sat_utt = dsat_utt = 0
    for row in annotations:
        utt += 1
        flags = convs.setdefault(row["conversation_id"], [False, False])
        sat_utt += bool(row["sat"])
        dsat_utt += bool(row["dsat"])
        flags[0] |= bool(row["sat"])
        flags[1] |= bool(row["dsat"])
    return {"# Conv.": len(convs), "# Utt.": utt, "# SAT Conv.": sum(f[0] for f in convs.values()),
            "# DSAT Conv.": sum(f[1] for f in convs.values()), "# SAT Utt.": sat_utt, "# DSAT Utt.": dsat_utt}


def table6(rows_by_config: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[list[Any]]:
    """Table 6 rows (pairs, mean prompt/response tokens) per config and variant."""
    from transformers import AutoTokenizer

    from convohub.training.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))

    def n_tokens(text: str) -> int:
        return len(tok(text, add_special_tokens=False)["input_ids"])

    out = []
    for config, rows in rows_by_config.items():
        for variant in sorted({r["variant"] for r in rows}):
            sel = [r for r in rows if r["variant"] == variant]
            prompt = sum(n_tokens("\n".join(m["content"] for m in r["prompt"])) for r in sel) / len(sel)
            response = sum(n_tokens(r["chosen"]) + n_tokens(r["rejected"]) for r in sel) / (2 * len(sel))
            multi = sum(len(r["prompt"]) > 1 for r in sel)
            out.append([config, variant, len(sel), f"{prompt:.0f}", f"{response:.0f}", f"{multi}/{len(sel)}"])
    return out


def _dataset(config: str, rows: Sequence[Mapping[str, Any]]) -> Any:
    import datasets

    return datasets.Dataset.from_list(list(rows), features=_features(config))


def _counts_table(counts: Mapping[str, Any]) -> str:
    flat = []
    for key, value in counts.items():
        if isinstance(value, Mapping):
            flat.extend([f"{key}: {k}", v] for k, v in value.items())
        else:
            flat.append([key, value])
    return markdown_table(["stage / count", "value"], flat)


def sample_conversations(n_users: int, seed: int) -> list[dict[str, Any]]:
    """The seeded WildChat-format corpus, normalised, de-duplicated and PII-scrubbed like wildchat-sample."""
    from convohub.conversations import generate_wildchat_sample
    from convohub.corpus.dataset import normalise

    splits, _ = normalise(generate_wildchat_sample(n_users=n_users, seed=seed))
    return [r for split in splits.values() for r in split]


def gold_section(comparison: Mapping[str, Any] | None, labeller: str) -> str:
    """The card's "labeller on the hand-labelled set" paragraph and table (or why it is missing)."""
    from convohub.wildfeedback.agreement import agreement_rows

    if comparison is None:
        return ("Not measured in this build (the labeller was given explicitly); "
                "`convohub.wildfeedback.agreement.compare_on_gold` measures any labeller on the set.")
    g = comparison["gold"]
    table = markdown_table(["labeller", "signal", "accuracy", "precision", "recall", "F1", "kappa",
                            "gold positives", "turns"], agreement_rows(comparison))
    failures = "; ".join(f"`{name}`: {int(a['failed_conversations'])} conversations without a valid answer"
                         for name, a in comparison["labellers"].items() if a.get("failed_conversations"))
    figures = ", ".join(f"`{n}` {a['mean_kappa']:.3f}" for n, a in comparison["labellers"].items())
    if comparison["llm"] is None:
        choice = f"Only the rules were measured; this build's labeller `{labeller}` was chosen by name."
    elif labeller == comparison["chosen"]:
        choice = (f"This build's labeller `{labeller}` is the offline default chosen by this measurement: "
                  f"{comparison['choice_rule']} (mean kappa: {figures}).")
        if labeller == comparison["rules"]:
            choice += (" The rules were chosen because they agreed better with the hand labels than the local "
                       "LLM; configure an endpoint (`CONVOHUB_LLM_*` or `--llm SPEC`) to label with a model.")
    else:
        choice = f"This build's labeller `{labeller}` was chosen by name (mean kappa: {figures})."
    return (f"{g['conversations']} conversations ({g['scored_turns']} user turns after the first: "
            f"{g['sat_turns']} SAT, {g['dsat_turns']} DSAT; languages {', '.join(g['languages'])}) written and "
            f"labelled by hand for convohub (`convohub/data/{g['file']}`), not produced by the sample "
            f"generator whose phrases the rules were built from. {choice}\n\n{table}"
            + (f"\n\nLabelling failures (counted as no feedback): {failures}." if failures else ""))


def _on_policy_line(backends: Mapping[str, Any], counts: Mapping[str, Any]) -> str:
    """Who generated and judged the on-policy pairs, on how many episodes, and how many pairs survived."""
    answered, pool = counts.get("episodes", 0), counts.get("training_user_episodes", counts.get("episodes", 0))
    sample = "every" if answered >= pool else f"a seeded sample of {answered} of the {pool}"
    return (f"policy `{backends['policy']}` answered {sample} training users' feedback episodes twice, with and "
            f"without the preferences; judge `{backends['judge']}` kept a pair when it preferred the guided answer "
            f"(win {counts.get('judge_win', 0)}, tie {counts.get('judge_tie', 0)}, lose {counts.get('judge_lose', 0)}, "
            f"unparsed {counts.get('judge_parse_failure', 0)}): {counts.get('pairs', 0)} pairs")


def _moderation_choice(comparison: Mapping[str, Any] | None) -> str:
    """How the offline moderator was chosen, with each candidate's agreement with the hand-labelled set."""
    if not comparison:
        return ""
    figures = "; ".join(f"`{m['moderator']}` accuracy {m['accuracy']:.2f} (precision {m['precision_unsafe']:.2f}, "
                        f"recall {m['recall_unsafe']:.2f} on unsafe)" for m in comparison["measured"])
    n = comparison["measured"][0]["n"]
    return (f". Chosen as the offline default because it agreed better with {n} hand-labelled replies "
            f"(`convohub/data/moderation_gold.jsonl`, half unsafe): {figures}")


def _moderation_drops(counts: dict) -> str:
    """'flagged N, unanswered M' summed over the expert and on-policy stages."""
    stages = [counts.get(k) or {} for k in ("expert", "on_policy")]
    flagged = sum(int(c.get("dropped_moderation_flagged", 0)) for c in stages)
    unanswered = sum(int(c.get("dropped_moderation_unanswered", 0)) for c in stages)
    return f"{flagged} flagged unsafe, {unanswered} without a readable verdict"


def build_from_pipeline(target: HubTarget, repo: Path, work: Path, *, backends: Backends | None = None,
                        settings: Settings | None = None, n_users: int = DEFAULT_USERS,
                        conversations: Sequence[Mapping[str, Any]] | None = None,
                        gold_comparison: Mapping[str, Any] | None = None,
                        moderation_comparison: Mapping[str, Any] | None = None,
                        summary_comparison: Mapping[str, Any] | None = None) -> Path:
    """Run the pipeline and write the dataset folder; ``gold_comparison`` (from
    :func:`convohub.wildfeedback.agreement.compare_on_gold`), ``moderation_comparison`` (from
    :func:`convohub.wildfeedback.moderation.offline_moderator`) and ``summary_comparison`` (from
    :func:`convohub.wildfeedback.summary_agreement.offline_summariser`) go into the card."""
    settings = settings or Settings()
    convs = list(conversations) if conversations is not None else sample_conversations(n_users, settings.seed)
    result = run_pipeline(convs, work, backends, settings)
    annotations = list(annotation_rows(result))
    configs = {"wildfeedback": {"train": _dataset("wildfeedback", [public_row(r) for r in result.train])},
               "test": {"test": _dataset("test", [public_row(r) for r in result.test])},
               "sat_dsat_annotation": {"train": _dataset("sat_dsat_annotation", annotations)},
               "user_preference": {"train": _dataset("user_preference", preference_rows(result))}}
    from convohub.wildfeedback.agreement import agreement

    labelled = [(messages_of(c), result.labels[c["conversation_id"]]["result"]) for c in result.conversations
                if "result" in result.labels.get(c["conversation_id"], {})]
    from convohub.wildfeedback.labels import FeedbackResult

    agree = agreement((t, FeedbackResult.from_dict(r)) for t, r in labelled)
    b = result.backends
    provenance = (
        f"Built by `convohub datasets build {DATASET_NAME}` from {len(convs)} conversations of the seeded "
        f"WildChat-format sample corpus (`generate_wildchat_sample(n_users={n_users}, seed={settings.seed})`, "
        "synthetic, no real user data), normalised and PII-scrubbed like `wildchat-sample`.\n\n"
        f"- feedback labels: `{b['labeller']}`"
        + (" (the transparent lexicon/rule labeller of `convohub.wildfeedback.rules`, standing in for the "
           "GPT-4o SPUR call)" if b["labeller"].startswith("rules:") else "") + "\n"
        f"- preference summaries: `{b['summariser']}`"
        + (" (sentences written by rules from the DSAT labels and the user's own words)"
           if b["summariser"] == RULES_NAME else "")
        + ("; chosen and measured as in *Preference summary quality* below" if summary_comparison else "")
        + "\n"
        "- expert `chosen`: " + ("the conversation's own later assistant response that answered the user's "
                                  "feedback (the revised answer), not a newly generated response" if b["expert"] is None
                                  else f"generated by `{b['expert']}` from the preferences plus \"The response "
                                       "should be safe.\"") + "\n"
        "- on-policy: " + (_on_policy_line(b, result.counts.get("on_policy") or {}) if b["policy"] and b["judge"]
                            else result.on_policy_note)
        + ("" if b.get("moderator") is None else
           f"\n- moderation: every generated response was reviewed by `{b['moderator']}` "
           "(`convohub.wildfeedback.moderation`); only responses it called safe entered a pair "
           f"(dropped: {_moderation_drops(result.counts)})" + _moderation_choice(moderation_comparison)))
    gold = gold_section(gold_comparison, b["labeller"])
    agreement_table = markdown_table(
        ["signal", "accuracy", "precision", "recall", "F1", "kappa", "reference positives", "turns"],
        [[k, *(f"{100 * v[m]:.1f}" for m in ("accuracy", "precision", "recall", "f1", "kappa")),
          int(v["support"]), int(v["turns"])] for k, v in agree.items()])
    stats = {"table1": table1(annotations), "counts": result.counts, "agreement": agree}
    from convohub.wildfeedback.summary_agreement import summary_choice_line

    summary_gold = (summary_choice_line(summary_comparison) if summary_comparison else
                    "Not measured in this build; `convohub.wildfeedback.summary_agreement.summary_agreement` "
                    "measures any summariser on the hand-written set.")
    return _write(target, repo, configs, provenance, stats, table6({"wildfeedback": [public_row(r) for r in result.train],
                                                                    "test": [public_row(r) for r in result.test]}),
                  agreement_table, license_id="cc-by-4.0", gold=gold, summary_gold=summary_gold)


def build_from_source(target: HubTarget, repo: Path, source: Path) -> Path:
    from convohub.wildfeedback import source as src

    folder = Path(source)
    present = {c: folder / f for c, f in src.FILES.items() if (folder / f).exists()}
    if not present:
        raise FileNotFoundError(f"{folder} holds none of {sorted(src.FILES.values())}; download them from the "
                                "microsoft/WildFeedback dataset repository")
    configs: dict[str, dict[str, Any]] = {}
    stats: dict[str, Any] = {"files": {c: p.name for c, p in present.items()}}
    t6: list[list[Any]] = []
    if "wildfeedback" in present:
        rows = list(src.read_wildfeedback(present["wildfeedback"]))
        configs["wildfeedback"] = {"train": _dataset("wildfeedback", rows)}
        t6 = table6({"wildfeedback": rows}) if rows else []
    if "sat_dsat_annotation" in present:
        import datasets

        path = present["sat_dsat_annotation"]
        features = _features("sat_dsat_annotation")
        ds = datasets.Dataset.from_generator(
            lambda: ({**r, "summary": None} for r in src.read_annotations(path)), features=features)
        configs["sat_dsat_annotation"] = {"train": ds}
        stats["table1"] = table1(ds)
    if "user_preference" in present:
        configs["user_preference"] = {"train": _dataset("user_preference",
                                                        list(src.read_user_preferences(present["user_preference"])))}
    provenance = (f"Normalised from the released files {', '.join(f'`{p.name}`' for p in present.values())} by "
                  f"`convohub datasets build {DATASET_NAME} --source ...` (streamed; every text PII-scrubbed). "
                  "Files that were absent give no config. The release has no held-out test set, so the `test` "
                  "config is built only by the pipeline.")
    return _write(target, repo, configs, provenance, stats, t6, "", license_id="odc-by",
                  gold="(not measured: the labels come from the release)",
                  summary_gold="(not measured: the preferences come from the release)")


def _write(target: HubTarget, repo: Path, configs: dict[str, Any], provenance: str, stats: Mapping[str, Any],
           t6: list[list[Any]], agreement_table: str, license_id: str, gold: str, summary_gold: str) -> Path:
    t1 = stats.get("table1")
    body = Template((repo / "dataset_scripts" / "wildfeedback" / "card.md").read_text(encoding="utf-8")).substitute(
        provenance=provenance,
        pii_scope=SCRUB_SCOPE,
        not_scrubbed=NOT_SCRUBBED,
        table1=markdown_table(list(t1), [list(t1.values())]) if t1 else "(no `sat_dsat_annotation` config built)",
        table6=markdown_table(["config", "variant", "# pairs", "prompt length", "response length", "multi-turn"], t6)
        if t6 else "(no preference pairs built)",
        agreement=agreement_table or "(not measured: labels come from the release)",
        gold=gold,
        summary_gold=summary_gold,
        counts=_counts_table(stats["counts"]) if "counts" in stats else "(normalised release: no pipeline stages)",
    )
    card = DatasetCardInfo(
        pretty_name="WildFeedback (convohub build)", license=license_id, description=body, citation=CITATION,
        language=("en", "es", "fr", "de", "zh", "ru", "pt"),
        task_categories=("text-generation",), tags=("convohub", "wildfeedback", "preference", "dpo", "wildchat"),
    )
    return write_dataset(target, DATASET_NAME, configs, card, default_config="wildfeedback")


__all__ = ["DATASET_NAME", "PAIR_COLUMNS", "build_from_pipeline", "build_from_source", "table1", "table6"]
