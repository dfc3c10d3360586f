"""How well a feedback labeller agrees with gold SAT/DSAT labels: the paper's Table 5 statistics.

Two references:

* the **hand-labelled set** (:func:`load_gold`, package data ``convohub/data/wildfeedback_feedback_gold.json``):
  conversations written and labelled by hand for convohub -- not produced by the sample generator, whose
  phrase pools the rules were built from -- with SPUR labels per user turn. :func:`compare_on_gold` measures
  the rules and an LLM labeller on it and picks the offline default (the one with the higher mean Cohen's
  kappa over SAT and DSAT); the release caches the measurement under its work dir.
* the **sample generator's markers** (:func:`reference_kind`, :func:`agreement`): every feedback utterance of
  :func:`convohub.conversations.generate_wildchat_sample` comes from a known phrase pool, so the kind is
  recoverable. The rules were written from the same pools, so this agreement is circular: a consistency
  check of the built dataset, not a quality figure.

Statistics are turn level over user turns after the first (T-1 has no previous AI reply to react to):
accuracy, precision, recall, F1 and Cohen's kappa of the binary "has a SAT (DSAT) label" flag, computed
with scikit-learn.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from convohub.wildfeedback.labels import DSAT_LABELS, NA, SAT_LABELS, FeedbackResult

SAT_KINDS = ("praise", "thanks")
DSAT_KINDS = ("correction", "refinement", "negative")
GOLD_FILE = "wildfeedback_feedback_gold.json"
MIN_GOLD_CONVERSATIONS = 60
#: How the offline default is chosen between labellers measured on the hand-labelled set.
CHOICE_RULE = "higher mean Cohen's kappa over SAT and DSAT on the hand-labelled set (ties go to the rules)"


class GoldSetError(ValueError):
    """The hand-labelled set is malformed; the message names the conversation and the field."""


@dataclass(frozen=True)
class GoldConversation:
    id: str
    language: str
    turns: list[dict[str, str]]
    #: ``(satisfaction, dissatisfaction)`` label lists per user turn
    labels: list[tuple[list[str], list[str]]]


def gold_path() -> Path:
    return Path(str(resources.files("convohub") / "data" / GOLD_FILE))


def _check_labels(value: Any, allowed: Sequence[str], where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise GoldSetError(f"{where}: expected a non-empty list of labels, got {value!r}")
    unknown = [v for v in value if v not in allowed]
    if unknown:
        raise GoldSetError(f"{where}: {unknown} not in the label vocabulary {list(allowed)}")
    if NA in value and len(value) > 1:
        raise GoldSetError(f"{where}: 'N/A' next to real labels {value}")
    return list(value)


def parse_gold(doc: Mapping[str, Any], source: str = GOLD_FILE) -> list[GoldConversation]:
    """Validate the gold document; :class:`GoldSetError` names the conversation and field at fault."""
    convs = doc.get("conversations")
    if not isinstance(convs, list):
        raise GoldSetError(f"{source}: missing 'conversations' list")
    out, seen = [], set()
    for i, c in enumerate(convs):
        cid = c.get("id") if isinstance(c, Mapping) else None
        where = f"{source} conversation {cid or i}"
        if not cid or cid in seen:
            raise GoldSetError(f"{where}: missing or duplicate id")
        seen.add(cid)
        turns = c.get("turns")
        if not isinstance(turns, list) or not all(
                isinstance(t, Mapping) and t.get("role") in ("user", "assistant") and isinstance(t.get("content"), str)
                and t["content"].strip() for t in turns):
            raise GoldSetError(f"{where}: turns must be non-empty {{'role': user|assistant, 'content'}} objects")
        n_users = sum(t["role"] == "user" for t in turns)
        if not 2 <= n_users <= 4:
            raise GoldSetError(f"{where}: {n_users} user turns, expected 2-4")
        labels = c.get("labels")
        if not isinstance(labels, list) or len(labels) != n_users:
            raise GoldSetError(f"{where}: expected {n_users} label objects (one per user turn)")
        pairs = []
        for k, lab in enumerate(labels, 1):
            sat = _check_labels(lab.get("satisfaction"), SAT_LABELS, f"{where} T-{k} satisfaction")
            dsat = _check_labels(lab.get("dissatisfaction"), DSAT_LABELS, f"{where} T-{k} dissatisfaction")
            if k == 1 and (sat != [NA] or dsat != [NA]):
                raise GoldSetError(f"{where} T-1: the first user turn has no AI reply to react to; label it N/A")
            pairs.append((sat, dsat))
        out.append(GoldConversation(cid, str(c.get("language", "")), [dict(t) for t in turns], pairs))
    if len(out) < MIN_GOLD_CONVERSATIONS:
        raise GoldSetError(f"{source}: {len(out)} conversations, at least {MIN_GOLD_CONVERSATIONS} needed")
    return out


@lru_cache(maxsize=1)
def load_gold() -> tuple[GoldConversation, ...]:
    """The hand-labelled set shipped with convohub (validated)."""
    path = gold_path()
    return tuple(parse_gold(json.loads(path.read_text(encoding="utf-8")), str(path)))


def labelling_code_digest() -> str:
    """Digest of the code that turns a conversation into labels (rules, prompts, parsing): a changed prompt
    or rule makes a cached agreement stale even when the model and the gold file are the same."""
    import inspect

    from convohub.wildfeedback import identify, labels, rules, turn_prompts

    text = "".join(inspect.getsource(m) for m in (identify, labels, rules, turn_prompts))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gold_digest() -> str:
    return hashlib.sha256(gold_path().read_bytes()).hexdigest()[:16]


def binary_agreement(gold: Sequence[bool], pred: Sequence[bool]) -> dict[str, float]:
    """Accuracy, precision, recall, F1 (positive class = flag set) and Cohen's kappa, via scikit-learn."""
    from sklearn.metrics import accuracy_score, cohen_kappa_score, precision_recall_fscore_support

    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold flags but {len(pred)} predictions")
    if not gold:
        nan = float("nan")
        return {"accuracy": nan, "precision": nan, "recall": nan, "f1": nan, "kappa": nan, "support": 0.0,
                "turns": 0.0}
    g, p = [bool(x) for x in gold], [bool(x) for x in pred]
    precision, recall, f1, _ = precision_recall_fscore_support(g, p, average="binary", pos_label=True,
                                                               zero_division=0)
    kappa = cohen_kappa_score(g, p) if len(set(g) | set(p)) > 1 else float("nan")
    return {"accuracy": float(accuracy_score(g, p)), "precision": float(precision), "recall": float(recall),
            "f1": float(f1), "kappa": float(kappa), "support": float(sum(g)), "turns": float(len(g))}


def gold_agreement(gold: Sequence[GoldConversation], results: Sequence[FeedbackResult | None]) -> dict[str, Any]:
    """SAT and DSAT agreement of per-conversation results with the gold labels; a failed conversation
    (None) counts as predicting no feedback on its turns and is counted under ``failed_conversations``."""
    flags: dict[str, tuple[list[bool], list[bool]]] = {"SAT": ([], []), "DSAT": ([], [])}
    failed = 0
    for conv, result in zip(gold, results, strict=True):
        failed += result is None
        for k, (sat, dsat) in enumerate(conv.labels[1:], 1):
            pred = result.turns[k] if result is not None else None
            flags["SAT"][0].append(sat != [NA])
            flags["SAT"][1].append(bool(pred and pred.sat))
            flags["DSAT"][0].append(dsat != [NA])
            flags["DSAT"][1].append(bool(pred and pred.dsat))
    out: dict[str, Any] = {name: binary_agreement(g, p) for name, (g, p) in flags.items()}
    out["failed_conversations"] = failed
    out["mean_kappa"] = (out["SAT"]["kappa"] + out["DSAT"]["kappa"]) / 2
    return out


def measure_labeller(label: Callable[[list[list[dict[str, str]]]], list[FeedbackResult | None]],
                     gold: Sequence[GoldConversation] | None = None) -> dict[str, Any]:
    """Run ``label`` over the gold conversations and score it (with the wall time it took)."""
    gold = list(gold if gold is not None else load_gold())
    start = time.perf_counter()
    results = label([c.turns for c in gold])
    out = gold_agreement(gold, results)
    out["seconds"] = round(time.perf_counter() - start, 1)
    out["conversations"] = len(gold)
    return out


def compare_on_gold(backend: Any | None, cache_dir: Path | None = None, *, prompt_style: str | None = None,
                    max_attempts: int = 3, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The rules and ``backend`` (if any) measured on the hand-labelled set, plus the chosen default.

    Returns ``{"gold": {...}, "labellers": {name: agreement}, "rules": name, "llm": name|None,
    "chosen": name, "choice_rule": ...}``. With ``cache_dir`` the LLM answers are cached there and the
    whole result is stored in ``cache_dir/gold_agreement-<key>.json``, keyed by the gold file, the labeller,
    the model's identity (weights hash) and the labelling code (:func:`labelling_code_digest`), so a release
    re-run measures nothing twice and a changed prompt is measured again.
    """
    from convohub.llm import CachedBackend
    from convohub.wildfeedback.identify import identify_many, labeller_label
    from convohub.wildfeedback.turn_prompts import MIN_ATTEMPTS

    gold = list(load_gold())
    rules_name = labeller_label(None)
    llm_name = labeller_label(backend, prompt_style) if backend is not None else None
    fingerprint = {"gold": gold_digest(), "rules": rules_name, "llm": llm_name,
                   "identity": backend.identity() if backend is not None else None, "attempts": max_attempts,
                   "split_min_attempts": MIN_ATTEMPTS, "code": labelling_code_digest()}
    key = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = cache_dir / f"gold_agreement-{key}.json" if cache_dir is not None else None
    if path is not None and path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("fingerprint") == fingerprint:
            return saved["value"]

    def run(b: Any) -> Callable[[list[list[dict[str, str]]]], list[FeedbackResult | None]]:
        return lambda convs: [o.result for o in identify_many(convs, b, max_attempts=max_attempts, progress=False,
                                                              prompt_style=prompt_style)]

    labellers = {rules_name: measure_labeller(run(None), gold)}
    if backend is not None:
        cached = backend if cache_dir is None or isinstance(backend, CachedBackend) else CachedBackend(
            backend, cache_dir / "llm-cache")
        labellers[llm_name] = measure_labeller(run(cached), gold)
    chosen = rules_name
    if llm_name is not None and labellers[llm_name]["mean_kappa"] > labellers[rules_name]["mean_kappa"]:
        chosen = llm_name
    n_turns = sum(len(c.labels) - 1 for c in gold)
    value = {"gold": {"file": GOLD_FILE, "conversations": len(gold), "scored_turns": n_turns,
                      "sat_turns": sum(s != [NA] for c in gold for s, _ in c.labels[1:]),
                      "dsat_turns": sum(d != [NA] for c in gold for _, d in c.labels[1:]),
                      "languages": sorted({c.language for c in gold})},
             "labellers": labellers, "rules": rules_name, "llm": llm_name, "chosen": chosen,
             "choice_rule": CHOICE_RULE}
    for name, agree in labellers.items():
        log(f"gold agreement of {name}: SAT F1 {agree['SAT']['f1']:.3f} kappa {agree['SAT']['kappa']:.3f}, "
            f"DSAT F1 {agree['DSAT']['f1']:.3f} kappa {agree['DSAT']['kappa']:.3f} ({agree['seconds']} s)")
    if path is not None:
        from convohub.hub import atomic_write_text

        atomic_write_text(path, json.dumps({"fingerprint": fingerprint, "value": value}, ensure_ascii=False,
                                           indent=1))
    return value


def agreement_rows(comparison: Mapping[str, Any]) -> list[list[Any]]:
    """Card table rows: labeller, signal, accuracy, precision, recall, F1, kappa (percent), positives, turns."""
    rows = []
    for name, agree in comparison["labellers"].items():
        for signal in ("SAT", "DSAT"):
            v = agree[signal]
            rows.append([f"`{name}`" + (" (chosen)" if name == comparison["chosen"] else ""), signal,
                         *(f"{100 * v[m]:.1f}" for m in ("accuracy", "precision", "recall", "f1", "kappa")),
                         int(v["support"]), int(v["turns"])])
    return rows


# --- the sample generator's markers (circular: see the module docstring) -----------------------------


def _template_rx(template: str) -> str:
    return re.sub(r"\\\{[a-z0-9_]+\\\}", ".+?", re.escape(template))


@lru_cache(maxsize=1)
def _pools() -> list[tuple[str, re.Pattern[str]]]:
    from convohub.conversations import sample_text as st

    pools: dict[str, list[str]] = {
        "praise": list(st.PRAISE), "thanks": list(st.THANKS), "negative": list(st.NEGATIVE),
        "correction": list(st.GENERIC_CORRECTIONS) + [c for t in st.TOPICS.values() for c in t.corrections],
        "refinement": [request for request, _ in st.REFINEMENTS],
    }
    for table in st.LOCALIZED.values():
        for kind in ("praise", "thanks", "correction", "refinement"):
            pools[kind].extend(table[kind])
    return [(kind, re.compile(rf"\s*(?:{'|'.join(_template_rx(t) for t in texts)})\s*", re.DOTALL))
            for kind, texts in pools.items()]


def reference_kind(text: str) -> str | None:
    """The generator's feedback kind of a user utterance (praise, thanks, correction, refinement,
    negative), or None for a non-feedback turn. A PII sentence appended by the generator is tolerated."""
    for kind, pattern in _pools():
        if pattern.fullmatch(text) or pattern.match(text):
            return kind
    return None


def agreement(items: Iterable[tuple[Sequence[Mapping[str, str]], FeedbackResult]]) -> dict[str, Any]:
    """Turn-level SAT and DSAT agreement of labelled conversations with :func:`reference_kind`."""
    gold_sat: list[bool] = []
    gold_dsat: list[bool] = []
    pred_sat: list[bool] = []
    pred_dsat: list[bool] = []
    for turns, result in items:
        users = [t["content"] for t in turns if t["role"] == "user"]
        for text, label in list(zip(users, result.turns, strict=True))[1:]:
            kind = reference_kind(text)
            gold_sat.append(kind in SAT_KINDS)
            gold_dsat.append(kind in DSAT_KINDS)
            pred_sat.append(label.sat)
            pred_dsat.append(label.dsat)
    return {"SAT": binary_agreement(gold_sat, pred_sat), "DSAT": binary_agreement(gold_dsat, pred_dsat)}
