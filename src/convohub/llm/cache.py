"""On-disk response cache, so a killed labelling/judging run resumes without repeating paid calls.

Layout: one JSON file per answer at ``<cache_dir>/<key[:2]>/<key>.json`` where ``key`` is the sha256 of
the canonical JSON of (cache format version, the backend's identity -- model id, server base URL and
weights revision where known, see :meth:`ChatBackend.identity` -- messages, sampling parameters). Why
files and not sqlite:

* every write is independently atomic (temp file in the same folder + ``os.replace``), so a process
  killed mid-write leaves either the old state or the new file, never a torn entry, and several worker
  processes can share one cache without a lock or a "database is locked" retry loop;
* entries are human-readable, greppable, and trivially merged or pruned with ``rsync``/``rm``;
* 256 two-hex-digit shards keep each folder small even at a few hundred thousand answers.

Only successful responses are stored: a 429 or a timeout must be retried on the next run, not replayed.
Sampled answers (temperature > 0) are cached too, which is what makes a resumed run reproduce the
first run's data exactly; change ``seed`` (part of the key) to draw new samples.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .types import ChatBackend, ChatRequest, ChatResponse

logger = logging.getLogger(__name__)

#: Bump when the key recipe or the entry format changes; old entries then simply stop matching.
CACHE_VERSION = 2


def cache_key(model: str | dict[str, Any], request: ChatRequest) -> str:
    """sha256 hex of everything that changes the answer: the model (an id, or a backend's
    :meth:`~ChatBackend.identity`), messages and sampling parameters."""
    payload = {
        "v": CACHE_VERSION,
        "model": {"model": model} if isinstance(model, str) else dict(model),
        "messages": request.messages,
        "params": request.sampling_params(),
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` so readers see the old file or the complete new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(obj, handle, ensure_ascii=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class ResponseCache:
    """The sharded folder of cached answers for any number of models (the model id is in the key)."""

    def __init__(self, cache_dir: str | os.PathLike[str]) -> None:
        self.root = Path(cache_dir).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> ChatResponse | None:
        path = self.path_for(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            return ChatResponse(text=entry["text"], finish_reason=entry.get("finish_reason"), cached=True)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # a corrupt entry (disk trouble, manual edit) is a miss, and the next success overwrites it
            logger.warning("ignoring unreadable cache entry %s: %s", path, exc)
            return None

    def put(self, key: str, model_id: str, request: ChatRequest, response: ChatResponse) -> None:
        if not response.ok:
            raise ValueError("failed responses are not cached")
        entry = {
            "key": key,
            "model_id": model_id,
            "messages": request.messages,
            "params": request.sampling_params(),
            "text": response.text,
            "finish_reason": response.finish_reason,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic_write_json(self.path_for(key), entry)

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("??/*.json"))


class CachedBackend(ChatBackend):
    """Wraps any backend; answers hits from disk and sends only the misses to ``inner`` (in one batch).

    ``stats`` counts ``hits``, ``misses``, ``writes``, ``write_errors`` and ``uncached_failures``. A
    failed cache write is logged and counted, never raised: the answer in hand is still returned.
    Answers are written when the inner batch returns, so feed long jobs through
    :func:`convohub.llm.run_chat` (chunks) to bound what a crash can lose.
    """

    kind = "cached"

    def __init__(self, inner: ChatBackend, cache_dir: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.cache = ResponseCache(cache_dir)
        self._lock = threading.Lock()
        self.stats: dict[str, int] = dict.fromkeys(
            ("hits", "misses", "writes", "write_errors", "uncached_failures"), 0
        )

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def name(self) -> str:
        return self.inner.name

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "cache_dir": str(self.cache.root)}

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def _bump(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        model_id = self.inner.model_id
        identity = self.inner.identity()
        keys = [cache_key(identity, r) for r in requests]
        results: list[ChatResponse | None] = [self.cache.get(k) for k in keys]
        todo = [i for i, hit in enumerate(results) if hit is None]
        self._bump("hits", len(requests) - len(todo))
        self._bump("misses", len(todo))
        if todo:
            fresh = self.inner.chat([requests[i] for i in todo])
            if len(fresh) != len(todo):
                raise RuntimeError(f"{self.inner!r} returned {len(fresh)} responses for {len(todo)} requests")
            for i, response in zip(todo, fresh, strict=True):
                results[i] = response
                if not response.ok:
                    self._bump("uncached_failures")
                    continue
                try:
                    self.cache.put(keys[i], model_id, requests[i], response)
                    self._bump("writes")
                except OSError as exc:
                    logger.warning("could not write cache entry for %s: %s", keys[i][:12], exc)
                    self._bump("write_errors")
        return [r for r in results if r is not None]
