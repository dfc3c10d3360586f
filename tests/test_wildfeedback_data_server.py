"""The LLM paths of the WildFeedback pipeline against real `transformers serve` processes.

Labelling runs against a server of the converted SmolLM2-135M-Instruct folder
(:func:`convohub.models.smollm2_path`): the split prompts label a conversation and the result names the
served model. The failure paths run against the random tiny model, whose garbage proves the plumbing:
every request reaches the server, every invalid answer is retried and then counted, and no label,
summary or pair is guessed (SmolLM2 would need minutes of CPU per full 2,000-token prompt for the same).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _serving import (  # noqa: F401  (pytest fixtures)
    served_fixture,
    served_smollm2_fixture,
    smollm2_fixture,
    tiny_causal_fixture,
)

from convohub.llm import EndpointBackend
from convohub.wildfeedback import IdentificationError, identify
from convohub.wildfeedback.identify import default_prompt_style
from convohub.wildfeedback.pipeline import Backends, Settings, episode_rows, on_policy_pairs, run_pipeline
from convohub.wildfeedback.preferences import rule_summary
from convohub.wildfeedback.turn_prompts import MIN_ATTEMPTS

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


def test_smollm2_labels_through_the_server_with_split_prompts(served_smollm2: tuple[str, str]) -> None:
    endpoint = _endpoint(served_smollm2)
    assert default_prompt_style(endpoint) == "split"  # SmolLM2 behind a server gets the split prompts
    result = identify(CONV["turns"], endpoint)
    assert served_smollm2[1] in result.labeller and "split prompts" in result.labeller
    assert len(result.turns) == 2 and result.turns[0].dissatisfaction == ["N/A"]
    assert endpoint.stats["successes"] >= 1  # the reaction of T-2 (and its label when it has one)


def test_label_cli_labels_through_the_configured_endpoint(served_smollm2: tuple[str, str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`convohub wildfeedback label` with CONVOHUB_LLM_* set labels through that endpoint and names its model;
    nothing is measured offline then."""
    from convohub.cli import main

    url, model = served_smollm2
    monkeypatch.setenv("CONVOHUB_LLM_BASE_URL", url)
    monkeypatch.setenv("CONVOHUB_LLM_MODEL", model)
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(CONV["turns"]), encoding="utf-8")
    assert main(["wildfeedback", "label", str(conv)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert model in out["labeller"] and "split prompts" in out["labeller"] and "labeller_choice" not in out
    assert len(out["turns"]) == 2


def test_garbage_labels_are_counted_failures(served: tuple[str, str], tmp_path: Path) -> None:
    """The random model's answers reach the labeller and are retried, then counted as failures. The split
    prompts fit its 512 positions; the full prompt (about 4,900 of its tokens) does not, and `transformers
    serve` from 5.25 refuses it with HTTP 400, a failed request instead of an answer."""
    endpoint = _endpoint(served)
    with pytest.raises(IdentificationError) as info:
        identify(CONV["turns"], endpoint, max_attempts=2, max_new_tokens=16, prompt_style="split")
    assert len(info.value.errors) == 1 and "unparseable answer" in info.value.errors[0]
    assert f"no valid answer after {MIN_ATTEMPTS} attempts" in info.value.errors[0]  # split prompts retry more
    assert endpoint.stats["successes"] == MIN_ATTEMPTS  # every try reached the model and answered
    settings = Settings(max_attempts=2, label_max_new_tokens=16)
    backends = Backends(labeller=endpoint, labeller_style="split")
    convs = [CONV, {**CONV, "conversation_id": "c2"}]
    result = run_pipeline(convs, tmp_path / "work", backends, settings, log=lambda _: None)
    assert result.counts["labelling_failures"] == 2 and result.counts["dsat_conversations"] == 0
    assert result.train == [] and result.test == [] and all("errors" in v for v in result.labels.values())
    calls = endpoint.stats["http_calls"]
    run_pipeline(convs, tmp_path / "work", backends, settings, log=lambda _: None)
    assert endpoint.stats["http_calls"] == calls  # resumed from the stage file: no new call


def test_on_policy_judge_failures_keep_nothing(served: tuple[str, str]) -> None:
    from convohub.wildfeedback.identify import identify as offline_identify

    result = offline_identify(CONV["turns"])
    skeletons, _ = episode_rows(CONV, result, rule_summary(CONV["turns"], result))
    endpoint = _endpoint(served)
    pairs, counts = on_policy_pairs(skeletons, endpoint, endpoint, max_new_tokens=12, judge_max_new_tokens=8,
                                    moderator=endpoint)
    assert pairs == [] and counts["pairs"] == 0
    # the random model's garbage is no "safe": the moderator keeps nothing, so nothing reaches the judge
    assert counts["moderated_responses"] == 2 and counts["dropped_moderation_unanswered"] >= 1
    assert counts["dropped_moderation"] + counts["judge_parse_failure"] + counts["dropped_generation_failed"] + \
        counts["dropped_chosen_equals_rejected"] == len(skeletons) == 1
