"""The endpoint path with the real offline model behind a real server: `transformers serve` on loopback,
pinned to the converted SmolLM2-135M-Instruct folder, answered through :class:`EndpointBackend`.

The tiny-model server tests (test_llm_server.py) check the plumbing; these check that what convohub sends
to a real instruct model comes back as a real answer, identical to the in-process greedy answer, cached
under a key that names the server and the weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _serving import served_smollm2_fixture, smollm2_fixture  # noqa: F401  (pytest fixtures)

from convohub.llm import CachedBackend, ChatRequest, EndpointBackend, make_backend

pytestmark = [pytest.mark.server, pytest.mark.slow]

QUESTIONS = ("What is the capital of France? Answer with one word.",
             "What is the capital of Japan? Answer with one word.")


def _requests() -> list[ChatRequest]:
    return [ChatRequest.from_prompt(q, max_new_tokens=12) for q in QUESTIONS]


def test_served_smollm2_answers_and_matches_local_greedy(served_smollm2: tuple[str, str], smollm2: Path) -> None:
    url, model = served_smollm2
    served = EndpointBackend(url, model, max_concurrency=2).chat(_requests())
    assert all(r.ok for r in served), [r.error for r in served]
    assert "Paris" in served[0].text and "Tokyo" in served[1].text
    local = make_backend(f"local:{smollm2}").chat(_requests())
    assert [r.text.strip() for r in served] == [r.text.strip() for r in local]


def test_cache_of_a_served_model_is_keyed_by_server_and_weights(served_smollm2: tuple[str, str],
                                                                 tmp_path: Path) -> None:
    url, model = served_smollm2
    backend = CachedBackend(EndpointBackend(url, model), tmp_path / "cache")
    first = backend.chat(_requests()[:1])
    again = backend.chat(_requests()[:1])
    assert first[0].ok and not first[0].cached and again[0].cached and again[0].text == first[0].text
    identity = backend.identity()
    assert identity["base_url"] == url and len(identity["revision"]) == 16
    elsewhere = CachedBackend(EndpointBackend("http://127.0.0.1:9/v1", model, max_retries=0, timeout=2),
                              tmp_path / "cache")
    assert not elsewhere.chat(_requests()[:1])[0].cached  # another server: a miss (and a failed call)
