"""One question at a time in a child process, under an OS memory limit and a hard time limit.

The engine's own budgets (:mod:`convohub.reqap.engine.interpreter`) stop the bombs they can see, but they count
Python objects, not the process: a C-level loop, an allocation the accounting misses or a component that
leaks can still take the machine down. ``reqap execute`` and ``reqap evaluate`` therefore run each
question in a :class:`Worker`: a ``spawn``-ed process (no inherited state, no fork of a process that may
hold threads) that builds its components once (``setup``) and then answers one task after another.
Before each task the worker sets ``RLIMIT_AS`` to what it holds at that moment plus
``WorkerLimits.memory_mb``, so the limit is headroom over its own baseline (imports, loaded models, the
persona's events) and does not depend on how heavy that baseline is; after the task the limit is lifted
again. A task that hits the limit gets ``MemoryError`` (the engine reports it as a failed run); a worker
that dies, or that does not answer within ``WorkerLimits.timeout_s``, is killed and the caller gets
:class:`WorkerLimitError` for that question; the next task starts a fresh worker.

Tasks and ``setup`` must be picklable (module-level functions, ``functools.partial`` of them). A spawned
child imports only what the task needs, so keep task modules free of heavy imports.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convohub.reqap.engine.errors import WorkerLimitError

__all__ = ["DEFAULT_MEMORY_MB", "Worker", "WorkerLimits", "address_space"]

#: Address space (MiB) a task may add to what its worker already holds.
DEFAULT_MEMORY_MB = 1024
#: Seconds a worker may take to start and run ``setup`` (loading trained models can be slow).
STARTUP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class WorkerLimits:
    """``memory_mb``: address space per task beyond the worker's baseline (0: no OS limit);
    ``timeout_s``: hard wall-clock seconds per task before the worker is killed (None: none)."""

    memory_mb: int = DEFAULT_MEMORY_MB
    timeout_s: float | None = None


def address_space() -> int | None:
    """Bytes of virtual address space this process holds (``VmSize``), or None where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _picklable(err: BaseException) -> BaseException:
    """``err`` itself when it survives pickling, else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")


def _serve(conn: Any, setup: Callable[[], Any] | None, memory_bytes: int) -> None:
    """The worker's loop: run ``setup`` once, then ``task(state, *args)`` per message until None/EOF."""
    try:
        state = setup() if setup is not None else None
    except BaseException as err:  # reported to the parent, which raises it for the caller
        conn.send(("setup_error", _picklable(err)))
        return
    conn.send(("ready", None))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task, args = message
        base = address_space() if memory_bytes else None
        if base is not None:
            limit = base + memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard),
                                                    hard))
        try:
            reply: tuple[str, Any] = ("ok", task(state, *args))
        except MemoryError:
            reply = ("memory", None)
        except BaseException as err:
            reply = ("error", _picklable(err))
        finally:
            if base is not None:
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        conn.send(reply)
        if reply[0] == "memory":
            return  # a process that hit its limit is not trusted with the next task


class Worker:
    """A child process that runs ``setup()`` once and then tasks one by one under :class:`WorkerLimits`.

    Use as a context manager (or call :meth:`close`). :meth:`run` restarts the worker when the previous
    one was killed or died, re-running ``setup``.
    """

    def __init__(self, setup: Callable[[], Any] | None = None, limits: WorkerLimits | None = None) -> None:
        self.setup = setup
        self.limits = limits or WorkerLimits()
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Any = None
        self.restarts = 0

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(child, self.setup, self.limits.memory_mb * 2**20),
                                        daemon=True, name="convohub-reqap-worker")
        process.start()
        child.close()
        self._process, self._conn = process, parent
        if not parent.poll(STARTUP_TIMEOUT_S):
            self._stop()
            raise WorkerLimitError(f"the worker did not start within {STARTUP_TIMEOUT_S:g} s")
        try:
            kind, payload = parent.recv()
        except (EOFError, OSError):
            code = self._stop()
            raise WorkerLimitError(f"the worker died while starting (exit code {code})") from None
        if kind == "setup_error":
            self._stop()
            raise payload

    def _stop(self) -> int | None:
        """Kill the worker (if alive) and forget it; returns its exit code."""
        process, self._process = self._process, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if process is None:
            return None
        if process.is_alive():
            process.kill()
        process.join(5)
        return process.exitcode

    def run(self, task: Callable[..., Any], *args: Any, timeout_s: float | None = None) -> Any:
        """``task(state, *args)`` in the worker; its exceptions are re-raised here.

        Raises :class:`WorkerLimitError` when the task hit the memory limit, ran past ``timeout_s``
        (default: the limits' ``timeout_s``) or the worker died; the worker is then replaced for the next task.
        """
        if self._process is None:
            self._start()
        timeout = timeout_s if timeout_s is not None else self.limits.timeout_s
        self._conn.send((task, args))
        if not self._conn.poll(timeout):
            self._stop()
            self.restarts += 1
            raise WorkerLimitError(f"the question ran past its hard time limit of {timeout:g} s and its worker "
                                   "was stopped; lower the tree's work or raise --worker-timeout")
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            code = self._stop()
            self.restarts += 1
            raise WorkerLimitError(f"the question's worker died (exit code {code}), most likely at its memory "
                                   f"limit of {self.limits.memory_mb} MiB over its baseline; raise "
                                   "--worker-memory if the question is legitimate") from None
        if kind == "memory":
            self._stop()
            self.restarts += 1
            raise WorkerLimitError(f"the question hit its worker's OS memory limit ({self.limits.memory_mb} MiB "
                                   "over the worker's baseline, RLIMIT_AS); raise --worker-memory if the "
                                   "question is legitimate")
        if kind == "error":
            raise payload
        return payload

    def close(self) -> None:
        """Ask the worker to finish and wait for it (killed if it does not)."""
        if self._conn is not None:
            with contextlib.suppress(OSError, ValueError):  # already gone: nothing to ask
                self._conn.send(None)
            if self._process is not None:
                self._process.join(5)
        self._stop()
