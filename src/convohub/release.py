"""The main job: run every registered system's build -> train -> evaluate -> card -> Space steps.

Progress is printed per step, a summary table closes the run, and the first failing step stops its
system with an error that names it (the CLI turns that into a non-zero exit). Finished steps are
recorded in ``<out>/.convohub-work/<system>/progress.json`` together with a fingerprint of the run's
settings, so a killed release resumes where it stopped; ``--force`` starts over. A finished step runs again
only when something it depends on changed: its input files, or an artifact it reads
(:attr:`convohub.registry.Step.reads`, checked while the step runs) that a step produced again since it ran,
in this release or in an earlier one (``convohub release --only perqa`` and then ``--only reqap``): every
run of a step gets a stamp, and a step records the stamps of the artifacts it read.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub import __version__
from convohub.hub import DEFAULT_NAMESPACE, HubTarget, atomic_write_text, dump_json
from convohub.paths import repo_root
from convohub.registry import Step, System, load_systems

PROFILES = ("tiny", "paper")


class StepFailed(RuntimeError):
    """A release step raised; carries the system and step names for the exit message."""

    def __init__(self, system: str, step: str, cause: BaseException):
        super().__init__(f"{system}/{step} failed: {type(cause).__name__}: {cause}")
        self.system, self.step, self.cause = system, step, cause


class Artifacts(dict[str, Any]):
    """``ctx.artifacts``: what finished steps produced (name -> path or value), a dict that can also note the
    names a step looks up (``[]``, ``get``, ``in``), so the release can check the step's declared reads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._seen: set[str] | None = None

    def _note(self, key: Any) -> None:
        if self._seen is not None:
            self._seen.add(str(key))

    def __getitem__(self, key: str) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self._note(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return super().__contains__(key)

    @contextmanager
    def recording(self) -> Iterator[set[str]]:
        """The names looked up inside the ``with`` block."""
        seen: set[str] = set()
        self._seen = seen
        try:
            yield seen
        finally:
            self._seen = None


@dataclass
class ReleaseContext:
    """Everything a step needs: profile, where to write, scratch space, the LLM (if any), artifacts."""

    profile: str
    target: HubTarget
    work_dir: Path
    seed: int = 0
    #: the LLM the user configured (``--llm SPEC`` or ``CONVOHUB_LLM_*``): a ChatBackend, or None
    llm: Any = None
    #: ``--llm rules``: LLM steps use their named rule/lexical stand-ins instead of any model
    use_rules: bool = False
    #: ``--max-train-steps N``: every training run stops after N optimiser steps (a smoke run of the whole
    #: pipeline; cards then report the steps actually run, not the recipe's)
    max_train_steps: int | None = None
    artifacts: Artifacts = field(default_factory=Artifacts)
    #: names of the artifacts that steps which ran (not resumed) in this release produced, all systems together
    fresh: set[str] = field(default_factory=set)
    #: artifact -> the stamp of the step run that produced it: this release's runs, else those recorded in the
    #: work dir's progress files (every system's, so a read of another system's artifact is checked too)
    stamps: dict[str, str] = field(default_factory=dict)
    _stamps_loaded: bool = field(default=False, repr=False)
    _local_llm: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.artifacts, Artifacts):
            self.artifacts = Artifacts(self.artifacts)
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, got {self.profile!r}")
        if self.max_train_steps is not None and self.max_train_steps < 1:
            raise ValueError(f"max_train_steps must be >= 1, got {self.max_train_steps}")

    def train_overrides(self) -> tuple[str, ...]:
        """Extra CLI arguments for every training script of the release (``--max_steps`` of a smoke run)."""
        return () if self.max_train_steps is None else ("--max_steps", str(self.max_train_steps))

    def scratch(self, *parts: str) -> Path:
        """A persistent scratch folder under the work dir (kept between runs for resume)."""
        path = self.work_dir.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def local_llm(self) -> Any:
        """The offline SmolLM2 backend (loaded once per release, answers cached under the work dir)."""
        if self._local_llm is None:
            from convohub.llm import OFFLINE_SPEC, make_backend

            self._local_llm = make_backend(OFFLINE_SPEC, cache_dir=self.scratch("llm-cache"))
        return self._local_llm

    def chat_llm(self) -> Any:
        """The LLM for a step that needs a model: the configured one, else the offline SmolLM2 model."""
        return self.llm if self.llm is not None else self.local_llm()

    def log(self, message: str) -> None:
        print(f"    {message}", flush=True)

    @property
    def repo(self) -> Path:
        return repo_root()


@dataclass
class StepRecord:
    system: str
    step: str
    status: str  # done | resumed | failed | skipped
    seconds: float
    detail: str = ""


def _fingerprint(ctx: ReleaseContext) -> dict[str, Any]:
    return {"profile": ctx.profile, "seed": ctx.seed, "namespace": ctx.target.namespace,
            "version": __version__, "llm": getattr(ctx.llm, "model_id", None), "rules": ctx.use_rules,
            "max_train_steps": ctx.max_train_steps}


def _load_progress(path: Path, fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}
    return state.get("steps", {}) if state.get("fingerprint") == dict(fingerprint) else {}


#: key of a finished step's progress entry holding the digest of its input files (not an artifact)
INPUTS_KEY = "_inputs_sha256"
#: key of a finished step's progress entry holding the stamp of that run (a new one each time the step runs)
STAMP_KEY = "_stamp"
#: key of a finished step's progress entry holding the stamps of the artifacts it read, as they were then
READ_STAMPS_KEY = "_read_stamps"
_META_KEYS = (INPUTS_KEY, STAMP_KEY, READ_STAMPS_KEY)


def _artifacts_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The artifacts of a progress entry, without its bookkeeping keys."""
    return {k: v for k, v in entry.items() if k not in _META_KEYS}


def _artifacts_exist(artifacts: Mapping[str, Any]) -> bool:
    return all(Path(v).exists() for k, v in _artifacts_of(artifacts).items() if k.endswith(("_dir", "_path")))


def _load_stamps(ctx: ReleaseContext) -> None:
    """Fill ``ctx.stamps`` once from every system's progress file under the work dir (runs of this release
    already recorded take precedence), so a step can see that another system's artifact it reads was produced
    again by an earlier, separate release run."""
    if ctx._stamps_loaded:
        return
    ctx._stamps_loaded = True
    fingerprint = _fingerprint(ctx)
    for path in sorted(ctx.work_dir.glob("*/progress.json")):
        for entry in _load_progress(path, fingerprint).values():
            if isinstance(entry, Mapping) and entry.get(STAMP_KEY):
                for name in _artifacts_of(entry):
                    ctx.stamps.setdefault(name, entry[STAMP_KEY])


def _setting_digest(name: str, digest: Any) -> None:
    """Add environment variable ``name`` to ``digest`` (:attr:`convohub.registry.Step.settings`)."""
    value = os.environ.get(name, "")
    digest.update(f"{name}={value}\0".encode())
    path = Path(value) if value else None
    if path is not None and path.is_file():
        digest.update(path.read_bytes())
    elif path is not None and path.is_dir():
        for file in sorted(f for f in path.rglob("*") if f.is_file()):
            stat = file.stat()
            digest.update(f"{file.relative_to(path).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())


def _inputs_digest(step: Step, ctx: ReleaseContext) -> str | None:
    """SHA-256 over the names and contents of the step's input files and over its settings (None: the step
    declares neither)."""
    if step.inputs is None and not step.settings:
        return None
    digest = hashlib.sha256()
    for path in step.inputs(ctx) if step.inputs is not None else ():
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"step {step.kind}:{step.name} reads {path}, which does not exist")
        content = path.read_bytes()
        digest.update(f"{path.name}\0{len(content)}\0".encode())
        digest.update(content)
    for name in step.settings:
        _setting_digest(name, digest)
    return digest.hexdigest()


def _why_rerun(step: Step, prior: Mapping[str, Any], inputs: str | None, ctx: ReleaseContext,
               ran: bool) -> str | None:
    """Why a step an earlier run finished must run again (None: resume it)."""
    if step.reads is None and ran:
        return "an earlier step of its system ran in this release"
    changed = sorted(k for k in step.reads or () if k in ctx.fresh)
    if changed:
        return f"it reads {', '.join(changed)}, produced again in this release"
    recorded = prior.get(READ_STAMPS_KEY)
    if isinstance(recorded, Mapping):
        moved = sorted(k for k in step.reads or () if ctx.stamps.get(k) != recorded.get(k))
        if moved:
            return f"it reads {', '.join(moved)}, produced again by a release run since it last ran"
    if prior.get(INPUTS_KEY) != inputs:
        settings = f" or the settings {', '.join(step.settings)}" if step.settings else ""
        return f"its input files{settings} changed since the last run (or were not recorded)"
    if not _artifacts_exist(prior):
        return "an output of the last run is gone"
    return None


def _run_step(step: Step, ctx: ReleaseContext) -> dict[str, Any]:
    """Run ``step``; a step with declared reads that looks up another artifact fails, naming it."""
    with ctx.artifacts.recording() as seen:
        produced = dict(step.run(ctx) or {})
    undeclared = sorted(seen - set(step.reads)) if step.reads is not None else []
    if undeclared:
        raise RuntimeError(f"step {step.kind}:{step.name} read the artifacts {undeclared}, which its Step(reads=...) "
                           "does not declare: add them, or a resumed release could keep its stale outputs")
    return produced


def run_system(system: System, ctx: ReleaseContext, *, force: bool = False) -> list[StepRecord]:
    """Run one system's steps in order, resuming finished ones; raise StepFailed on the first failure.

    A finished step runs again when an artifact it reads was produced again since the step ran, in this release
    or an earlier one (steps that declare no reads: when any earlier step of the system ran, since it may read
    what that step produced), when its input files changed, or when an output of it is gone
    (:func:`_why_rerun`).
    """
    progress_path = ctx.scratch(system.name) / "progress.json"
    fingerprint = _fingerprint(ctx)
    done = {} if force else _load_progress(progress_path, fingerprint)
    _load_stamps(ctx)
    records: list[StepRecord] = []
    ran = False
    for step in system.steps:
        key = f"{step.kind}:{step.name}"
        prior = done.get(key)
        try:
            inputs = _inputs_digest(step, ctx)
        except OSError as exc:
            records.append(StepRecord(system.name, key, "failed", 0.0, str(exc)))
            raise StepFailed(system.name, key, exc) from exc
        if prior is not None:
            why = _why_rerun(step, prior, inputs, ctx, ran)
            if why is None:
                ctx.artifacts.update(_artifacts_of(prior))
                if prior.get(STAMP_KEY):
                    ctx.stamps.update(dict.fromkeys(_artifacts_of(prior), prior[STAMP_KEY]))
                records.append(StepRecord(system.name, key, "resumed", 0.0))
                print(f"  [{system.name}] {key}: resumed from a previous run", flush=True)
                continue
            print(f"  [{system.name}] {key}: runs again: {why}", flush=True)
        print(f"  [{system.name}] {key} ...", flush=True)
        start = time.perf_counter()
        read_stamps = {k: ctx.stamps.get(k) for k in step.reads or ()}
        try:
            produced = _run_step(step, ctx)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a named step failure
            records.append(StepRecord(system.name, key, "failed", time.perf_counter() - start, str(exc)))
            traceback.print_exc(file=sys.stderr)
            raise StepFailed(system.name, key, exc) from exc
        ran = True
        ctx.artifacts.update(produced)
        ctx.fresh.update(produced)
        stamp = uuid.uuid4().hex[:16]
        ctx.stamps.update(dict.fromkeys(produced, stamp))
        done[key] = ({k: str(v) for k, v in produced.items()} | ({INPUTS_KEY: inputs} if inputs else {})
                     | {STAMP_KEY: stamp, READ_STAMPS_KEY: read_stamps})
        atomic_write_text(progress_path, dump_json({"fingerprint": fingerprint, "steps": done}))
        seconds = time.perf_counter() - start
        detail = ", ".join(f"{k}={v}" for k, v in produced.items() if not k.endswith(("_dir", "_path")))
        records.append(StepRecord(system.name, key, "done", seconds, detail))
        print(f"  [{system.name}] {key}: done in {seconds:.1f}s", flush=True)
    return records


def run_release(
    *,
    out: Path,
    profile: str = "tiny",
    only: Sequence[str] | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    push: bool = False,
    token: str | None = None,
    seed: int = 0,
    force: bool = False,
    llm: Any = None,
    use_rules: bool = False,
    max_train_steps: int | None = None,
    jobs: int = 1,
    llm_spec: str | None = None,
) -> tuple[list[StepRecord], StepFailed | None]:
    """Run the release for the selected systems; returns the step records and the failure, if any.

    ``jobs`` > 1 runs that many systems side by side, each in a process of its own
    (:mod:`convohub.release_parallel`); those processes build their LLM backend from ``llm_spec`` (a
    ``--llm`` spec) or, without one, from the ``CONVOHUB_LLM_*`` environment (as the ``convohub`` command
    does), so a backend object passed as ``llm`` needs one of them.
    """
    systems = load_systems()
    unknown = sorted(set(only or ()) - set(systems))
    if unknown:
        raise KeyError(f"unknown system(s) {unknown}; registered: {', '.join(systems)}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    target = HubTarget(root=Path(out).resolve(), namespace=namespace, push=push, token=token)
    ctx = ReleaseContext(profile=profile, target=target, work_dir=target.root / ".convohub-work", seed=seed,
                         llm=llm, use_rules=use_rules, max_train_steps=max_train_steps)  # checks the options
    selected = {name: system for name, system in systems.items() if not only or name in only}
    if jobs > 1 and len(selected) > 1:
        from convohub.llm.factory import configured_base_url

        if llm is not None and llm_spec is None and configured_base_url() is None:
            raise ValueError("a release with jobs > 1 starts a process per system, which cannot share the llm "
                             "object: pass llm_spec (the --llm spec it was made from), or jobs=1")
        return _run_side_by_side(selected, jobs, target, profile=profile, seed=seed, force=force,
                                 llm_spec=llm_spec, use_rules=use_rules, max_train_steps=max_train_steps)
    records: list[StepRecord] = []
    for name, system in selected.items():
        print(f"== {system.title} ({name}), profile {profile}", flush=True)
        try:
            records += run_system(system, ctx, force=force)
        except StepFailed as failure:
            records.append(StepRecord(failure.system, failure.step, "failed", 0.0, str(failure.cause)))
            return _dedupe(records), failure
    return records, None


def _run_side_by_side(systems: Mapping[str, System], jobs: int, target: HubTarget,
                      **options: Any) -> tuple[list[StepRecord], StepFailed | None]:
    import shutil

    from convohub.release_parallel import ReleaseOptions, process_launcher, run_side_by_side, work_folder

    out = target.root
    options |= {"out": str(out), "namespace": target.namespace, "push": target.push}
    work = work_folder(out)
    launch = process_launcher(ReleaseOptions(**options), target.token, work)
    try:
        rows, failed = run_side_by_side(systems, jobs, launch, work)
    finally:  # the options and records of this run only; an interrupted release leaves nothing behind
        shutil.rmtree(work, ignore_errors=True)
    records = [StepRecord(**row) for row in rows]
    failure = None
    if failed is not None:
        failure = StepFailed(failed["system"], failed["step"], RuntimeError(failed["cause"]))
    return records, failure


def _dedupe(records: list[StepRecord]) -> list[StepRecord]:
    seen: dict[tuple[str, str], StepRecord] = {}
    for r in records:
        seen.setdefault((r.system, r.step), r)
    return list(seen.values())


def summary_table(records: Sequence[StepRecord]) -> str:
    """The closing table of a release run."""
    rows = [("system", "step", "status", "seconds", "detail")]
    rows += [(r.system, r.step, r.status, f"{r.seconds:.1f}", r.detail[:70]) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
