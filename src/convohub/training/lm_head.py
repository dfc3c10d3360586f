"""Project onto the vocabulary only the positions a causal LM's loss uses, on CPU too.

trl trains causal LMs (SFT and DPO) through a fused LM head (``trl.trainer.utils.add_fused_lm_head``) that can
score only the positions whose next-token label is not -100. trl takes that compact path on Triton devices
(CUDA, XPU) only: elsewhere it scores every position and zeroes the masked ones, because on compiled backends
(Neuron) a number of positions that changes from batch to batch recompiles the graph. Eager CPU has no such
cost, and convohub's offline recipes are prompt-heavy: an EXTRACT pair has about 5 label tokens among about
170, a WildFeedback DPO pair up to 64 among 256. Scoring every position spends most of the LM head's work
(49,152 x 576 multiply-adds per token on SmolLM2-135M, about a fifth of its forward) and of the log-softmax on
positions whose results are thrown away. Measured on 2 Xeon cores, LoRA r 16, a batch of 8 x 200 tokens with
6 label tokens each: 10.2-11.7 s per forward and backward pass scoring every position, 4.4-5.0 s compact, same
loss (``benchmarks/bench_lm_head.py`` times it side by side).

:func:`score_label_positions_only` makes trl take its compact path on CPU as well. It changes which rows reach
trl's chunked log-prob kernel, not the kernel: the loss and the gradients are those of the full path (up to the
order of float additions). It patches one private function of trl; when a trl release no longer has it, the
call warns and leaves trl's behaviour (slower, equally correct).
"""

from __future__ import annotations

import warnings
from typing import Any

#: The attribute of ``trl.trainer.utils`` whose answer decides, per device, whether the fused head is compact.
_DECIDER = "_use_triton"
_PATCHED = "__convohub_compact_on_cpu__"


def score_label_positions_only() -> bool:
    """Make trl's fused LM head score only labelled positions on CPU (idempotent). Returns whether it does."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - trl is a dependency
        return False
    decide = getattr(trl_utils, _DECIDER, None)
    if decide is None:
        warnings.warn(f"trl {_trl_version()} has no trainer.utils.{_DECIDER}: its fused LM head scores every "
                      "position on CPU (correct, slower); see convohub.training.lm_head", stacklevel=2)
        return False
    if getattr(decide, _PATCHED, False):
        return True

    def compact_on_cpu(device: Any) -> bool:
        return bool(decide(device)) or getattr(device, "type", None) == "cpu"

    setattr(compact_on_cpu, _PATCHED, True)
    compact_on_cpu.__wrapped__ = decide  # type: ignore[attr-defined]  # trl's own decision, for tests and undoing
    setattr(trl_utils, _DECIDER, compact_on_cpu)
    return True


def _trl_version() -> str:
    import trl

    return getattr(trl, "__version__", "?")
