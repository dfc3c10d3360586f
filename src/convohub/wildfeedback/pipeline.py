"""The WildFeedback pipeline end to end, stage by stage, resumable under a work folder.

Stages (each logs its counts into ``counts``; each writes ``<work>/<stage>.json`` atomically when done and
is skipped on the next run when that file exists for the same settings; LLM calls go through a
:class:`~convohub.llm.CachedBackend` under ``<work>/llm-cache`` so an interrupted stage repeats no call; both
mechanisms are :mod:`convohub.stages`'):

1. ``labels`` -- feedback signal identification of every multi-turn conversation (one call each);
2. ``summaries`` -- preference summaries of the DSAT conversations;
3. ``pairs`` -- preference pairs: the expert variant always, the on-policy variant when a policy and a
   judge are given (kept only when the checklist judge prefers the guided response: outcome "win"; ties,
   losses and judge parse failures are dropped and counted); pairs with chosen == rejected dropped; every
   generated response passes the moderator (:mod:`convohub.wildfeedback.moderation`) first;
4. ``split`` -- test users' pairs -> clustered, de-duplicated test set; everyone else's -> train.

Offline (no backend) the expert "chosen" response is the conversation's own later assistant response that
answered the user's feedback (the revised answer); with a backend it is generated from the preferences plus
the safety instruction, as in the paper.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.llm import ChatBackend, ChatRequest, run_chat
from convohub.stages import cached, digest, stage
from convohub.wildfeedback.identify import group_turns, identify_many, labeller_label
from convohub.wildfeedback.labels import NA, FeedbackResult
from convohub.wildfeedback.preferences import guided_messages, summarise_many, summariser_name
from convohub.wildfeedback.split import is_test_user, select_test

VARIANT_EXPERT = "expert"
VARIANT_ON_POLICY = "on_policy"
RESPONSE_MAX_NEW_TOKENS = 1024


@dataclass
class Settings:
    """Everything that changes the output (part of each stage's fingerprint)."""

    test_clusters: int = 8
    test_per_cluster: int = 3
    near_duplicate: float = 0.95
    max_attempts: int = 3
    seed: int = 0
    response_max_new_tokens: int = RESPONSE_MAX_NEW_TOKENS
    label_max_new_tokens: int = 2048
    #: cap on the training users' episodes the policy answers for the on-policy variant (a seeded sample;
    #: None = every one). Test users' episodes are never answered: the test set takes expert rows only.
    on_policy_max_episodes: int | None = None


@dataclass
class Backends:
    """Which model does what; ``None`` = the offline stand-in (or, for the on-policy pair, skip).

    ``labeller_style`` is the labelling prompt style (``"split"``/``"full"``; None = the backend's default,
    see :func:`convohub.wildfeedback.identify.default_prompt_style`); ``summariser_style`` the preference
    summary prompt style (``"full"``, the paper's single prompt, or ``"episode"``; see
    :mod:`convohub.wildfeedback.preferences`).
    """

    labeller: ChatBackend | None = None
    summariser: ChatBackend | None = None
    expert: ChatBackend | None = None
    policy: ChatBackend | None = None
    judge: ChatBackend | None = None
    #: reviews every generated response before it enters a pair; required when anything is generated (an
    #: LLM or :class:`convohub.wildfeedback.moderation.EmbeddingModerator`)
    moderator: Any = None
    labeller_style: str | None = None
    summariser_style: str = "full"

    def models(self) -> dict[str, ChatBackend | None]:
        return {k: getattr(self, k) for k in _ROLES}

    def describe(self) -> dict[str, str | None]:
        """Backend name per role; the labeller's entry is its full name (rules or model + prompt style)."""
        out = {k: (None if v is None else v.name) for k, v in self.models().items()}
        out["labeller"] = labeller_label(self.labeller, self.labeller_style)
        out["summariser"] = summariser_name(self.summariser, self.summariser_style)
        return out


_ROLES = ("labeller", "summariser", "expert", "policy", "judge", "moderator")


@dataclass
class PipelineResult:
    conversations: list[dict[str, Any]]
    labels: dict[str, dict[str, Any]]
    summaries: dict[str, list[dict]]
    train: list[dict[str, Any]]
    test: list[dict[str, Any]]
    counts: dict[str, Any] = field(default_factory=dict)
    backends: dict[str, str | None] = field(default_factory=dict)
    on_policy_note: str = ""


def messages_of(conv: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"role": t["role"], "content": t["content"]} for t in conv["turns"]]


def _user_positions(turns: Sequence[Mapping[str, str]]) -> list[int]:
    return [i for i, t in enumerate(turns) if t["role"] == "user"]


def _response_after(turns: Sequence[Mapping[str, str]], pos: int) -> str | None:
    nxt = pos + 1
    return turns[nxt]["content"] if nxt < len(turns) and turns[nxt]["role"] == "assistant" else None


def _same(a: str, b: str) -> bool:
    return re.sub(r"\s+", " ", a).strip() == re.sub(r"\s+", " ", b).strip()


def episode_rows(conv: Mapping[str, Any], result: FeedbackResult, summary: list[dict]) -> tuple[list[dict], Counter]:
    """Pair skeletons (everything but ``chosen``/``variant``) plus ``revised`` (the offline chosen)."""
    turns = messages_of(conv)
    positions = _user_positions(turns)
    dropped: Counter[str] = Counter()
    rows = []
    for entry in summary:
        q = entry["query"]
        rejected = _response_after(turns, positions[q - 1])
        dsat_after = [k for k in range(q + 1, len(positions) + 1) if result.turns[k - 1].dsat]
        if rejected is None:
            dropped["no_response_to_query"] += 1
            continue
        if not dsat_after:
            dropped["no_dsat_after_query"] += 1
            continue
        run = [dsat_after[0]]
        while run[-1] + 1 <= len(positions) and result.turns[run[-1]].dsat:
            run.append(run[-1] + 1)
        after = run + ([run[-1] + 1] if run[-1] < len(positions) else [])
        revised = _response_after(turns, positions[run[-1] - 1])
        query_label = result.turns[q - 1]
        rows.append({
            "id": f"{conv['conversation_id']}-q{q}",
            "conversation_id": conv["conversation_id"],
            "user_id": conv["user_id"],
            "prompt": turns[: positions[q - 1] + 1],
            "preferences": list(entry["preferences"]),
            "rejected": rejected,
            "revised": revised,
            "sat_labels": list(dict.fromkeys(s for k in after for s in result.turns[k - 1].satisfaction if s != NA)),
            "dsat_labels": list(dict.fromkeys(d for k in run for d in result.turns[k - 1].dissatisfaction if d != NA)),
            "domain": query_label.domain,
            "intent": query_label.intent,
            "query": q,
        })
    return rows, dropped


def _generate(backend: ChatBackend, chats: Sequence[list[dict[str, str]]], max_new_tokens: int,
              desc: str) -> list[str | None]:
    requests = [ChatRequest(messages=m, max_new_tokens=max_new_tokens, temperature=0.0) for m in chats]
    responses = run_chat(backend, requests, desc=desc)
    return [r.text.strip() if r.ok and r.text.strip() else None for r in responses]


def _moderated(texts: list[str | None], moderator: Any, counts: Counter) -> list[str | None]:
    """``texts`` with every response the moderator did not call safe replaced by None (counted)."""
    from convohub.wildfeedback.moderation import moderate

    present = [i for i, t in enumerate(texts) if t is not None]
    verdicts = moderate([texts[i] for i in present], moderator)
    out = list(texts)
    for i, verdict in zip(present, verdicts, strict=True):
        if not verdict.keep:
            counts["dropped_moderation_flagged" if verdict.flagged else "dropped_moderation_unanswered"] += 1
            out[i] = None
    counts["moderated_responses"] += len(present)
    return out


def expert_pairs(skeletons: Sequence[dict], backend: ChatBackend | None, max_new_tokens: int,
                 moderator: Any = None) -> tuple[list[dict], Counter]:
    """Expert variant: the response generated with the preferences (moderated), or offline the conversation's
    own revised response."""
    counts: Counter[str] = Counter(episodes=len(skeletons))
    if backend is None:
        chosen = [s["revised"] for s in skeletons]
    else:
        if moderator is None:
            raise ValueError("expert responses are generated: pass a moderator (Backends.moderator)")
        chosen = _generate(backend, [guided_messages(s["prompt"], s["preferences"]) for s in skeletons],
                           max_new_tokens, "expert responses")
    moderated = chosen if backend is None else _moderated(chosen, moderator, counts)
    out = []
    for s, c, kept in zip(skeletons, chosen, moderated, strict=True):
        if c is not None and kept is None:
            continue  # the moderator did not call it safe (counted in _moderated)
        if c is None:
            counts["dropped_no_chosen" if backend is None else "dropped_generation_failed"] += 1
        elif _same(c, s["rejected"]):
            counts["dropped_chosen_equals_rejected"] += 1
        else:
            out.append({**s, "variant": VARIANT_EXPERT, "chosen": c})
    counts["pairs"] = len(out)
    return out, counts


def on_policy_pairs(skeletons: Sequence[dict], policy: ChatBackend, judge: ChatBackend,
                    max_new_tokens: int, judge_max_new_tokens: int = 1024, *,
                    moderator: Any) -> tuple[list[dict], Counter]:
    """Policy with vs without preferences, both moderated, kept when the checklist judge prefers the guided one."""
    from convohub.metrics.checklist_judge import judge_pairs

    counts: Counter[str] = Counter(episodes=len(skeletons))
    guided = _generate(policy, [guided_messages(s["prompt"], s["preferences"]) for s in skeletons],
                       max_new_tokens, "on-policy guided")
    plain = _generate(policy, [list(s["prompt"]) for s in skeletons], max_new_tokens, "on-policy zero-shot")
    guided_ok, plain_ok = _moderated(guided, moderator, counts), _moderated(plain, moderator, counts)
    ready = []
    for s, g, p, g_ok, p_ok in zip(skeletons, guided, plain, guided_ok, plain_ok, strict=True):
        if g is not None and p is not None and (g_ok is None or p_ok is None):
            counts["dropped_moderation"] += 1
        elif g is None or p is None:
            counts["dropped_generation_failed"] += 1
        elif _same(g, p):
            counts["dropped_chosen_equals_rejected"] += 1
        else:
            ready.append((s, g, p))
    if not ready:
        counts["pairs"] = 0
        return [], counts
    judgements = judge_pairs([g for _, g, _ in ready], [p for _, _, p in ready],
                             [s["prompt"][:-1] for s, _, _ in ready], [s["prompt"][-1]["content"] for s, _, _ in ready],
                             [s["preferences"] for s, _, _ in ready], judge, max_new_tokens=judge_max_new_tokens)
    out = []
    for (s, g, p), j in zip(ready, judgements, strict=True):
        outcome = j.outcome
        counts[f"judge_{outcome or 'parse_failure'}"] += 1
        if outcome == "win":
            # the policy is part of the variant ("on_policy:<model>"), so variants sit side by side (Table 6)
            out.append({**s, "variant": f"{VARIANT_ON_POLICY}:{policy.model_id}", "chosen": g, "rejected": p})
    counts["pairs"] = len(out)
    return out, counts


def on_policy_sample(skeletons: Sequence[dict], cap: int | None, seed: int) -> list[dict]:
    """The training users' skeletons the policy answers: all of them, or a seeded sample of ``cap`` (in
    their original order, so the sample is stable when the cap grows)."""
    train = [s for s in skeletons if not is_test_user(s["user_id"])]
    if cap is None or cap >= len(train):
        return train
    if cap < 0:
        raise ValueError(f"on_policy_max_episodes must be >= 0 or None, got {cap}")
    ranked = sorted(range(len(train)), key=lambda i: digest([seed, train[i]["id"]]))
    keep = set(ranked[:cap])
    return [s for i, s in enumerate(train) if i in keep]


PAIR_COLUMNS = ("id", "conversation_id", "user_id", "variant", "prompt", "preferences", "chosen", "rejected",
                "sat_labels", "dsat_labels", "domain", "intent")


def public_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in PAIR_COLUMNS}


def run_pipeline(conversations: Sequence[Mapping[str, Any]], work: Path, backends: Backends | None = None,
                 settings: Settings | None = None, log: Callable[[str], None] = print) -> PipelineResult:
    """Run every stage over normalised (PII-scrubbed) conversation records; see the module docstring."""
    backends = backends or Backends()
    settings = settings or Settings()
    if (backends.expert is not None or backends.policy is not None) and backends.moderator is None:
        raise ValueError("the pipeline generates responses (expert or policy backend given) but has no "
                         "moderator: pass Backends(moderator=...) (an LLM or the zero-shot EmbeddingModerator; its name goes "
                         "into the card)")
    work.mkdir(parents=True, exist_ok=True)
    b = Backends(**{k: cached(v, work) for k, v in backends.models().items()},
                 labeller_style=backends.labeller_style, summariser_style=backends.summariser_style)
    counts: dict[str, Any] = {}
    multi = [dict(c) for c in conversations if len(group_turns(messages_of(c))) >= 2]
    counts["conversations"] = len(conversations)
    counts["multi_turn_conversations"] = len(multi)
    # each stage's fingerprint holds what it (and the stages before it) read, so a test-split setting
    # (clusters, seed, near-duplicate threshold) never invalidates the labels, summaries or pairs
    labels_fp = {"data": digest([c["conversation_id"] for c in multi]), "labeller": backends.describe()["labeller"],
                 "max_attempts": settings.max_attempts, "label_max_new_tokens": settings.label_max_new_tokens}
    summaries_fp = {**labels_fp, "summariser": backends.describe()["summariser"]}
    pairs_fp = {**summaries_fp, **backends.describe(), "response_max_new_tokens": settings.response_max_new_tokens,
                "on_policy_max_episodes": settings.on_policy_max_episodes, "seed": settings.seed}

    def _labels() -> dict[str, Any]:
        outcomes = identify_many([messages_of(c) for c in multi], b.labeller, max_attempts=settings.max_attempts,
                                 max_new_tokens=settings.label_max_new_tokens, prompt_style=b.labeller_style)
        return {c["conversation_id"]: ({"result": o.result.to_dict()} if o.result else {"errors": o.errors})
                for c, o in zip(multi, outcomes, strict=True)}

    labels = stage(work, "labels", labels_fp, _labels)
    results = {cid: FeedbackResult.from_dict(v["result"]) for cid, v in labels.items() if "result" in v}
    counts["labelling_failures"] = sum("errors" in v for v in labels.values())
    counts["sat_conversations"] = sum(r.sat for r in results.values())
    counts["dsat_conversations"] = sum(r.dsat for r in results.values())
    counts["sat_utterances"] = sum(t.sat for r in results.values() for t in r.turns)
    counts["dsat_utterances"] = sum(t.dsat for r in results.values() for t in r.turns)
    log(f"labels: {len(results)} labelled, {counts['labelling_failures']} failures, "
        f"SAT {counts['sat_conversations']}, DSAT {counts['dsat_conversations']} conversations")

    dsat = [c for c in multi if c["conversation_id"] in results and results[c["conversation_id"]].dsat]

    def _summaries() -> dict[str, Any]:
        out = summarise_many([(messages_of(c), results[c["conversation_id"]]) for c in dsat], b.summariser,
                             max_attempts=settings.max_attempts, prompt_style=b.summariser_style)
        return {c["conversation_id"]: ({"summary": s} if s is not None else {"errors": e})
                for c, (s, e) in zip(dsat, out, strict=True)}

    summaries_raw = stage(work, "summaries", summaries_fp, _summaries)
    summaries = {cid: v["summary"] for cid, v in summaries_raw.items() if "summary" in v}
    counts["summary_failures"] = sum("errors" in v for v in summaries_raw.values())
    counts["episodes"] = sum(len(s) for s in summaries.values())
    log(f"summaries: {len(summaries)} conversations, {counts['episodes']} feedback episodes, "
        f"{counts['summary_failures']} failures")

    def _pairs() -> dict[str, Any]:
        skeletons: list[dict] = []
        dropped: Counter[str] = Counter()
        for c in dsat:
            if c["conversation_id"] in summaries:
                rows, d = episode_rows(c, results[c["conversation_id"]], summaries[c["conversation_id"]])
                skeletons.extend(rows)
                dropped.update(d)
        expert, expert_counts = expert_pairs(skeletons, b.expert, settings.response_max_new_tokens, b.moderator)
        value: dict[str, Any] = {"skeleton_drops": dict(dropped), "expert": expert, "expert_counts": dict(expert_counts)}
        if b.policy is not None and b.judge is not None:
            chosen_for_policy = on_policy_sample(skeletons, settings.on_policy_max_episodes, settings.seed)
            policy_rows, policy_counts = on_policy_pairs(chosen_for_policy, b.policy, b.judge,
                                                         settings.response_max_new_tokens, moderator=b.moderator)
            policy_counts["training_user_episodes"] = sum(not is_test_user(s["user_id"]) for s in skeletons)
            value.update(on_policy=policy_rows, on_policy_counts=dict(policy_counts))
        return value

    pairs = stage(work, "pairs", pairs_fp, _pairs)
    counts["episode_drops"] = pairs["skeleton_drops"]
    counts["expert"] = pairs["expert_counts"]
    all_pairs = list(pairs["expert"])
    note = ""
    if "on_policy" in pairs:
        counts["on_policy"] = pairs["on_policy_counts"]
        all_pairs += pairs["on_policy"]
    else:
        note = ("The on-policy variant was not built: it needs a policy model and a checklist judge "
                "(convohub.metrics.checklist_judge has no offline judge; a tiny local model as judge only "
                "produces parse failures, which are never counted as wins).")
    log(f"pairs: expert {counts['expert']}, on-policy {counts.get('on_policy', 'skipped')}")

    test_pool = [r for r in all_pairs if r["variant"] == VARIANT_EXPERT and is_test_user(r["user_id"])]
    train = [r for r in all_pairs if not is_test_user(r["user_id"])]
    counts["held_out_user_pairs"] = sum(is_test_user(r["user_id"]) for r in all_pairs)
    test, split_counts = select_test(test_pool, train, n_clusters=settings.test_clusters,
                                     per_cluster=settings.test_per_cluster, seed=settings.seed,
                                     near_duplicate=settings.near_duplicate)
    counts["split"] = split_counts
    counts["train_pairs"] = dict(Counter(r["variant"] for r in train))
    log(f"split: train {counts['train_pairs']}, test {len(test)} (pool {len(test_pool)})")
    return PipelineResult(conversations=[dict(c) for c in conversations], labels=labels, summaries=summaries,
                          train=train, test=test, counts=counts, backends=backends.describe(), on_policy_note=note)
