"""Suggested-question quality for ProMISe-style dialogues: ``evaluate`` adapter.

The scoring lives in ``convohub.metrics.sq_quality``; this module declares inputs and forwards.
"""

import datasets
import evaluate

from convohub.metrics.sq_quality import sq_quality

_DESCRIPTION = """\
Diversity of the suggested questions (SQs) of each turn and their closeness to the user's hidden intent:
Self-BLEU among a turn's SQs (lower = more diverse), MS-TTR (mean type-token ratio over 50-word segments of
all SQs pooled), BLEU of the intent against the turn's SQs (sacrebleu sentence BLEU), and BERTScore F1 of each
SQ against the intent (the bert-score package; default model: the bundled all-MiniLM-L6-v2, layer 5, no
baseline rescaling).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[list[str]]`): the suggested questions of each turn.
    references (`list[str]`): the intent behind each turn.
    model_name_or_path (`str`, optional): BERTScore's model (a transformers folder or Hub id); defaults to the
        bundled all-MiniLM-L6-v2 (offline).
    num_layers (`int`, optional): the model layer BERTScore matches; default 5 for the bundled MiniLM (give it
        for any other model).
    with_bertscore (`bool`, optional): set False to skip BERTScore (no model load, no bertscore key).
    batch_size (`int`, optional): BERTScore batch size, default 64.
Returns:
    `dict[str, float]`: self_bleu, ms_ttr, bleu, bertscore, fractions in [0, 1].
Examples:
    >>> import evaluate
    >>> sq = evaluate.load("evaluation/sq_quality")  # or evaluate.load("convohub/sq_quality") from the Hub
    >>> turns = [["What drones cost under $100?", "Which cheap drone has a camera?"]]
    >>> scores = sq.compute(predictions=turns, references=["buy a cheap drone with a camera"])
    >>> sorted(scores)
    ['bertscore', 'bleu', 'ms_ttr', 'self_bleu']
    >>> round(scores["ms_ttr"], 4), round(scores["self_bleu"], 4)
    (1.0, 0.0657)
    >>> 0.5 < scores["bertscore"] < 1.0
    True
"""

_CITATION = """\
@misc{butala2024promise,
  title  = {{ProMISe}: A Proactive Multi-turn Dialogue Dataset for Information-seeking Intent Resolution},
  author = {Butala, Yash Parag and Garg, Siddhant and Banerjee, Pratyay and Misra, Amita},
  year   = {2024}
}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SQQuality(evaluate.Metric):
    """Self-BLEU, MS-TTR, BLEU and BERTScore of suggested questions."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": datasets.Sequence(datasets.Value("string")),
                "references": datasets.Value("string"),
            }),
        )

    def _compute(self, predictions, references, model_name_or_path=None, num_layers=None, with_bertscore=True,
                 batch_size=64):
        return sq_quality(predictions, references, model_name_or_path=model_name_or_path, num_layers=num_layers,
                          with_bertscore=with_bertscore, batch_size=batch_size)
