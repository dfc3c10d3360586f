"""NDCG@k of WildChat-AQA option rankings (and recall@k of retrieval runs): ``evaluate`` adapter.

The scoring lives in ``convohub.metrics.ndcg``; this module only declares the inputs and forwards them.
"""

import datasets
import evaluate

from convohub.metrics.ndcg import DEFAULT_NDCG_K, DEFAULT_RECALL_K, ndcg_at_k, recall_at_k

_DESCRIPTION = """\
NDCG@k for ranking the candidate answers of an aggregative question (WildChat-AQA). A prediction ranks
option indices best first; as in the authors' evaluation, the first ten entries are kept, valid ones get
scores 9, 8, 7, ... (past-the-end indices skipped, a repeated index keeps its last score), unlisted options
0, and the result equals scikit-learn's ndcg_score (linear gain, log2 discount, tied options averaged)
averaged over questions, so an empty ranking scores the tie-averaged value, not 0. With the "recall" configuration the module instead
scores retrieval runs: recall@k = share of a question's gold supporting ids among its top-k retrieved ids.
"""

_KWARGS_DESCRIPTION = """
Args (configuration "default"):
    predictions (`list[list[int]]`): ranked option indices per question, best first; may be partial or
        empty. Scored as the authors do: entries after the tenth are dropped, indices past the last
        option are skipped, a repeated index keeps the score of its last occurrence, -1 means the last
        option (Python indexing).
    references (`list[list[float]]`): non-negative option weights per question (at least two options).
    k (`list[int]`, optional): cut-offs, default (1, 3, 5, 10).
Args (configuration "recall"):
    predictions (`list[list[str]]`): retrieved ids per question, best first.
    references (`list[list[str]]`): gold supporting ids per question (questions without any are skipped).
    k (`list[int]`, optional): cut-offs, default (5, 10, 20, 50, 100, 200, 500).
Returns:
    `dict[str, float]`: "ndcg@<k>" (or "recall@<k>") for every k, each in [0, 1].
Examples:
    >>> import evaluate
    >>> ndcg = evaluate.load("evaluation/ndcg")  # or evaluate.load("convohub/ndcg") from the Hub
    >>> ndcg.compute(predictions=[[1, 0, 2], []], references=[[0.5, 1.0, 0.0], [0.2, 0.8, 0.0]], k=[1, 3])
    {'ndcg@1': 0.7083333333333333, 'ndcg@3': 0.8834596699017883}
    >>> recall = evaluate.load("evaluation/ndcg", "recall")
    >>> recall.compute(predictions=[["c1", "c7", "c3"]], references=[["c3", "c9"]], k=[1, 3])
    {'recall@1': 0.0, 'recall@3': 0.5}
"""

_CITATION = """\
@inproceedings{zhang2025aqa,
  title     = {From Chat Logs to Collective Insights: Aggregative Question Answering},
  author    = {Zhang, Wentao and Kim, Woojeong and Deng, Yuntian},
  booktitle = {Proceedings of the 2025 Conference on Empirical Methods in Natural Language Processing (EMNLP)},
  year      = {2025}
}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class NDCG(evaluate.Metric):
    """NDCG@k over ranked options (default configuration) or recall@k over retrieved ids ("recall")."""

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name == "recall":
            features = datasets.Features({
                "predictions": datasets.Sequence(datasets.Value("string")),
                "references": datasets.Sequence(datasets.Value("string")),
            })
        elif self.config_name in ("default", "ndcg"):
            features = datasets.Features({
                "predictions": datasets.Sequence(datasets.Value("int64")),
                "references": datasets.Sequence(datasets.Value("float64")),
            })
        else:
            raise ValueError(f"unknown configuration {self.config_name!r}: use 'default' (NDCG) or 'recall'")
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=features,
            reference_urls=["https://github.com/yuntian-group/wildchat_aggregative_question_answering"],
        )

    def _compute(self, predictions, references, k=None):
        if self.config_name == "recall":
            return recall_at_k(predictions, references, k=DEFAULT_RECALL_K if k is None else k)
        return ndcg_at_k(predictions, references, k=DEFAULT_NDCG_K if k is None else k)
