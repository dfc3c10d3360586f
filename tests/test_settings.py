"""Count settings read from the environment (smoke-test caps such as ``CONVOHUB_PROMISE_DIALOGUES``): unset is
the default, a positive integer is taken, anything else is an error naming the variable; the steps that read
one declare it, so changing it re-runs them."""

from __future__ import annotations

import pytest

from convohub.corpus import chat_lm
from convohub.corpus.system import SYSTEM as CORPUS
from convohub.registry import positive_int_setting
from convohub.wildfeedback.system import ON_POLICY_EPISODES_ENV


@pytest.mark.parametrize(("raw", "expected"), [(None, 7), ("", 7), (" ", 7), ("3", 3), ("12", 12)])
def test_a_positive_integer_or_the_default(raw: str | None, expected: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    if raw is None:
        monkeypatch.delenv("CONVOHUB_TEST_COUNT", raising=False)
    else:
        monkeypatch.setenv("CONVOHUB_TEST_COUNT", raw)
    assert positive_int_setting("CONVOHUB_TEST_COUNT", 7) == expected


def test_unset_without_a_default_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVOHUB_TEST_COUNT", raising=False)
    assert positive_int_setting("CONVOHUB_TEST_COUNT") is None


@pytest.mark.parametrize("raw", ["0", "-2", "2.5", "ten"])
def test_anything_else_names_the_variable(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ON_POLICY_EPISODES_ENV, raw)
    with pytest.raises(ValueError, match=f"{ON_POLICY_EPISODES_ENV} must be a positive integer, got '{raw}'"):
        positive_int_setting(ON_POLICY_EPISODES_ENV, 96)


def test_the_chat_lm_evaluation_declares_its_conversation_cap() -> None:
    evaluate = next(s for s in CORPUS.steps if s.kind == "evaluate")
    assert evaluate.settings == (chat_lm.EVAL_CONVERSATIONS_ENV,)
