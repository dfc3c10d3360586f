"""A local transformers causal LM behind the :class:`ChatBackend` interface.

Used for offline runs, tests (with a tiny random model) and small jobs where a server is overkill. The
model's own chat template formats the messages, prompts are left-padded so a batch can be generated in
one ``generate`` call, and only the newly generated tokens are decoded.

The token prefix every prompt of a batch shares (the system message and worked examples of a step's prompt)
is run once: its keys and values are computed for one row, repeated for the batch, and ``generate`` goes on
from that cache, the padding sitting between the shared prefix and each prompt's own tokens. On a CPU,
prefill is most of a batch's time (SmolLM2-135M, 2 cores, 48 ProMISe question-writing prompts of 123-157
tokens: 14.1 s of 16.2 s went to the prompts), so a batch whose prompts share 109 tokens took 4.5 s instead
of 7.9 s, one sharing 236 took 3.4 s instead of 11.8 s, with the same answers
(``benchmarks/bench_llm.py`` times both paths side by side).

``generate`` takes one generation config per call, so requests are grouped by sampling parameters
before batching. A seed is applied per group with :func:`torch.manual_seed`; with sampling, an answer
is therefore reproducible for the same batch composition, which is what re-running a pipeline gives
(use the cache for bit-exact resumes).
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .types import ChatBackend, ChatRequest, ChatResponse

logger = logging.getLogger(__name__)

#: Requests generated together. Small models on a CPU are bound by the per-step overhead of ``generate``,
#: not by arithmetic, so bigger batches pay: SmolLM2-135M on this project's 2-core machines gave 32, 55, 77
#: and 89 new tokens per CPU-second at batch 8, 16, 32 and 64 (64 prompts, 32 new tokens, one thread).
#: 32 keeps the transient attention memory of a long-prompt batch near a gigabyte.
DEFAULT_BATCH_SIZE = 32
#: Shared prompt tokens below which a batch is generated the plain way (a short prefix saves less than the
#: extra forward pass costs).
MIN_SHARED_PREFIX = 32


def _default_device() -> str:
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _resolve_dtype(dtype: Any) -> Any:
    import torch

    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return "auto" if dtype is None else dtype
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32', 'bfloat16', 'float16' or 'auto'")
    return resolved


class TransformersBackend(ChatBackend):
    """Greedy (temperature 0) or sampled chat completions from a local ``AutoModelForCausalLM``.

    ``model_path`` is a folder (or a Hub id already in the local cache). ``device`` defaults to CUDA,
    then MPS, then CPU; ``dtype`` to the checkpoint's own. ``model_id`` overrides the id recorded on
    cards (default: the path as given). Requests with the same sampling parameters are generated
    ``batch_size`` at a time, longest prompts together, so a batch carries little padding.
    """

    kind = "local"

    def __init__(
        self,
        model_path: str | Path,
        device: str | None = None,
        dtype: Any = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        model_id: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_path = str(model_path)
        self._model_id = model_id or self.model_path
        self._revision: str | None = None
        self.batch_size = batch_size
        self.device = torch.device(device or _default_device())

        tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"the tokenizer at {self.model_path} has no chat template; use an instruct/chat checkpoint "
                "or set tokenizer.chat_template and save it"
            )
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self.model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=_resolve_dtype(dtype))
        self.model.to(self.device).eval()

        eos = self.model.generation_config.eos_token_id
        eos = eos if eos is not None else tokenizer.eos_token_id
        self._eos_ids = set(eos) if isinstance(eos, (list, tuple)) else ({eos} if eos is not None else set())

    @property
    def model_id(self) -> str:
        return self._model_id

    def describe(self) -> dict[str, Any]:
        return {"backend": self.kind, "model_id": self._model_id, "device": str(self.device),
                "revision": self.revision}

    @property
    def revision(self) -> str:
        """Hash of the weight files the model was loaded from (computed once)."""
        if self._revision is None:
            from convohub.models import weights_digest

            self._revision = weights_digest(self.model_path) or "unknown"
        return self._revision

    def identity(self) -> dict[str, Any]:
        return {"model": self._model_id, "revision": self.revision}

    def _generation_config(self, request: ChatRequest) -> Any:
        config = copy.deepcopy(self.model.generation_config)
        config.max_new_tokens = request.max_new_tokens
        config.pad_token_id = self.tokenizer.pad_token_id
        if request.greedy:
            config.do_sample = False
            # neutral values so transformers does not warn about sampling flags in greedy mode
            config.temperature, config.top_p, config.top_k = 1.0, 1.0, None
        else:
            config.do_sample = True
            config.temperature, config.top_p = request.temperature, request.top_p
        if request.stop:
            config.stop_strings = list(request.stop)
        return config

    def _finish(self, new_ids: list[int], request: ChatRequest) -> ChatResponse:
        ended = any(t in self._eos_ids for t in new_ids)
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        cut = [text.find(s) for s in request.stop if s in text]
        if cut:
            return ChatResponse(text=text[: min(cut)], finish_reason="stop")
        return ChatResponse(text=text, finish_reason="stop" if ended else "length")

    def _generate(self, batch: list[ChatRequest]) -> list[ChatResponse]:
        import torch

        prompts = [
            self.tokenizer.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True)
            for r in batch
        ]
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        shared = shared_prefix(ids) if len(batch) > 1 else 0
        first = batch[0]
        if first.seed is not None:
            torch.manual_seed(first.seed)
        extra = {"tokenizer": self.tokenizer} if first.stop else {}
        with torch.inference_mode():
            inputs = self._with_prefix(ids, shared) if shared >= MIN_SHARED_PREFIX else self._padded(prompts)
            out = self.model.generate(**inputs, generation_config=self._generation_config(first), **extra)
        prompt_len = inputs["input_ids"].shape[1]
        return [self._finish(row, r) for row, r in zip(out[:, prompt_len:].tolist(), batch, strict=True)]

    def _padded(self, prompts: list[str]) -> dict[str, Any]:
        """``generate`` inputs for left-padded prompts."""
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        return {k: v.to(self.device) for k, v in enc.items()}

    def _with_prefix(self, ids: list[list[int]], shared: int) -> dict[str, Any]:
        """``generate`` inputs that continue a cache of the ``shared`` first tokens (run here once, for one row,
        and repeated for the batch): each row is the prefix, padding, then the prompt's own tokens, with an
        attention mask that skips the padding (positions follow the mask, so every token keeps the position it
        has in its unpadded prompt). Call under ``torch.inference_mode``."""
        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(row) for row in ids) - shared
        rows = [row[:shared] + [pad] * (width - len(row) + shared) + row[shared:] for row in ids]
        mask = [[1] * shared + [0] * (width - len(row) + shared) + [1] * (len(row) - shared) for row in ids]
        cache = prefix_cache(self, ids[0][:shared], None)
        cache.batch_repeat_interleave(len(ids))
        return {"input_ids": torch.tensor(rows, device=self.device),
                "attention_mask": torch.tensor(mask, device=self.device), "cache": cache}

    def _generate_safely(self, batch: list[ChatRequest]) -> list[ChatResponse]:
        """A failing batch is retried one request at a time, so one bad prompt fails alone."""
        try:
            return self._generate(batch)
        except Exception as exc:
            if len(batch) == 1:
                logger.warning("local generation failed: %s", exc)
                return [ChatResponse.failure(f"{type(exc).__name__}: {exc}")]
        return [self._generate_safely([r])[0] for r in batch]

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        results: list[ChatResponse | None] = [None] * len(requests)
        groups: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(repr(sorted(request.sampling_params().items())), []).append(i)
        for indices in groups.values():
            for chunk in plan_batches(requests, indices, self.batch_size):
                for i, response in zip(
                    chunk, self._generate_safely([requests[i] for i in chunk]), strict=True
                ):
                    results[i] = response
        return [r for r in results if r is not None]


#: A run of leading messages (system message, worked examples) gets batches of its own when at least this many
#: requests start with it.
MIN_PREFIX_GROUP = 8


def plan_batches(requests: Sequence[ChatRequest], indices: Sequence[int], batch_size: int) -> list[list[int]]:
    """``indices`` cut into batches of at most ``batch_size``, longest prompt first, so that prompts which start
    with the same messages share a batch and :meth:`TransformersBackend._generate` runs that prefix once.

    Each request joins the group of the longest run of its leading messages (all but the last) that at least
    :data:`MIN_PREFIX_GROUP` requests start with; each group is cut on its own, and requests without one are cut
    together. When every request starts with the same messages this is the plain longest-first cut, which keeps
    padding low. Why: answer-first ProMISe prompts show worked examples that differ from one suggestion slot to
    the next; cut by length alone, a batch mixed them and shared only its system message (under
    :data:`MIN_SHARED_PREFIX`): 128 such prompts in four slot groups took 37.5 s cut by length and 24.7 s cut
    this way (SmolLM2-135M, 2-core Xeon; 26.5 s when every prompt showed the same two examples).
    """
    leading = {i: tuple(str(m.get("content") or "") for m in requests[i].messages[:-1]) for i in indices}
    length = {i: sum(len(m.get("content") or "") for m in requests[i].messages) for i in indices}
    starts = Counter(lead[:k] for lead in leading.values() for k in range(1, len(lead) + 1))

    def group(lead: tuple[str, ...]) -> tuple[str, ...]:
        return next((lead[:k] for k in range(len(lead), 0, -1) if starts[lead[:k]] >= MIN_PREFIX_GROUP), ())

    groups: dict[tuple[str, ...], list[int]] = {}
    for i in indices:
        groups.setdefault(group(leading[i]), []).append(i)
    batches = []
    for members in sorted(groups.values(), key=lambda g: -max(length[i] for i in g)):
        members = sorted(members, key=lambda i: (-length[i], i))
        batches += [members[start:start + batch_size] for start in range(0, len(members), batch_size)]
    return batches


def prefix_cache(local: Any, prefix: Sequence[int], base: tuple[list[int], Any] | None) -> Any:
    """The keys and values of ``prefix`` under ``local``'s model, continued from a copy of ``base`` (tokens,
    cache) when ``prefix`` starts with those tokens."""
    import copy

    import torch

    start, cache = 0, None
    if base is not None and len(base[0]) <= len(prefix) and list(prefix[:len(base[0])]) == base[0]:
        start, cache = len(base[0]), copy.deepcopy(base[1])
        if start == len(prefix):
            return cache
    kwargs = {"cache": cache} if cache is not None else {}
    return local.model(input_ids=torch.tensor([list(prefix[start:])], device=local.device), use_cache=True,
                       **kwargs).cache


def common_prefix(rows: Sequence[Sequence[int]], limit: int) -> int:
    """How many leading tokens all ``rows`` share, at most ``limit``."""
    for k in range(max(limit, 0)):
        if any(row[k] != rows[0][k] for row in rows):
            return k
    return max(limit, 0)


def shared_prefix(rows: Sequence[Sequence[int]]) -> int:
    """The common prefix of ``rows`` that leaves each row at least one token of its own (the last prompt
    token's logits start the generation)."""
    return common_prefix(rows, min(len(row) for row in rows) - 1)
