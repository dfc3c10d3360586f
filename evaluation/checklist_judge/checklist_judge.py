"""WildFeedback checklist judge (user-guided pairwise evaluation): ``evaluate`` adapter.

The prompts, verdict parsing and the both-orders combination live in ``convohub.metrics.checklist_judge``;
this module declares the inputs and forwards.
"""

import datasets
import evaluate

from convohub.metrics.checklist_judge import DEFAULT_MAX_NEW_TOKENS, checklist_judge

_DESCRIPTION = """\
Pairwise LLM-as-judge evaluation of WildFeedback: a judge model compares a candidate response with a
baseline response to the same conversation, guided by the instance's checklist of user preferences
(WildBench WB-Reward prompt layout, five choices A++/A+/A=B/B+/B++). Every pair is judged in both orders and
the two candidate-side rewards (+100/+50/0/-50/-100) are averaged: win if the mean is > 0, lose if < 0,
tie if 0. Outputs without a usable choice are counted as parse failures, never as ties, and their instance
is left out of the rates. `with_checklist=False` is the paper's ablation without the checklist block.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[str]`): the candidate model's response for each instance.
    references (`list[str]`): the baseline response for each instance (e.g. the off-the-shelf model's).
    histories (`list[list[dict]]`): the earlier turns of each conversation, `{"role", "content"}` dicts
        (roles user/assistant/system); `[]` for a first turn.
    queries (`list[str]`): the current user query each response answers.
    checklists (`list[list[str]]`): the summarised user preferences of each instance.
    judge_base_url (`str`, optional): OpenAI-compatible endpoint of the judge (vLLM, TGI,
        `transformers serve`, Inference Providers), e.g. "http://127.0.0.1:8000/v1".
    judge_model (`str`, optional): the judge's model name at that endpoint; without judge_base_url,
        "smollm2" (the offline SmolLM2-135M-Instruct, compact prompt), "lexical" (a word-overlap stand-in for
        plumbing checks) or a local transformers chat model (folder path). With neither, the CONVOHUB_LLM_*
        endpoint is used; with no endpoint either, compute refuses (a judge is never picked silently).
    with_checklist (`bool`, optional): False drops the checklist from the prompt (ablation). Default True.
    max_new_tokens (`int`, optional): judge answer budget, default 1024.
    cache_dir (`str`, optional): on-disk cache of judge answers, so a rerun repeats no paid call.
    prompt_style (`str`, optional): "wb-reward" (the paper's layout, five choices, JSON) or "compact" (one-word
        A/B/tie answer for small judges); default: compact for SmolLM2, wb-reward otherwise.
Returns:
    `dict`: win, tie, lose (fractions of n_judged; NaN when nothing was judged), mean_reward (in
    [-100, 100]), parse_failures (judge outputs out of 2N without a usable choice), n_judged (instances
    with both orders parsed), judge (the model that judged) and prompt_style.
Examples:
    >>> import evaluate
    >>> judge = evaluate.load("evaluation/checklist_judge")  # or evaluate.load("convohub/checklist_judge")
    >>> scores = judge.compute(
    ...     predictions=["Here is a shorter summary in three bullet points."],
    ...     references=["Summary: the article discusses many things at length."],
    ...     histories=[[{"role": "user", "content": "Summarise this article."},
    ...                 {"role": "assistant", "content": "The article covers ..."}]],
    ...     queries=["Too long. Make it shorter, as bullet points."],
    ...     checklists=[["The summary should be short.", "The summary should use bullet points."]],
    ...     judge_model="lexical",  # offline word-overlap stand-in: plumbing only; "smollm2" for a real model
    ... )
    >>> sorted(scores)
    ['judge', 'lose', 'mean_reward', 'n_judged', 'parse_failures', 'prompt_style', 'tie', 'win']
    >>> scores["judge"], scores["win"], scores["n_judged"]  # the bullet-point answer covers the checklist
    ('convohub-lexical-judge', 1.0, 1)
"""

_CITATION = """\
@misc{shi2024wildfeedback,
  title  = {{WildFeedback}: Aligning {LLMs} With In-situ User Interactions And Feedback},
  author = {Shi, Taiwei and Wang, Zhuoer and Yang, Longqi and Lin, Ying-Chun and He, Zexue and Wan, Mengting
            and Zhou, Pei and Jauhar, Sujay and Xu, Xiaofeng and Song, Xia and Neville, Jennifer},
  year   = {2024}
}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ChecklistJudge(evaluate.Metric):
    """Win/tie/lose rates of a candidate against a baseline under a checklist-guided pairwise LLM judge."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": datasets.Value("string"),
                "references": datasets.Value("string"),
                "histories": datasets.List({"role": datasets.Value("string"),
                                            "content": datasets.Value("string")}),
                "queries": datasets.Value("string"),
                "checklists": datasets.List(datasets.Value("string")),
            }),
        )

    def _compute(self, predictions, references, histories, queries, checklists, judge_base_url=None,
                 judge_model=None, with_checklist=True, max_new_tokens=DEFAULT_MAX_NEW_TOKENS, cache_dir=None,
                 prompt_style=None):
        return checklist_judge(predictions, references, histories, queries, checklists,
                               judge_base_url=judge_base_url, judge_model=judge_model,
                               with_checklist=with_checklist, max_new_tokens=max_new_tokens, cache_dir=cache_dir,
                               prompt_style=prompt_style)
