"""WildChat-AQA's corpus (paper Appendix E.1) as a datatrove pipeline: MinHash near-duplicate removal, the
4,096-token length filter, then users with at least 10 sessions.

Why datatrove: it is the HF library for this job at WildChat's scale (990K conversations in the paper):
its MinHash stages write signatures, buckets and clusters to disk, so they resume per task (completion
markers under ``logs/``) and run unchanged on a local executor (default), or on Slurm or Ray when the corpus
outgrows one machine (``Settings.executor``). Facts measured here that shape the code
(``../shared/ENVIRONMENT.md``): its default xxhash shingle hashing fails with xxhash 4.1, so shingles are
hashed with SHA-1 (``HashConfig(hash_fc="sha1")``); its English word tokenizer is spaCy's (a dependency
already); with one worker the local executor runs tasks in-process (no worker pool, so no ``__main__`` guard
is needed; ``workers > 1`` spawns a pool and then needs one in scripts).

Rows are read in WildChat-1M's format (:mod:`convohub.conversations.wildchat`), PII-scrubbed before anything
else sees them (the LLM stages, their cache and the published data only ever see scrubbed text), and
rendered as ``role: content`` lines for shingling and token counting. A user is WildChat's hashed IP plus
user agent (:func:`convohub.conversations.make_user_id`) and is published under a random-looking user name
derived from that id and the build's seed. The user filter counts sessions after de-duplication and the
length filter, since those are the conversations that remain.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from convohub.aqa.chunking import render_conversation
from convohub.aqa.settings import Settings
from convohub.stages import digest


class CorpusPending(RuntimeError):
    """The datatrove stages were submitted to a cluster (Slurm) and have not finished yet."""


def sample_rows(settings: Settings) -> list[dict[str, Any]]:
    """The sample corpus draw of the tiny profile (WildChat-1M format, offline, seeded)."""
    from convohub.conversations import generate_wildchat_sample

    return generate_wildchat_sample(n_users=settings.sample_users, sessions_per_user=settings.sample_sessions,
                                    seed=settings.seed, weeks=settings.sample_weeks)


def user_name(user_id: str, seed: int) -> str:
    """The published, random-looking name of a user (stable for a seed; not invertible to the source ids)."""
    return "user-" + digest({"user": user_id, "seed": seed})[:8]


def _records(rows: Iterable[Mapping[str, Any]], seed: int, pii: Counter[str], counts: Counter[str]) -> Iterator[dict]:
    """Normalised, PII-scrubbed records of WildChat rows (empty conversations are counted and skipped)."""
    from convohub.conversations import from_wildchat_row, scrub_conversation_with_counts

    for index, row in enumerate(rows):
        counts["rows_read"] += 1
        conv = from_wildchat_row(dict(row), index=index)
        if not conv.turns or conv.timestamp is None:
            counts["empty_dropped"] += 1
            continue
        clean, found = scrub_conversation_with_counts(conv)
        pii.update(found)
        turns = [{"role": t.role, "content": t.content} for t in clean.turns]
        yield {
            "hash": digest({"conversation": clean.conversation_id}),
            "conversation_id": clean.conversation_id,
            "user_id": clean.user_id,
            "user_name": user_name(clean.user_id, seed),
            "timestamp": clean.timestamp.strftime("%Y-%m-%dT%H:%M:%S"),
            "country": clean.country or "",
            "reigon": clean.state or "",
            "language": clean.language or "",
            "conversation": turns,
        }


class TokenLimit:
    """datatrove filter predicate: keep a document with at most ``limit`` tokens (``token_count`` metadata)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def __call__(self, doc: Any) -> bool:
        return int(doc.metadata["token_count"]) <= self.limit


def tokenizer_path(name: str) -> str:
    """What datatrove's ``TokensCounter`` loads: ``smollm2`` is the offline SmolLM2 folder's tokenizer.json."""
    if name == "smollm2":
        from convohub.models import smollm2_path

        return str(smollm2_path() / "tokenizer.json")
    return name


def tokenizer_label(name: str) -> str:
    """The tokenizer as the card names it."""
    if name == "smollm2":
        from convohub.models import SMOLLM2_ID

        return f"the byte-level BPE of {SMOLLM2_ID}, offline"
    return name


def _minhash_config(settings: Settings) -> Any:
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    return MinhashConfig(n_grams=settings.minhash_ngrams, num_buckets=settings.minhash_bands,
                         hashes_per_bucket=settings.minhash_rows, seed=settings.seed + 1,
                         hash_config=HashConfig(hash_fc="sha1", precision=64))


def make_executor(pipeline: list[Any], settings: Settings, logging_dir: Path, tasks: int,
                  depends: Any = None) -> Any:
    """The datatrove executor ``settings.executor`` names, for one stage of the pipeline.

    ``local`` runs in this process (``workers == 1``) or a local pool; ``slurm`` needs ``partition`` and
    ``time`` in ``settings.extra["slurm"]`` (any other ``SlurmPipelineExecutor`` argument may go there too);
    ``ray`` needs a running Ray cluster and takes ``settings.extra["ray"]``.
    """
    common = {"tasks": tasks, "logging_dir": str(logging_dir), "depends": depends}
    if settings.executor == "local":
        from datatrove.executor import LocalPipelineExecutor

        return LocalPipelineExecutor(pipeline, workers=min(settings.workers, tasks), **common)
    if settings.executor == "slurm":
        from datatrove.executor import SlurmPipelineExecutor

        options = dict(settings.extra.get("slurm", {}))
        missing = [k for k in ("partition", "time") if k not in options]
        if missing:
            raise ValueError(f"the slurm executor needs {', '.join(missing)} in Settings.extra['slurm']")
        return SlurmPipelineExecutor(pipeline, workers=settings.workers, **common, **options)
    if settings.executor == "ray":
        from datatrove.executor import RayPipelineExecutor

        return RayPipelineExecutor(pipeline, workers=settings.workers, **common, **dict(settings.extra.get("ray", {})))
    raise ValueError(f"unknown executor {settings.executor!r}: use 'local', 'slurm' or 'ray'")


def _write_input(records: Iterable[dict], folder: Path, shards: int) -> int:
    """datatrove input: ``shards`` JSONL files of ``{"id", "text", "metadata"}`` (the record without text)."""
    folder.mkdir(parents=True, exist_ok=True)
    handles = [(folder / f"{i:05d}.jsonl").open("w", encoding="utf-8") for i in range(shards)]
    n = 0
    try:
        for n, record in enumerate(records, start=1):
            doc = {"id": record["hash"], "text": render_conversation(record["conversation"]), "metadata": record}
            handles[(n - 1) % shards].write(json.dumps(doc, ensure_ascii=False) + "\n")
    finally:
        for handle in handles:
            handle.close()
    return n


def _read_docs(folder: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.jsonl.gz")) if folder.is_dir() else []:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            docs.extend(json.loads(line) for line in handle if line.strip())
    return docs


def run_datatrove(settings: Settings, work: Path) -> None:
    """MinHash signatures -> LSH buckets -> clusters -> filter, token counter, length filter, writer."""
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.filters import LambdaFilter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import TokensCounter
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.logging import logger

    config = _minhash_config(settings)
    shards = max(1, settings.tasks)
    reader = JsonlReader(str(work / "input"), glob_pattern="*.jsonl")
    stages = [
        ([reader, MinhashDedupSignature(str(work / "signatures"), config=config)], shards),
        ([MinhashDedupBuckets(str(work / "signatures"), str(work / "buckets"), config=config)],
         settings.minhash_bands),
        ([MinhashDedupCluster(str(work / "buckets"), str(work / "clusters"), config=config)], 1),
        ([JsonlReader(str(work / "input"), glob_pattern="*.jsonl"),
          MinhashDedupFilter(str(work / "clusters"), exclusion_writer=JsonlWriter(str(work / "near_duplicates"))),
          TokensCounter(tokenizer_path(settings.tokenizer)),
          LambdaFilter(TokenLimit(settings.max_tokens), exclusion_writer=JsonlWriter(str(work / "too_long"))),
          JsonlWriter(str(work / "kept"))], shards),
    ]
    executor = None
    names = ("signatures", "buckets", "clusters", "filter")
    for (pipeline, tasks), name in zip(stages, names, strict=True):
        executor = make_executor(pipeline, settings, work / "logs" / name, tasks, depends=executor)
    log = work / "datatrove.log"
    if settings.executor == "slurm":
        done = all(not stage.get_incomplete_ranks() for stage in _chain(executor))
        if not done:
            executor.run()
            raise CorpusPending(f"the corpus stages were submitted to Slurm (logs under {work / 'logs'}); run the "
                                "build again when the jobs have finished: finished tasks are not repeated")
        return
    with log.open("a", encoding="utf-8") as handle, contextlib.redirect_stderr(handle):
        logger.remove()
        logger.add(handle, level="INFO")
        try:
            executor.run()
        finally:
            logger.remove()  # datatrove's task logger points at the redirected stream


def _chain(executor: Any) -> list[Any]:
    chain = []
    while executor is not None:
        chain.append(executor)
        executor = executor.depends
    return chain[::-1]


def build_corpus(rows: Iterable[Mapping[str, Any]], settings: Settings, work: Path) -> tuple[list[dict], dict]:
    """Filtered corpus records (sorted by timestamp) and the counts after each filter.

    ``work`` holds datatrove's folders; each stage that finished is skipped when the build runs again with
    the same settings (a changed setting starts the folder over)."""
    from convohub.hub import atomic_write_text

    work.mkdir(parents=True, exist_ok=True)
    stamp = work / "settings.json"
    fingerprint = json.dumps({k: v for k, v in settings.fingerprint().items() if k in CORPUS_FIELDS}, sort_keys=True)
    if not stamp.is_file() or stamp.read_text(encoding="utf-8") != fingerprint:
        for child in work.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    counts: Counter[str] = Counter()
    pii: Counter[str] = Counter()
    if not (work / "input").is_dir():
        tmp = work / "input.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        records = sorted(_records(rows, settings.seed, pii, counts), key=lambda r: (r["timestamp"], r["hash"]))
        seen: set[str] = set()
        for record in records:
            if record["hash"] in seen:
                raise ValueError(f"conversation {record['conversation_id']!r} appears twice in the source rows")
            seen.add(record["hash"])
        _write_input(records, tmp, max(1, settings.tasks))
        atomic_write_text(work / "input_counts.json", json.dumps({"counts": counts, "pii": pii}))
        tmp.rename(work / "input")
        atomic_write_text(stamp, fingerprint)
    saved = json.loads((work / "input_counts.json").read_text(encoding="utf-8"))
    counts, pii = Counter(saved["counts"]), Counter(saved["pii"])
    run_datatrove(settings, work)
    kept = [doc["metadata"] | {"token_count": int(doc["metadata"]["token_count"])} for doc in _read_docs(work / "kept")]
    counts["near_duplicates"] = len(_read_docs(work / "near_duplicates"))
    counts["over_max_tokens"] = len(_read_docs(work / "too_long"))
    counts["after_dedup"] = counts["rows_read"] - counts["empty_dropped"] - counts["near_duplicates"]
    counts["after_length"] = len(kept)
    sessions = Counter(r["user_id"] for r in kept)
    active = {user for user, n in sessions.items() if n >= settings.min_sessions}
    final = sorted((r for r in kept if r["user_id"] in active), key=lambda r: (r["timestamp"], r["hash"]))
    counts["inactive_users"] = len(sessions) - len(active)
    counts["inactive_user_conversations"] = len(kept) - len(final)
    counts["after_users"] = len(final)
    counts["users"] = len(active)
    report = {"counts": dict(counts), "pii": {k: v for k, v in sorted(pii.items()) if v}}
    for record in final:
        record.pop("user_id")
    return final, report


#: the settings the corpus stage depends on (changing any other keeps datatrove's finished work)
CORPUS_FIELDS = ("sample_users", "sample_sessions", "sample_weeks", "minhash_ngrams", "minhash_bands", "minhash_rows",
                 "max_tokens", "tokenizer", "min_sessions", "executor", "tasks", "seed", "extra")
