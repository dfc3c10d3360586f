"""trl's fused LM head made compact on CPU (convohub.training.lm_head): only the labelled positions reach the
vocabulary projection, and the loss and the gradients stay those of the full path."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from convohub.tiny import tiny_model
from convohub.training.lm_head import score_label_positions_only


def _loss_and_grads(model: Any, batch: dict[str, torch.Tensor]) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad()
    out = model(**batch, fused_lm_head=True)
    out.loss.backward()
    return float(out.loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_compact_head_scores_only_labelled_positions_with_the_same_loss_and_gradients(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import trl.trainer.utils as trl_utils
    from transformers import AutoModelForCausalLM

    # trl's own decision for this test (an earlier test in this process may have trained, which patches it)
    trl_decider = getattr(trl_utils._use_triton, "__wrapped__", trl_utils._use_triton)
    monkeypatch.setattr(trl_utils, "_use_triton", trl_decider)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model("causal"), dtype=torch.float32)
    trl_utils.add_fused_lm_head(model)
    ids = torch.randint(5, model.config.vocab_size, (3, 24))
    labels = torch.full_like(ids, -100)
    labels[0, 20:], labels[1, 10:13], labels[2, 23:] = ids[0, 20:], ids[1, 10:13], ids[2, 23:]
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}

    rows: list[int] = []
    kernel = trl_utils._ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden: torch.Tensor, *args: Any) -> Any:
            rows.append(hidden.shape[0])
            return kernel.apply(hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Spy)
    full_loss, full_grads = _loss_and_grads(model, batch)
    assert score_label_positions_only() and score_label_positions_only()  # idempotent
    compact_loss, compact_grads = _loss_and_grads(model, batch)

    labelled = int((labels[:, 1:] != -100).sum())  # next-token labels: position t scores label t + 1
    assert rows == [3 * 23, labelled] and labelled == 4 + 3 + 1
    assert compact_loss == pytest.approx(full_loss, rel=1e-6)
    assert compact_grads.keys() == full_grads.keys() and compact_grads
    for name, grad in full_grads.items():
        torch.testing.assert_close(compact_grads[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_a_trl_without_the_decider_warns_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import trl.trainer.utils as trl_utils

    monkeypatch.delattr(trl_utils, "_use_triton")
    with pytest.warns(UserWarning, match="scores every position on CPU"):
        assert score_label_positions_only() is False
    assert not hasattr(trl_utils, "_use_triton")
