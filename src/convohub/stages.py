"""Resumable stages under a work folder: what every multi-step data builder of convohub shares.

A builder that calls LLMs or walks a large corpus must survive being killed. Two mechanisms, used together:

* :func:`cached`: each chat backend goes behind a :class:`~convohub.llm.CachedBackend` in
  ``<work>/llm-cache``, so a killed run repeats no LLM call;
* :func:`stage`: each finished stage writes ``<work>/<name>.json`` (atomically) holding its value and the
  fingerprint of what produced it (settings, models, input digests); the next run with an equal fingerprint
  reads the file instead of recomputing, and a changed fingerprint recomputes, so stale results are never
  reused.

:func:`digest` is the short, stable hash those fingerprints (and seeded orderings) are made of.

Used by :mod:`convohub.wildfeedback.pipeline` and :mod:`convohub.crychic.data_common`; kept free of heavy
imports (the LLM layer is imported only when a backend is wrapped).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

CACHE_FOLDER = "llm-cache"


def digest(obj: Any) -> str:
    """A short, stable hash of any JSON-ready value: 16 hex digits of the SHA-256 of its sorted-key JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def cached(backend: Any, work: Path | None) -> Any:
    """``backend`` behind the response cache of ``work`` (``<work>/llm-cache``).

    Anything that is not a chat backend (None, a zero-shot moderator), a backend that is already cached,
    or any backend when there is no work folder, comes back as it is, so callers can wrap every role blindly.
    """
    if work is None:
        return backend
    from convohub.llm import CachedBackend, ChatBackend

    if not isinstance(backend, ChatBackend) or isinstance(backend, CachedBackend):
        return backend
    return CachedBackend(backend, Path(work) / CACHE_FOLDER)


def stage(work: Path | None, name: str, fingerprint: Mapping[str, Any], compute: Callable[[], Any]) -> Any:
    """``compute()``, unless ``<work>/<name>.json`` holds the value of a run with an equal fingerprint.

    The value must be JSON-ready; it is written with its fingerprint once computed. The fingerprint is
    compared as JSON (a tuple equals the list it is saved as). Without a work folder nothing is read or
    written.
    """
    if work is None:
        return compute()
    expected = json.loads(json.dumps(dict(fingerprint), ensure_ascii=False))
    path = Path(work) / f"{name}.json"
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("fingerprint") == expected:
            return saved["value"]
    value = compute()
    from convohub.hub import atomic_write_text

    atomic_write_text(path, json.dumps({"fingerprint": expected, "value": value}, ensure_ascii=False))
    return value
