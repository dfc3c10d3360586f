"""The LLM paths of the WildFeedback pipeline against a real `transformers serve` process (tiny model).

The tiny model emits garbage, which is exactly what proves the plumbing: every request reaches the server,
every invalid answer is retried and then counted as a failure, and no label, summary or pair is guessed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _serving import served_fixture, tiny_causal_fixture  # noqa: F401  (pytest fixtures)

from convohub.llm import EndpointBackend
from convohub.wildfeedback import IdentificationError, identify
from convohub.wildfeedback.pipeline import Backends, Settings, episode_rows, on_policy_pairs, run_pipeline
from convohub.wildfeedback.preferences import rule_summary

pytestmark = pytest.mark.server

CONV = {"conversation_id": "c1", "user_id": "u_test", "turns": [
    {"role": "user", "content": "What is the capital of Australia?"},
    {"role": "assistant", "content": "Sydney."},
    {"role": "user", "content": "No, that's wrong. Make it shorter too."},
    {"role": "assistant", "content": "Canberra."},
]}


def _endpoint(served: tuple[str, str]) -> EndpointBackend:
    url, model = served
    return EndpointBackend(url, model, max_concurrency=2, max_retries=1, timeout=120, backoff=(0.1, 1.0))


def test_garbage_labels_are_counted_failures(served: tuple[str, str], tmp_path: Path) -> None:
    endpoint = _endpoint(served)
    with pytest.raises(IdentificationError) as info:
        identify(CONV["turns"], endpoint, max_attempts=2, max_new_tokens=16)
    assert len(info.value.errors) == 2 and endpoint.stats["successes"] == 2
    result = run_pipeline([CONV, {**CONV, "conversation_id": "c2"}], tmp_path / "work",
                          Backends(labeller=endpoint), Settings(max_attempts=2, label_max_new_tokens=16), log=lambda _: None)
    assert result.counts["labelling_failures"] == 2 and result.counts["dsat_conversations"] == 0
    assert result.train == [] and result.test == [] and all("errors" in v for v in result.labels.values())
    calls = endpoint.stats["http_calls"]
    run_pipeline([CONV, {**CONV, "conversation_id": "c2"}], tmp_path / "work", Backends(labeller=endpoint),
                 Settings(max_attempts=2, label_max_new_tokens=16), log=lambda _: None)
    assert endpoint.stats["http_calls"] == calls  # resumed from the stage file: no new call


def test_on_policy_judge_failures_keep_nothing(served: tuple[str, str]) -> None:
    from convohub.wildfeedback.identify import identify as offline_identify

    result = offline_identify(CONV["turns"])
    skeletons, _ = episode_rows(CONV, result, rule_summary(CONV["turns"], result))
    endpoint = _endpoint(served)
    pairs, counts = on_policy_pairs(skeletons, endpoint, endpoint, max_new_tokens=12, judge_max_new_tokens=8)
    assert pairs == [] and counts["pairs"] == 0
    assert counts["judge_parse_failure"] + counts["dropped_generation_failed"] + counts[
        "dropped_chosen_equals_rejected"] == len(skeletons) == 1
