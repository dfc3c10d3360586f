"""The LLM paths of the WildFeedback pipeline against a real `transformers serve` process serving the
converted SmolLM2-135M-Instruct folder (:func:`convohub.models.smollm2_path`).

Through the endpoint, the split prompts label a conversation and the result names the served model; the
paper's full prompt with a 16-token budget cannot be answered, which proves the failure path: every
request reaches the server, every invalid answer is retried and then counted, and no label, summary or
pair is guessed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _serving import served_fixture  # noqa: F401  (pytest fixture)

from convohub.llm import EndpointBackend
from convohub.wildfeedback import IdentificationError, identify
from convohub.wildfeedback.identify import default_prompt_style
from convohub.wildfeedback.pipeline import Backends, Settings, episode_rows, on_policy_pairs, run_pipeline
from convohub.wildfeedback.preferences import rule_summary

pytestmark = pytest.mark.server

CONV = {"conversation_id": "c1", "user_id": "u_test", "turns": [
    {"role": "user", "content": "What is the capital of Australia?"},
    {"role": "assistant", "content": "Sydney."},
    {"role": "user", "content": "No, that's wrong. Make it shorter too."},
    {"role": "assistant", "content": "Canberra."},
]}


@pytest.fixture(scope="module", name="tiny_causal")
def served_model() -> Path:
    """The folder `served` serves (the shared fixture is parameterised through this name): SmolLM2 here."""
    from convohub.models import smollm2_path

    return smollm2_path()


def _endpoint(served: tuple[str, str]) -> EndpointBackend:
    url, model = served
    return EndpointBackend(url, model, max_concurrency=2, max_retries=1, timeout=120, backoff=(0.1, 1.0))


def test_smollm2_labels_through_the_server_with_split_prompts(served: tuple[str, str]) -> None:
    endpoint = _endpoint(served)
    assert default_prompt_style(endpoint) == "split"  # SmolLM2 behind a server gets the split prompts
    result = identify(CONV["turns"], endpoint)
    assert served[1] in result.labeller and "split prompts" in result.labeller
    assert len(result.turns) == 2 and result.turns[0].dissatisfaction == ["N/A"]
    assert endpoint.stats["successes"] >= 1  # the reaction of T-2 (and its label when it has one)


def test_unanswerable_full_prompt_is_a_counted_failure(served: tuple[str, str], tmp_path: Path) -> None:
    endpoint = _endpoint(served)
    with pytest.raises(IdentificationError) as info:
        identify(CONV["turns"], endpoint, max_attempts=2, max_new_tokens=16, prompt_style="full")
    assert len(info.value.errors) == 2 and endpoint.stats["successes"] == 2
    settings = Settings(max_attempts=2, label_max_new_tokens=16)
    backends = Backends(labeller=endpoint, labeller_style="full")
    convs = [CONV, {**CONV, "conversation_id": "c2"}]
    result = run_pipeline(convs, tmp_path / "work", backends, settings, log=lambda _: None)
    assert result.counts["labelling_failures"] == 2 and result.counts["dsat_conversations"] == 0
    assert result.train == [] and result.test == [] and all("errors" in v for v in result.labels.values())
    calls = endpoint.stats["http_calls"]
    run_pipeline(convs, tmp_path / "work", backends, settings, log=lambda _: None)
    assert endpoint.stats["http_calls"] == calls  # resumed from the stage file: no new call


def test_on_policy_keeps_only_judged_wins(served: tuple[str, str]) -> None:
    from convohub.wildfeedback.identify import identify as offline_identify

    result = offline_identify(CONV["turns"])
    skeletons, _ = episode_rows(CONV, result, rule_summary(CONV["turns"], result))
    endpoint = _endpoint(served)
    pairs, counts = on_policy_pairs(skeletons, endpoint, endpoint, max_new_tokens=12, judge_max_new_tokens=8)
    outcomes = sum(v for k, v in counts.items() if k.startswith(("judge_", "dropped_")))
    assert outcomes == len(skeletons) == 1 and counts["pairs"] == len(pairs) == counts.get("judge_win", 0)
