"""Run a training script the way its recipe's docstring says: ``accelerate launch`` in a subprocess.

The release and ``convohub train`` never import a training script: each run is
``python -m accelerate.commands.launch --config_file training/accelerate/<config> SCRIPT --config RECIPE
[--flag value ...]``, so the same recipe runs on one CPU (``cpu.yaml``, the tiny profile) and on every
GPU of a node (``multi_gpu_ddp.yaml``, the paper profile) and the scripts save on the main process only
(``trainer.save_model``). The launch config comes from, in order: the ``accelerate_config`` argument,
``$CONVOHUB_ACCELERATE_CONFIG`` (a file name under ``training/accelerate/`` or a path), the profile's
default below.

A failed run raises :class:`TrainingFailed` naming the script, the recipe and the command, with the last
lines of its output, so a release step's error says what to re-run by hand. A run whose caller is stopped
(Ctrl-C, or SIGTERM through the ``convohub`` command) is stopped with it: the launcher and its workers run in
a process group of their own, which is ended as a whole, so no orphaned trainer goes on writing into the work
folder that a resumed release trains into again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from convohub.paths import repo_path

ENV_CONFIG = "CONVOHUB_ACCELERATE_CONFIG"
#: The launch config of each profile when nothing else is chosen.
PROFILE_CONFIGS = {"tiny": "cpu.yaml", "paper": "multi_gpu_ddp.yaml"}


class TrainingFailed(RuntimeError):
    """A training subprocess exited non-zero."""


def accelerate_config(profile: str, override: str | os.PathLike[str] | None = None) -> Path:
    """The launch config file for ``profile`` (see the module docstring for the order of choice)."""
    chosen = override or os.environ.get(ENV_CONFIG) or PROFILE_CONFIGS.get(profile)
    if chosen is None:
        raise ValueError(f"no accelerate config for profile {profile!r}; known: {sorted(PROFILE_CONFIGS)}")
    path = Path(chosen)
    if not path.is_file():
        path = repo_path("training", "accelerate", str(chosen))
    if not path.is_file():
        raise FileNotFoundError(f"accelerate config {chosen!r} not found (looked in training/accelerate/); "
                                f"set {ENV_CONFIG} to a file there or a path")
    return path


def launch_command(script: Path, recipe: Path, args: Sequence[str] = (), *, profile: str = "tiny",
                   config: str | os.PathLike[str] | None = None) -> list[str]:
    """The ``accelerate launch`` command line for one run (also what errors print to re-run it)."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
            str(accelerate_config(profile, config)), str(script), "--config", str(recipe), *map(str, args)]


def stop_process_group(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """End ``proc`` (started with ``start_new_session=True``) and every process of its group: SIGTERM, then
    SIGKILL for whatever is still there after ``grace`` seconds. accelerate's launcher does not pass a signal
    on to its workers, so the group is signalled, not the launcher alone."""
    if not hasattr(os, "killpg"):  # no process groups (Windows): the direct child only
        proc.kill()
        proc.wait()
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()  # reap the launcher, so that a finished group is seen as gone
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def exit_on_sigterm() -> None:
    """Make SIGTERM (``kill``, a scheduler stopping a job, ``timeout``, a side-by-side release stopping its
    systems) end this process the way Ctrl-C does, through the ``finally`` blocks: a training subprocess is
    stopped with its caller (:func:`run_script`) instead of training on, orphaned."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def run_script(script: Path, recipe: Path, args: Sequence[str] = (), *, profile: str = "tiny",
               config: str | os.PathLike[str] | None = None, log_file: Path | None = None) -> None:
    """Launch ``script`` with ``recipe`` and CLI overrides ``args``; stream its output; raise on failure.

    The output is echoed (indented) and kept in ``log_file`` when given.
    """
    command = launch_command(script, recipe, args, profile=profile, config=config)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ACCELERATE_DISABLE_RICH": "1"}
    tail: deque[str] = deque(maxlen=30)
    handle = log_file.open("w", encoding="utf-8") if log_file is not None else None
    try:
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env, bufsize=1, start_new_session=True) as proc:
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    tail.append(line.rstrip())
                    if handle is not None:
                        handle.write(line)
                    print(f"      {line.rstrip()}", flush=True)
                code = proc.wait()
            except BaseException:
                stop_process_group(proc)
                raise
    finally:
        if handle is not None:
            handle.close()
    if code != 0:
        raise TrainingFailed(
            f"{script.name} with {recipe} exited with code {code}. Re-run by hand: {' '.join(command)}\n"
            "Last output lines:\n" + "\n".join(tail))
