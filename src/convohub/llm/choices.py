"""Closed-answer questions to a local chat model, answered by likelihood instead of free generation.

A small model (SmolLM2-135M-Instruct) asked for one word of a closed list, or one digit, often answers with
something else, or with the same word whatever the question; reading the probability it gives to each
allowed answer, right after the chat template's generation prompt, always yields one of them and keeps how
sure it was. :class:`ChoiceBackend` answers every request that way: the text is the most likely option
followed by every option's log-likelihood, ``"instruction (log-likelihood polite -4.1020, ...)"``, so the
answer survives the response cache and :func:`choice_logprobs` reads the numbers back.

An option's log-likelihood is the sum of its tokens' log-probabilities given the prompt (an option of
several tokens is scored exactly, one sequence per option); with ``case_variants`` an option also counts
its capitalised spelling (``polite`` and ``Polite``, log-sum-exp). The requests of a batch usually share a
long token prefix (instructions, worked examples, the prompt under judgement): it is run once and its keys
and values reused. :func:`next_token_logprobs` is the plain one-forward-pass reading that the checklist
judge's yes/no log-odds use.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .local import common_prefix, prefix_cache
from .types import ChatBackend, ChatRequest, ChatResponse

_NUMBERS = re.compile(r"\(log-likelihood (.*)\)\s*$")
#: What stands in for every text of a request when asking its content-free answer (contextual calibration:
#: an option's log-likelihood minus the one the model gives the same request with no content, which removes the
#: preference for one option whatever the prompt that a small model shows; Zhao et al., 2021)
CONTENT_FREE = "N/A"
#: A common token prefix shorter than this is not worth a separate forward pass. Generation has its own
#: threshold (:data:`convohub.llm.local.MIN_SHARED_PREFIX`, 32); neither was tuned against the other.
MIN_SHARED_PREFIX = 16


def chat_prompts(tokenizer: Any, requests: Sequence[ChatRequest]) -> list[str]:
    """Each request's messages through the chat template, ending with the generation prompt."""
    return [tokenizer.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True) for r in requests]


def next_token_logprobs(local: Any, requests: Sequence[ChatRequest], batch_size: int = 16) -> Any:
    """``(len(requests), vocabulary)`` float log-probabilities of the first answer token (one forward pass per
    batch; the local backend's tokenizer pads on the left, so the last position is the answer's)."""
    import torch

    tok, model = local.tokenizer, local.model
    out = []
    for start in range(0, len(requests), batch_size):
        texts = chat_prompts(tok, requests[start:start + batch_size])
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(local.device)
        with torch.inference_mode():
            out.append(model(**enc, logits_to_keep=1).logits[:, -1].float().log_softmax(-1))
    return torch.cat(out) if out else torch.empty(0)


def _spellings(option: str, case_variants: bool) -> list[str]:
    return sorted({option, option[:1].upper() + option[1:]}) if case_variants else [option]


def shared_base(local: Any, prompts: Sequence[Sequence[int]], several_batches: bool) -> tuple[list[int], Any] | None:
    """The token prefix every prompt shares (each keeping its last token) with its keys and values, run once for
    a call of ``several_batches``; None when the call has one batch or the prefix is too short to pay off."""
    import torch

    if not several_batches:
        return None
    common = common_prefix(prompts, min(len(p) for p in prompts) - 1)
    if common < MIN_SHARED_PREFIX:
        return None
    with torch.inference_mode():
        return list(prompts[0][:common]), prefix_cache(local, prompts[0][:common], None)


def positions_logprobs(local: Any, rows: Sequence[Sequence[int]], wanted: Sequence[Sequence[int]],
                       base: tuple[list[int], Any] | None = None) -> list[Any]:
    """For every row (right-padded into one batch), the log-probability vectors at the row's ``wanted``
    positions (absolute indices into the row), as ``(len(wanted[k]), vocabulary)`` tensors.

    The rows' common token prefix (the instructions, worked examples and prompt every request of a batch
    shares) is run once and its keys and values reused by every row, so only the suffixes are paid for;
    ``base`` (tokens, cache) is the prefix every batch of the call shares, run once for all batches.
    Logits are computed at the wanted positions only (``logits_to_keep``), not over the whole vocabulary
    at every position."""
    import torch

    pad = local.tokenizer.pad_token_id
    pad = pad if pad is not None else 0
    device = local.device
    # wanted logits stay ours: the shared prefix ends before the first wanted position
    shared = common_prefix(rows, min(min(len(row) for row in rows) - 1, min(min(w) for w in wanted)))
    # one row alone gains from a split only when its prefix continues the call's ``base``
    offset = shared if shared >= MIN_SHARED_PREFIX and (len(rows) > 1 or base is not None) else 0
    suffixes = [list(row[offset:]) for row in rows]
    width = max(map(len, suffixes))
    ids = torch.tensor([row + [pad] * (width - len(row)) for row in suffixes], device=device)
    mask = torch.tensor([[1] * (offset + len(row)) + [0] * (width - len(row)) for row in suffixes], device=device)
    keep = sorted({p - offset for w in wanted for p in w})
    column = {p: i for i, p in enumerate(keep)}
    with torch.inference_mode():  # padded on the right: every position keeps its own index
        kwargs: dict[str, Any] = {}
        if offset:
            cache = prefix_cache(local, rows[0][:offset], base)
            cache.batch_repeat_interleave(len(rows))
            kwargs["cache"] = cache
        logits = local.model(input_ids=ids, attention_mask=mask, logits_to_keep=torch.tensor(keep, device=device),
                             **kwargs).logits
    logp = logits.float().log_softmax(-1)
    return [logp[k, [column[p - offset] for p in w]] for k, w in enumerate(wanted)]


def continuation_logprobs(local: Any, prompts: Sequence[Sequence[int]],
                          continuations: Sequence[Sequence[Sequence[int]]], batch_size: int = 16) -> list[list[float]]:
    """Per prompt, the summed log-probability of each of its continuations right after it (every token of a
    continuation scored; token ids, none empty). A prompt's rows share it, so it runs once per
    ``batch_size`` continuations; the prefix every prompt shares (instructions) runs once for the call."""
    import torch

    if not prompts:
        return []
    base = shared_base(local, prompts, len(prompts) > 1)
    out = []
    for prompt, options in zip(prompts, continuations, strict=True):
        sums = []
        for start in range(0, len(options), batch_size):
            chunk = options[start:start + batch_size]
            # the logits at position i predict token i + 1: a continuation's tokens follow the prompt's last one
            wanted = [range(len(prompt) - 1, len(prompt) - 1 + len(o)) for o in chunk]
            rows = [[*prompt, *o] for o in chunk]
            for option, logp in zip(chunk, positions_logprobs(local, rows, wanted, base), strict=True):
                sums.append(float(logp.gather(1, torch.tensor(option, device=logp.device)[:, None]).sum()))
        out.append(sums)
    return out


class ChoiceBackend(ChatBackend):
    """A local chat model answering each request with the most likely of ``options`` (module docstring)."""

    kind = "local-choice"

    def __init__(self, local: Any, options: Sequence[str], *, case_variants: bool = True, batch_size: int = 16) -> None:
        if len(set(options)) < 2:
            raise ValueError(f"a closed answer needs at least two distinct options, got {list(options)}")
        self.local, self.options, self.batch_size = local, tuple(options), batch_size
        tok = local.tokenizer
        self._ids = [[tok(s, add_special_tokens=False)["input_ids"] for s in _spellings(o, case_variants)]
                     for o in self.options]
        if any(not ids for spellings in self._ids for ids in spellings):
            raise ValueError(f"an option of {list(options)} tokenizes to nothing")
        self.case_variants = case_variants

    @property
    def model_id(self) -> str:
        return self.local.model_id

    def identity(self) -> dict[str, Any]:
        return {**self.local.identity(), "method": "choice-likelihood", "options": list(self.options),
                "case_variants": self.case_variants}

    def describe(self) -> dict[str, Any]:
        return {**self.local.describe(), "backend": self.kind, "options": list(self.options)}

    def option_logprobs(self, requests: Sequence[ChatRequest]) -> list[list[float]]:
        """Per request, every option's log-likelihood (module docstring). One row per request reads every
        single-token spelling at the answer's first position; a spelling of several tokens gets a row of its
        own (the prompt followed by it), scored token by token."""
        import torch

        tok = self.local.tokenizer
        prompts = [tok(text, add_special_tokens=False)["input_ids"] for text in chat_prompts(tok, requests)]
        # (request, option, spelling) of a multi-token spelling, or (request, None, None) for the prompt row
        jobs: list[tuple[int, int | None, int | None]] = []
        for r in range(len(requests)):
            jobs.append((r, None, None))
            jobs += [(r, o, s) for o, spellings in enumerate(self._ids) for s, ids in enumerate(spellings)
                     if len(ids) > 1]
        scores = torch.full((len(requests), len(self.options), max(map(len, self._ids))), float("-inf"))
        chunks = _chunks(jobs, self.batch_size)
        base = shared_base(self.local, prompts, len(chunks) > 1)
        for chunk in chunks:
            rows = [prompts[r] + (self._ids[o][s] if o is not None else []) for r, o, s in chunk]
            # the logits at position i predict token i + 1: the answer's tokens follow the prompt's last one
            wanted = [range(len(prompts[r]) - 1, len(prompts[r]) - 1 + (len(self._ids[o][s]) if o is not None else 1))
                      for r, o, s in chunk]
            for (r, o, s), logp in zip(chunk, positions_logprobs(self.local, rows, wanted, base), strict=True):
                if o is None:
                    for oo, spellings in enumerate(self._ids):
                        for ss, ids in enumerate(spellings):
                            if len(ids) == 1:
                                scores[r, oo, ss] = logp[0, ids[0]]
                else:
                    answer = torch.tensor(self._ids[o][s], device=logp.device)
                    scores[r, o, s] = logp.gather(1, answer[:, None]).sum()
        return torch.logsumexp(scores, -1).tolist()

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        out = []
        for row in self.option_logprobs(requests):
            best = max(range(len(row)), key=row.__getitem__)
            numbers = ", ".join(f"{o} {v:+.4f}" for o, v in zip(self.options, row, strict=True))
            out.append(ChatResponse(text=f"{self.options[best]} (log-likelihood {numbers})", finish_reason="stop"))
        return out


def _chunks(jobs: Sequence[tuple[int, int | None, int | None]], size: int) -> list[list[tuple[int, int | None, int | None]]]:
    """Batches of at most ``size`` jobs. Requests that only have prompt rows (every spelling one token) are
    batched together; a request with rows of several-token spellings gets batches of its own, so each batch
    shares the whole prompt and :func:`positions_logprobs` runs it once instead of once per row. Measured
    on WildFeedback's nine-label questions (98 requests of 9 rows, SmolLM2-135M, 2 CPU cores): 95 s in mixed
    batches of 16 rows, 52 s by request, 28 s by request with the instructions all requests share run once.
    """
    if all(o is None for _, o, _ in jobs):
        return [list(jobs[start:start + size]) for start in range(0, len(jobs), size)]
    by_request: dict[int, list[tuple[int, int | None, int | None]]] = {}
    for job in jobs:
        by_request.setdefault(job[0], []).append(job)
    return [rows[start:start + size] for rows in by_request.values() for start in range(0, len(rows), size)]


def choice_logprobs(text: str) -> dict[str, float]:
    """The option log-likelihoods a :class:`ChoiceBackend` answer carries ({} for any other answer)."""
    match = _NUMBERS.search(text or "")
    if not match:
        return {}
    out = {}
    for part in match.group(1).split(", "):
        option, _, value = part.rpartition(" ")
        try:
            out[option] = float(value)
        except ValueError:
            return {}
    return out


def calibrated(logprobs: dict[str, float], content_free: dict[str, float] | None) -> dict[str, float]:
    """Each option's log-likelihood minus the one the content-free request gave it (:data:`CONTENT_FREE`);
    unchanged when there is no content-free answer."""
    return {o: v - content_free[o] for o, v in logprobs.items()} if content_free else dict(logprobs)


def local_model(backend: ChatBackend) -> Any:
    """The local transformers backend behind ``backend`` (plain or cached), else None."""
    from .cache import CachedBackend
    from .local import TransformersBackend

    inner = backend.inner if isinstance(backend, CachedBackend) else backend
    return inner if isinstance(inner, TransformersBackend) else None


def as_choice_backend(backend: ChatBackend, options: Sequence[str]) -> ChatBackend | None:
    """A :class:`ChoiceBackend` over the same loaded weights when ``backend`` is a local transformers model
    (plain or cached; the cached one keeps its cache folder), else None: an endpoint answers by generation."""
    from .cache import CachedBackend

    inner = local_model(backend)
    if inner is None:
        return None
    chooser = ChoiceBackend(inner, options)
    return CachedBackend(chooser, backend.cache.root) if isinstance(backend, CachedBackend) else chooser
