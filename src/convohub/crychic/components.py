"""The three modules the reconstruction pipeline asks, as small protocols, and their model-backed versions.

The pipeline (:mod:`convohub.crychic.reconstruct`) owns the rules; the components only answer questions:

* :class:`FollowUpClassifier`: how likely is this prompt an implicit follow-up?
* :class:`SentenceLabeller`: the prompt's sentences, each labelled polite / information / instruction;
* :class:`ParentJudge`: an embedding for a finished turn, and a parent score for a prompt against stored turns.

Tests drive the rules with scripted stand-ins; :func:`load_components` loads the trained model folders
(tokenizer and weights saved side by side). Everything runs on CPU under ``torch.inference_mode``.
:func:`pad_rows`, :func:`turn_texts` and :func:`joined_turn` build the models' inputs here and in
training (:class:`convohub.crychic.training.Collator`) alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from convohub.crychic.reconstruct import Decision


@dataclass
class StoredTurn:
    """One finished turn as the pipeline keeps it: texts, the parent it was given, the judge's embedding."""

    index: int
    prompt: str
    response: str
    parent: int
    embedding: Any = None
    decision: Decision | None = None


class FollowUpClassifier(Protocol):
    def implicit_probability(self, prompt: str) -> float:
        """Probability that ``prompt`` is an implicit follow-up (it only makes sense after the last turn)."""
        ...


class SentenceLabeller(Protocol):
    def label(self, prompt: str) -> list[tuple[str, str]]:
        """``(sentence, label)`` for every sentence of ``prompt``; labels are polite / information / instruction.
        A labeller that also has ``label_scored(prompt)`` (the same with each label's probability as a third
        item) lets the pipeline report the score behind a simplifier decision."""
        ...


class ParentJudge(Protocol):
    def embed_turn(self, prompt: str, response: str) -> Any:
        """What the pipeline stores for a finished turn (the bi-encoder's cached history embedding)."""
        ...

    def scores(self, prompt: str, candidates: Sequence[StoredTurn]) -> list[float]:
        """Probability that each candidate turn is the parent of ``prompt``, in the order given."""
        ...


#: texts per forward pass when a component is asked about many at once (offline reconstruction)
BATCH_SIZE = 32

T = TypeVar("T")


def batched(items: Sequence[T], size: int = BATCH_SIZE) -> list[list[T]]:
    """``items`` in consecutive chunks of at most ``size``."""
    return [list(items[k:k + size]) for k in range(0, len(items), size)]


def _load(folder: str | Path, expected: type) -> tuple[Any, Any]:
    """Tokenizer and model of a saved CRyCHIc folder, refusing a folder that holds another kind of model."""
    from transformers import AutoModel, AutoTokenizer

    import convohub.crychic.models  # noqa: F401 - registers the CRyCHIc classes with the Auto classes

    model = AutoModel.from_pretrained(str(folder))
    if not isinstance(model, expected):
        raise ValueError(f"{folder} holds a {type(model).__name__} ({model.config.model_type}), "
                         f"not a {expected.__name__}")
    return AutoTokenizer.from_pretrained(str(folder)), model.eval()


def truncate_text(tokenizer: Any, text: str, max_tokens: int) -> str:
    """``text`` cut after its first ``max_tokens`` tokens (at the character where that token ends)."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= max_tokens:
        return text
    return text[: offsets[max_tokens - 1][1]] if max_tokens > 0 else ""


# What the trained models are fed, defined once: training (convohub.crychic.training.Collator) builds its
# batches with the same helpers, so training and reconstruction cannot drift apart.
def pad_rows(rows: Sequence[Sequence[int]], pad_id: int | None) -> dict[str, torch.Tensor]:
    """``input_ids`` right-padded with ``pad_id`` (0 when the tokenizer has none) to the longest row, and the
    ``attention_mask`` marking the real tokens: the batch of packed simplifier rows (``pack_sentences``)."""
    import torch

    width = max(len(ids) for ids in rows)
    pad = pad_id or 0
    return {"input_ids": torch.tensor([[*ids, *[pad] * (width - len(ids))] for ids in rows]),
            "attention_mask": torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in rows])}


def turn_texts(tokenizer: Any, prompt: str, response: str, max_tokens: int) -> tuple[str, str]:
    """A stored turn as the judge reads it: its prompt and its response, each cut to ``max_tokens`` tokens
    (the bi-encoder encodes the two as one pair)."""
    return truncate_text(tokenizer, prompt, max_tokens), truncate_text(tokenizer, response, max_tokens)


def joined_turn(prompt: str, response: str) -> str:
    """A (truncated) turn as one text: the history side of the cross-encoder's (history, prompt) pair."""
    return f"{prompt}\n{response}"


class ModelFollowUpClassifier:
    """The IFQC of a saved folder: softmax probability of its ``implicit`` class."""

    def __init__(self, folder: str | Path):
        from convohub.crychic.models import CrychicIFQCModel

        self.folder = str(folder)
        self.tokenizer, self.model = _load(folder, CrychicIFQCModel)
        self.implicit = int(self.model.config.label2id["implicit"])

    def implicit_probability(self, prompt: str) -> float:
        return self.implicit_probabilities([prompt])[0]

    def implicit_probabilities(self, prompts: Sequence[str]) -> list[float]:
        """:meth:`implicit_probability` of each prompt, in padded batches of :data:`BATCH_SIZE`."""
        import torch

        out: list[float] = []
        for chunk in batched(prompts):
            batch = self.tokenizer(chunk, truncation=True, max_length=self.model.config.max_length,
                                   padding=True, return_tensors="pt")
            with torch.inference_mode():
                logits = self.model(**batch).logits
            out += [float(x) for x in logits.softmax(-1)[:, self.implicit].tolist()]
        return out


class ModelSentenceLabeller:
    """The prompt simplifier of a saved folder, over spaCy's sentences (:mod:`convohub.crychic.sentences`)."""

    def __init__(self, folder: str | Path):
        from convohub.crychic.models import CrychicSimplifierModel

        self.folder = str(folder)
        self.tokenizer, self.model = _load(folder, CrychicSimplifierModel)
        if self.tokenizer.sep_token_id != self.model.config.sep_token_id:
            raise ValueError(f"{folder}: the tokenizer's separator id {self.tokenizer.sep_token_id} is not the "
                             f"model's sep_token_id {self.model.config.sep_token_id}")

    def label(self, prompt: str) -> list[tuple[str, str]]:
        return [(sentence, label) for sentence, label, _ in self.label_scored(prompt)]

    def label_scored(self, prompt: str) -> list[tuple[str, str, float]]:
        """``(sentence, label, softmax probability of that label)`` for every sentence of ``prompt``."""
        return self.label_scored_many([prompt])[0]

    def label_scored_many(self, prompts: Sequence[str]) -> list[list[tuple[str, str, float]]]:
        """:meth:`label_scored` of each prompt; the packed rows of all prompts go through the model in padded
        batches of :data:`BATCH_SIZE`."""
        import torch

        from convohub.crychic.models import pack_sentences
        from convohub.crychic.sentences import split_sentences

        split = [split_sentences(prompt) for prompt in prompts]
        rows = [(p, ids, members) for p, sentences in enumerate(split) if sentences
                for ids, members in pack_sentences(self.tokenizer, sentences, self.model.config.max_length)]
        names = self.model.config.id2label
        scored: list[list[tuple[str, float]]] = [[] for _ in prompts]
        for chunk in batched(rows):
            with torch.inference_mode():
                logits = self.model(**pad_rows([ids for _, ids, _ in chunk], self.tokenizer.pad_token_id)).logits
            for row, (p, _, members) in enumerate(chunk):
                best = logits[row, : len(members)].float().softmax(-1).max(-1)
                scored[p] += [(names[int(i)], float(x)) for x, i in zip(best.values.tolist(), best.indices.tolist(),
                                                                       strict=True)]
        return [[(sentence, label, x) for sentence, (label, x) in zip(sentences, labels, strict=True)]
                for sentences, labels in zip(split, scored, strict=True)]


class ModelParentJudge:
    """The follow-up judge of a saved folder (bi- or cross-encoder, as its config says).

    A finished turn is embedded as the pair (prompt, response), each side first truncated to
    ``config.turn_max_tokens`` tokens and the pair then to the encoder's ``config.max_length``.
    """

    def __init__(self, folder: str | Path, *, loaded: tuple[Any, Any] | None = None):
        """Load the judge saved in ``folder``, or take ``loaded`` = (tokenizer, model) already in memory, in
        which case ``folder`` only names it."""
        from convohub.crychic.models import CrychicFollowUpJudgeModel

        self.folder = str(folder)
        self.tokenizer, self.model = loaded if loaded is not None else _load(folder, CrychicFollowUpJudgeModel)
        self.model.eval()
        self.architecture = str(self.model.config.architecture)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, name: str = "<in memory>") -> ModelParentJudge:
        """A judge over a model in memory (the training script tunes the root threshold before saving)."""
        return cls(name, loaded=(tokenizer, model))

    @property
    def root_threshold(self) -> float | None:
        """The threshold tuned for this judge (:mod:`convohub.crychic.threshold`), None when it has none."""
        value = getattr(self.model.config, "root_threshold", None)
        return None if value is None else float(value)

    @property
    def implicit_threshold(self) -> float | None:
        """The IFQC threshold tuned for the pipeline this judge was trained for (None when it has none)."""
        value = getattr(self.model.config, "implicit_threshold", None)
        return None if value is None else float(value)

    def _turn_texts(self, prompt: str, response: str) -> tuple[str, str]:
        return turn_texts(self.tokenizer, prompt, response, int(self.model.config.turn_max_tokens))

    def _encode(self, first: Sequence[str], second: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        return self.tokenizer(list(first), list(second) if second is not None else None, truncation=True,
                              max_length=self.model.config.max_length, padding=True, return_tensors="pt")

    def embed_turn(self, prompt: str, response: str) -> torch.Tensor:
        return self.embed_turns([(prompt, response)])[0]

    def embed_turns(self, turns: Sequence[tuple[str, str]]) -> list[torch.Tensor]:
        """:meth:`embed_turn` of each (prompt, response), in padded batches of :data:`BATCH_SIZE`."""
        import torch

        out: list[torch.Tensor] = []
        for chunk in batched([self._turn_texts(prompt, response) for prompt, response in turns]):
            with torch.inference_mode():
                out += list(self.model.embed(**self._encode([a for a, _ in chunk], [b for _, b in chunk])))
        return out

    def embed_prompts(self, prompts: Sequence[str]) -> list[torch.Tensor]:
        """The bi-encoder's embedding of each prompt as :meth:`scores` compares it with the stored turns."""
        import torch

        if self.architecture != "bi":
            raise ValueError("embed_prompts needs a bi-encoder judge; a cross-encoder reads each pair together")
        out: list[torch.Tensor] = []
        for chunk in batched(list(prompts)):
            with torch.inference_mode():
                out += list(self.model.embed(**self._encode(chunk)))
        return out

    def scores(self, prompt: str, candidates: Sequence[StoredTurn],
               prompt_embedding: torch.Tensor | None = None) -> list[float]:
        """See :class:`ParentJudge`; a bi-encoder takes ``prompt_embedding`` from :meth:`embed_prompts` instead
        of embedding ``prompt`` again."""
        import torch

        if not candidates:
            return []
        with torch.inference_mode():
            if self.architecture == "bi":
                missing = [turn.index for turn in candidates if turn.embedding is None]
                if missing:
                    raise ValueError(f"turns {missing} have no stored embedding; a bi-encoder judge scores "
                                     "against the embeddings stored when each turn was finished")
                history = torch.stack([turn.embedding for turn in candidates])
                if prompt_embedding is None:
                    prompt_embedding = self.model.embed(**self._encode([prompt]))[0]
                logits = self.model.score_embeddings(history, prompt_embedding[None, :])
            else:
                history_texts = [joined_turn(*self._turn_texts(turn.prompt, turn.response)) for turn in candidates]
                logits = self.model(**self._encode(history_texts, [prompt] * len(candidates))).logits
        return [float(x) for x in torch.sigmoid(logits).tolist()]


def load_components(ifqc: str | Path | None, simplifier: str | Path | None,
                    judge: str | Path) -> tuple[ModelFollowUpClassifier | None, ModelSentenceLabeller | None,
                                                ModelParentJudge]:
    """The model-backed components of saved folders; ``None`` for the IFQC or simplifier leaves it out
    (the paper's ablations), which the caller must choose and report."""
    return (ModelFollowUpClassifier(ifqc) if ifqc is not None else None,
            ModelSentenceLabeller(simplifier) if simplifier is not None else None,
            ModelParentJudge(judge))


def pipeline_factory(folders: Mapping[str, str | Path], *, threshold: float | None = None,
                     implicit_threshold: float | None = None) -> Callable[[], Any]:
    """``make_builder`` for :func:`convohub.crychic.reconstruct.reconstruct`: a fresh CRyCHIc pipeline per
    conversation over the three models of ``folders`` (keys ``ifqc``, ``simplifier``, ``judge``), loaded once
    and shared by every conversation. The thresholds default to those tuned for the judge
    (:func:`convohub.crychic.reconstruct.resolve_threshold`); an implicit threshold out of [0, 1) is a ValueError
    at once."""
    from convohub.crychic.reconstruct import Crychic, resolve_implicit_threshold

    ifqc, simplifier, judge = load_components(folders["ifqc"], folders["simplifier"], folders["judge"])
    resolve_implicit_threshold(judge, implicit_threshold)
    return lambda: Crychic(ifqc=ifqc, simplifier=simplifier, judge=judge, threshold=threshold,
                           implicit_threshold=implicit_threshold)
