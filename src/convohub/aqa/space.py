"""The WildChat-AQA Space: logic behind ``spaces/wildchat_aqa/app.py`` and its export for a release.

Pick a question of the built dataset (or type one with its options), choose a method, and see the options
ranked beside a bar chart of the gold weights, PROBE's filters and queries, and the evidence retrieved. Kept
in the package (the app stays a thin Gradio layout) so it is testable without a browser. The indexes are
built once per context on the first request that needs them and shared by every later request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convohub.aqa.evaluation import AQARunner, Setting
from convohub.aqa.questions import Question, load_questions
from convohub.aqa.retrieval import RetrievalIndex

SPACE_NAME = "wildchat-aqa-explorer"
RANK_HEADERS = ["rank", "option", "score", "gold weight"]
EVIDENCE_HEADERS = ["#", "user", "country", "date", "text"]
TYPED = "(type a question)"


def _label(q: Question) -> str:
    return q.question if len(q.question) <= 110 else q.question[:107] + "..."


class AQAExplorer:
    """A built folder's questions, its indexes (built on first use) and the answering model."""

    def __init__(self, dataset_dir: str | Path, backend: Any = None) -> None:
        self.dataset_dir = Path(dataset_dir)
        self.questions = load_questions(self.dataset_dir)
        self.by_label = {_label(q): q for q in self.questions}
        self.backend = backend
        self.indexes: dict[str, RetrievalIndex] = {}
        self._scorer: Any = None  # the likelihood scorer and its cache, for the local model
        self._counter: Any = None  # the answering model's token counter (loading a tokenizer once)

    def choices(self) -> list[str]:
        return [TYPED, *self.by_label]

    def question(self, choice: str, typed: str = "", options_text: str = "") -> Question:
        """The picked question, or the typed one with one option per line (2 to 10; no gold)."""
        if choice and choice != TYPED:
            if choice not in self.by_label:
                raise ValueError(f"unknown question {choice[:60]!r}: pick one from the list or type your own")
            return self.by_label[choice]
        text = (typed or "").strip()
        options = [line.strip() for line in (options_text or "").splitlines() if line.strip()]
        if not text:
            raise ValueError("type a question, or pick one from the list")
        if not 2 <= len(options) <= 10:
            raise ValueError(f"give 2 to 10 options, one per line (got {len(options)})")
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        return Question(digest, text, tuple(options), tuple(0.0 for _ in options))

    def options_of(self, choice: str) -> str:
        """The options of a picked question, one per line (what the options box shows)."""
        q = self.by_label.get(choice)
        return "\n".join(q.options) if q else ""

    def answer(self, question: Question, method: str, *, context: str = "summary", answerer: str | None = None,
               k: int = 20, budget: int | None = None) -> dict[str, Any]:
        """Rank the options with ``method``; returns the ranking rows, the gold weights, PROBE's request, the
        evidence rows and the scores (NDCG@k when the question has gold weights). ``answerer``: default
        ``likelihood`` with a local model, the paper's prompt with an endpoint; ``budget``: prompt tokens (default:
        the answering model's, :func:`convohub.aqa.tokens.budget_for`)."""
        from convohub.aqa.methods import default_answerer

        answerer = answerer or (default_answerer(self.backend) if self.backend is not None else "likelihood")
        if method == "oracle" and not question.support:
            raise ValueError("the oracle needs the gold supporting conversations: pick a question of the dataset")
        if answerer == "likelihood" and method in ("no-context", "rag", "probe", "oracle") and self._scorer is None:
            from convohub.aqa.methods import LikelihoodScorer

            self._scorer = LikelihoodScorer(self.backend)
        if self.backend is not None and self._counter is None:
            from convohub.aqa.tokens import counter_for

            self._counter = counter_for(self.backend)
        runner = AQARunner(self.dataset_dir, backend=self.backend, questions=[question], indexes=self.indexes,
                           scorer=self._scorer, counter=self._counter)
        probe_prompt = "small" if answerer == "likelihood" else "paper"
        results, answers = runner.evaluate(Setting(method, context=context, answerer=answerer, k=k, budget=budget,
                                                   probe_prompt=probe_prompt))
        answer = answers[0]
        n = len(question.options)
        scores = answer.scores or [None] * n
        ranked = list(dict.fromkeys(j for j in answer.ranking if 0 <= j < n))
        rows = [[place if j in ranked else "-", question.options[j],
                 None if scores[j] is None else round(float(scores[j]), 4), round(float(question.weights[j]), 4)]
                for place, j in enumerate([*ranked, *(j for j in range(n) if j not in ranked)], start=1)]
        evidence = []
        if answer.doc_ids:
            from convohub.aqa.context import rendered

            index = self.indexes[context]
            position = {str(d): i for i, d in enumerate(index.doc_ids)}
            for number, doc_id in enumerate(answer.doc_ids, start=1):
                header, _, body = rendered(index, [position[doc_id]])[0][0].partition("\n\n")
                meta = dict(line.split(": ", 1) for line in header.splitlines())
                evidence.append([number, meta.get("User", ""), meta.get("Country", ""), meta.get("Date", ""), body])
        gold = any(question.weights)
        summary = {k: v for k, v in results.items()
                   if k.startswith(("ndcg@", "recall@")) and (gold or not k.startswith("ndcg@"))}
        summary |= {k: results[k] for k in ("label", "model", "input_tokens", "parse_rate", "seconds") if k in results}
        if answer.text:
            summary["answer_text"] = answer.text
        return {"rows": rows, "gold": dict(zip(question.options, question.weights, strict=True)),
                "request": answer.request or {}, "evidence": evidence, "scores": summary}


def example_questions(explorer: AQAExplorer, n: int = 4) -> list[str]:
    """Labels of the first questions of distinct target types (the Space's examples)."""
    seen: dict[str, str] = {}
    for q in explorer.questions:
        seen.setdefault(q.target_type, _label(q))
    return list(seen.values())[:n]


def export_space(target: Any, repo: Path, *, dataset_id: str | None = None, models: Sequence[str] = (),
                 name: str = SPACE_NAME) -> Path:
    """Write ``spaces/wildchat_aqa`` as a Space folder under ``target`` (pushed when the target pushes), with
    the released dataset (and models) in the README front matter."""
    from convohub.hub import write_space

    front: dict[str, Any] = {}
    if dataset_id:
        front["datasets"] = [dataset_id]
    if models:
        front["models"] = list(models)
    return write_space(target, name, Path(repo) / "spaces" / "wildchat_aqa", extra_front_matter=front)
