"""Run a release's systems side by side, each in a process of its own on its share of the cores.

Why: on a small CPU machine most LLM steps decode one sequence at a time, which a second torch thread hardly
speeds up (SmolLM2-135M greedily decoding 40 tokens after a 256-token prompt, twice: 6.6 s on one thread,
6.2 s on two, on a 2-core AMD EPYC), while a training step gains about 1.5 times (3 AdamW steps of a batch
of 4 x 256 tokens: 46.3 s against 29.9 s). Two systems on one thread each keep both cores busy through the
decoding-bound steps that a single process leaves half idle.

Each system runs in ``python -m convohub.release_parallel``, a child process that calls
:func:`convohub.release.run_release` for that system alone (``OMP_NUM_THREADS`` set to its share, which its
training subprocesses inherit) and writes its step records to a JSON file the parent reads. Progress and
resume are the sequential release's: every system keeps its own ``progress.json``, so a stopped release
resumes the same way whatever ``--jobs`` it ran with.

Scheduling: a system starts once the systems it :attr:`~convohub.registry.System.needs` have finished (ReQAP
reads PerQA's dataset); among the ready ones, the one with the longest chain of
:attr:`~convohub.registry.System.cost` ahead of it starts first, so that the processes end close together.
After a failure nothing new starts: the running systems finish (their steps are saved), the systems that were
not started are reported as skipped, and the release reports the first failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from convohub.registry import System

#: The environment variables that set a process's thread count for torch, OpenMP and MKL; accelerate's
#: launcher passes ``OMP_NUM_THREADS`` on to the training scripts.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: How long a stopped release waits for its systems' processes to end before killing them.
STOP_GRACE_S = 60.0


@dataclass(frozen=True)
class ReleaseOptions:
    """What every system's process is started with (the sequential release's arguments, minus the token,
    which travels in the child's environment rather than on its command line)."""

    out: str
    profile: str
    namespace: str
    push: bool
    seed: int
    force: bool
    llm_spec: str | None
    use_rules: bool
    max_train_steps: int | None


class Child(Protocol):
    """The part of :class:`subprocess.Popen` the scheduler uses."""

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


Launcher = Callable[[str, int, Path], Child]


def available_cpus() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - no affinity API (macOS, Windows)
        return os.cpu_count() or 1


def default_jobs(profile: str) -> int:
    """``--jobs`` when not given: two systems side by side for the tiny profile on a machine with two or more
    cores; one for the paper profile, whose training runs take every GPU of the node."""
    return 2 if profile == "tiny" and available_cpus() >= 2 else 1


def start_order(systems: Mapping[str, System]) -> list[str]:
    """``systems``' names, the longest chain of cost first (a system's chain: its cost plus the longest chain
    of the selected systems that need it); ties keep the release order."""
    names = list(systems)
    dependents = {name: [other for other in names if name in systems[other].needs] for name in names}
    chain: dict[str, float] = {}

    def length(name: str, path: tuple[str, ...] = ()) -> float:
        if name in path:
            raise ValueError(f"the systems {' -> '.join((*path, name))} need each other (System.needs): "
                             "no order can run them")
        if name not in chain:
            chain[name] = systems[name].cost + max((length(d, (*path, name)) for d in dependents[name]),
                                                   default=0.0)
        return chain[name]

    return sorted(names, key=lambda name: (-length(name), names.index(name)))


def child_command(system: str, options_path: Path, records_path: Path) -> list[str]:
    return [sys.executable, "-m", "convohub.release_parallel", system, str(options_path), str(records_path)]


def process_launcher(options: ReleaseOptions, token: str | None, work: Path) -> Launcher:
    """The launcher that starts one system's ``python -m convohub.release_parallel`` process on the number of
    threads it is given."""
    work.mkdir(parents=True, exist_ok=True)
    options_path = work / "options.json"
    options_path.write_text(json.dumps(asdict(options)), encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"} | ({"HF_TOKEN": token} if token else {})

    def launch(system: str, threads: int, records_path: Path) -> Child:
        return subprocess.Popen(child_command(system, options_path, records_path),
                                env=env | dict.fromkeys(THREAD_ENV, str(threads)))

    return launch


@dataclass
class _Running:
    child: Child
    records_path: Path
    started: float


def _read_outcome(system: str, path: Path, code: int) -> tuple[list[dict[str, Any]], dict[str, str] | None]:
    """A finished child's step records and failure; a child that left no records (killed, out of memory)
    becomes one failed record naming its exit code."""
    try:
        outcome = json.loads(path.read_text(encoding="utf-8"))
        return list(outcome["records"]), outcome.get("failure")
    except (OSError, ValueError, KeyError):
        cause = (f"its process exited with code {code} without recording its steps (killed, or out of memory?); "
                 f"run `convohub release --only {system}` to see the error")
        record = {"system": system, "step": "-", "status": "failed", "seconds": 0.0, "detail": cause}
        return [record], {"system": system, "step": "-", "cause": cause}


def run_side_by_side(systems: Mapping[str, System], jobs: int, launch: Launcher, work: Path, *,
                     poll_s: float = 0.5) -> tuple[list[dict[str, Any]], dict[str, str] | None]:
    """Run ``systems`` (release order) at most ``jobs`` at a time through ``launch``; returns every step
    record in release order and the first failure (``{"system", "step", "cause"}``), if any.

    A stop of this process (Ctrl-C, SIGTERM through the ``convohub`` command) stops the running systems with
    SIGTERM, so that each stops its training subprocess, and kills whatever is left after
    :data:`STOP_GRACE_S`."""
    threads = max(1, available_cpus() // jobs)
    pending = start_order(systems)
    running: dict[str, _Running] = {}
    outcomes: dict[str, list[dict[str, Any]]] = {}
    finished: set[str] = set()
    failure: dict[str, str] | None = None
    print(f"== {len(systems)} systems, {jobs} at a time, {threads} thread(s) each; start order: "
          f"{', '.join(pending)}", flush=True)
    try:
        while pending or running:
            if failure is None:
                for name in list(pending):
                    if len(running) >= jobs:
                        break
                    if all(need in finished or need not in systems for need in systems[name].needs):
                        pending.remove(name)
                        records_path = work / f"{name}.records.json"
                        records_path.unlink(missing_ok=True)
                        running[name] = _Running(launch(name, threads, records_path), records_path, time.monotonic())
                        print(f"== {name}: started", flush=True)
            elif not running:
                break
            time.sleep(poll_s)
            for name, run in list(running.items()):
                code = run.child.poll()
                if code is None:
                    continue
                del running[name]
                records, failed = _read_outcome(name, run.records_path, code)
                outcomes[name] = records
                minutes = (time.monotonic() - run.started) / 60
                if failed is None and code == 0:
                    finished.add(name)
                    print(f"== {name}: finished in {minutes:.1f} min", flush=True)
                else:
                    failure = failure or failed or {"system": name, "step": "-", "cause": f"exit code {code}"}
                    print(f"== {name}: FAILED after {minutes:.1f} min; no further system starts", flush=True)
    except BaseException:
        _stop(running)
        raise
    for name in pending:
        why = f"not started: {failure['system'] if failure else 'an earlier system'} failed"
        outcomes[name] = [{"system": name, "step": "-", "status": "skipped", "seconds": 0.0, "detail": why}]
    return [record for name in systems for record in outcomes.get(name, [])], failure


def _stop(running: Mapping[str, _Running]) -> None:
    for run in running.values():
        if run.child.poll() is None:
            run.child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for run in running.values():
        try:
            run.child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            run.child.kill()
            run.child.wait()


def _write_outcome(path: Path, records: Sequence[Any], failure: Any) -> None:
    from convohub.hub import atomic_write_text

    payload = {"records": [asdict(r) for r in records],
               "failure": None if failure is None else {"system": failure.system, "step": failure.step,
                                                        "cause": str(failure.cause)}}
    atomic_write_text(path, json.dumps(payload, indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    """One system's process: ``python -m convohub.release_parallel SYSTEM OPTIONS_JSON RECORDS_JSON``."""
    from convohub.release import run_release
    from convohub.training.launch import exit_on_sigterm

    exit_on_sigterm()
    system, options_path, records_path = argv if argv is not None else sys.argv[1:]
    options = ReleaseOptions(**json.loads(Path(options_path).read_text(encoding="utf-8")))
    from convohub.llm import configured_backend

    llm = None if options.use_rules else configured_backend(options.llm_spec)
    records, failure = run_release(out=Path(options.out), profile=options.profile, only=[system],
                                   namespace=options.namespace, push=options.push,
                                   token=os.environ.get("HF_TOKEN"), seed=options.seed, force=options.force,
                                   llm=llm, use_rules=options.use_rules, max_train_steps=options.max_train_steps)
    _write_outcome(Path(records_path), records, failure)
    return 0 if failure is None else 1


def work_folder(root: Path) -> Path:
    """A fresh folder for one side-by-side run's options and records, under the release's work folder."""
    base = root / ".convohub-work" / "side-by-side"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="run-", dir=base))


if __name__ == "__main__":  # pragma: no cover - run as the child process
    sys.exit(main())
