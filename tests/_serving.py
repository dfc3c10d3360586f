"""Shared fixtures for tests that talk to a real `transformers serve` process on loopback.

Imported by each server test module (``from _serving import served_fixture, tiny_causal_fixture``) rather
than copied, so the start-up command, readiness probe and clean shutdown are written once. The fixtures are
*named* ``served`` and ``tiny_causal``; the ``_fixture`` suffix on the Python names keeps the import from
clashing with the test parameters that request them.

`transformers serve` notes (transformers 5.23): the positional FORCE_MODEL argument pins the server to
one model, which is preloaded before the port opens and must be named *exactly* that string (here the
folder path) in requests; any other name gets HTTP 400. ``/health`` is the readiness probe --
``/v1/models`` scans the Hub cache folder and answers 500 when it does not exist.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from convohub.llm.serving import ServerError, missing_serving_deps
from convohub.llm.serving import serve as _serve


@pytest.fixture(scope="module", name="tiny_causal")
def tiny_causal_fixture() -> Path:
    from convohub.tiny import tiny_model

    return tiny_model("causal")


@contextlib.contextmanager
def serve(model: Path, tmp: Path) -> Iterator[tuple[str, str]]:
    """`convohub.llm.serving.serve` for tests: skips without the serving extras, fails on a dead server."""
    missing = missing_serving_deps()
    if missing:
        pytest.skip(f"`transformers serve` needs {missing}: pip install 'transformers[serving]'")
    try:
        with _serve(model, tmp / "serve.log") as served:
            yield served
    except ServerError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module", name="served")
def served_fixture(tiny_causal: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, model name) of a `transformers serve` process pinned to the random tiny model (plumbing)."""
    with serve(tiny_causal, tmp_path_factory.mktemp("serve")) as served:
        yield served


@pytest.fixture(scope="module", name="smollm2")
def smollm2_fixture() -> Path:
    """The converted SmolLM2-135M-Instruct folder (the offline LLM of every step)."""
    from convohub.models import smollm2_path

    return smollm2_path()


@pytest.fixture(scope="module", name="served_smollm2")
def served_smollm2_fixture(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, model name) of a `transformers serve` process pinned to the converted SmolLM2 folder."""
    with serve(smollm2, tmp_path_factory.mktemp("serve-smollm2")) as served:
        yield served
