"""Start `transformers serve` on loopback for a local model folder: the OpenAI-compatible endpoint that
tests, benchmarks and offline users point :class:`~convohub.llm.EndpointBackend` at.

``transformers serve MODEL`` (transformers 5.x) pins the server to that one model, preloads it before the
port opens, and wants requests to name it exactly as given (here: the folder path). ``/health`` is the
readiness probe (``/v1/models`` scans the Hub cache folder and fails when there is none).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SERVING_DEPS = ("fastapi", "uvicorn", "openai", "pydantic")
READY_DEADLINE_S = 180.0


class ServerError(RuntimeError):
    """The server exited or did not become ready; the message carries the end of its log."""


def missing_serving_deps() -> list[str]:
    """The packages `transformers serve` needs that are not installed (empty when it can run)."""
    return [m for m in SERVING_DEPS if importlib.util.find_spec(m) is None]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, n: int = 40) -> str:
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return "\n".join(lines[-n:])


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, deadline_s: float = READY_DEADLINE_S) -> None:
    """Poll ``url/health`` until it answers 200; raise ServerError if the process dies or time runs out."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"`transformers serve` exited with {proc.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise ServerError(f"`transformers serve` not ready after {deadline_s:.0f}s:\n{_tail(log)}")


@contextlib.contextmanager
def serve(model: str | os.PathLike[str], log: Path, *, port: int | None = None, device: str = "cpu",
          dtype: str = "float32") -> Iterator[tuple[str, str]]:
    """Run `transformers serve` pinned to ``model``; yield (base URL ending in /v1, model name to request).

    The server's output goes to ``log``; it is terminated (then killed) on exit.
    """
    missing = missing_serving_deps()
    if missing:
        raise ServerError(f"`transformers serve` needs {missing}: pip install 'transformers[serving]'")
    port = port or free_port()
    name = str(model)
    cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", name, "--host", "127.0.0.1",
           "--port", str(port), "--device", device, "--dtype", dtype, "--log-level", "warning"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "127.0.0.1"}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc, log)
        yield f"{url}/v1", name
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
