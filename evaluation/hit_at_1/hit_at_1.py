"""Hit@1 and relaxed Hit@1 of PerQA answers (ReQAP): ``evaluate`` adapter.

Parsing and matching live in ``convohub.metrics.hit_at_1``; this module only declares inputs and forwards.
"""

import datasets
import evaluate

from convohub.metrics.hit_at_1 import hit_at_1

_DESCRIPTION = """\
Hit@1 for personal question answering: an answer is correct when it matches one of the gold answers after
both are parsed into typed values (numbers, dates, lists, tuples, None) with a safe literal parser. Numbers
are rounded to 2 decimals and may differ by a unit factor (1, 60, 3600, 1000, either way); dates compare as
calendar dates; strings case-insensitively; lists and tuples sorted; a list answer hits when any element
matches; two empty answers match, as do gold None and answer 0. Rlx-Hit@1 also accepts numbers within a
relative slack of the gold value. Both are micro-averaged over questions.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[str | None]`): one answer string per question; None means the run failed (never a
        hit). JSON or Python-literal encodings ("[1, 2]", "('a', 3)", "null") are parsed.
    references (`list[list[str]]`): the gold answers of each question, JSON-encoded typed values.
    relax (`float`, optional): relative numeric slack of Rlx-Hit@1, default 0.1 (the paper also uses 0.2).
Returns:
    `dict[str, float]`: "hit@1" and "rlx_hit@1", fractions in [0, 1].
Examples:
    >>> import evaluate
    >>> hit = evaluate.load("evaluation/hit_at_1")  # or evaluate.load("convohub/hit_at_1") from the Hub
    >>> hit.compute(
    ...     predictions=["42.004", "2 hours", "['Jazz', 'rock']", "95", None],
    ...     references=[["42"], ['"2 hours"'], ['["Rock", "jazz"]'], ["100"], ["1"]],
    ... )
    {'hit@1': 0.6, 'rlx_hit@1': 0.8}
    >>> hit.compute(predictions=[None, "3"], references=[["3"], ["3"]])  # a failed run may come first
    {'hit@1': 0.5, 'rlx_hit@1': 0.5}
"""

_CITATION = """\
@inproceedings{christmann2025reqap,
  title     = {Recursive Question Understanding for Complex Question Answering over Heterogeneous Personal Data},
  author    = {Christmann, Philipp and Weikum, Gerhard},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2025},
  year      = {2025},
  eprint    = {2505.11900},
  archivePrefix = {arXiv}
}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class HitAt1(evaluate.Metric):
    """Hit@1 and Rlx-Hit@1 over typed answers."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": datasets.Value("string"),
                "references": datasets.Sequence(datasets.Value("string")),
            }),
            reference_urls=["https://arxiv.org/abs/2505.11900"],
        )

    def _enforce_nested_string_type(self, schema, obj):
        # evaluate type-checks the first element of each column and rejects None where a string is declared,
        # so a failed run (None) was accepted anywhere but first; Arrow stores it as null either way.
        if obj is None and isinstance(schema, datasets.Value) and schema.dtype == "string":
            return None
        return super()._enforce_nested_string_type(schema, obj)

    def _compute(self, predictions, references, relax=0.1):
        return hit_at_1(predictions, references, relax=relax)
