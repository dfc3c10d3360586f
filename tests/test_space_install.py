"""Issue 16's must-show, the way a machine that has never seen convohub meets an exported Space: the folder
the release exports, installed into a fresh venv from its own requirements.txt alone, answers gradio_client
calls. A metric Space (its convohub modules inlined) also loads with ``evaluate.load(folder)``; a system
Space (the convohub package and its dependencies carried in the folder) serves its data and its model. pip
installs from the same index and cache as the project's own install, so the system Space's torch stack is
unpacked, not downloaded."""

from __future__ import annotations

import os
import subprocess
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _spaces import free_port

from convohub.cli import main
from convohub.metrics.ndcg import ndcg_at_k

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def test_exported_metric_space_installs_and_runs_from_its_folder_alone(tmp_path: Path) -> None:
    assert main(["release", "--only", "metrics", "--out", str(tmp_path / "release")]) == 0
    folder = tmp_path / "release" / "spaces" / "convohub" / "ndcg"
    assert not (folder / "convohub").exists()
    python, clean = _fresh_venv(tmp_path, folder)
    scored = subprocess.run(
        [python, "-c", "import evaluate, sys; m = evaluate.load(sys.argv[1]); "
                       "print(m.compute(predictions=[[0, 1]], references=[[1.0, 0.0]], k=[1])['ndcg@1'])",
         str(folder)], cwd=tmp_path, env={**clean, "HF_MODULES_CACHE": str(tmp_path / "modules")},
        capture_output=True, text=True, timeout=300)
    assert scored.returncode == 0 and scored.stdout.strip() == "1.0", scored.stderr[-2000:]

    env = {**clean, "HF_MODULES_CACHE": str(tmp_path / "modules")}
    with _app(python, folder, env, tmp_path / "app.log") as client:
        answer = client.predict("[[0, 2, 1]]", "[[0.5, 1.0, 0.0]]", '{"k": [1, 3]}', "default", api_name="/score")
        scores = answer[0] if isinstance(answer, tuple | list) else answer
        expected = ndcg_at_k([[0, 2, 1]], [[0.5, 1.0, 0.0]], k=[1, 3])
        assert scores == pytest.approx(expected) and 0 < expected["ndcg@1"] < 1


def _fresh_venv(root: Path, folder: Path) -> tuple[str, dict[str, str]]:
    """A venv under ``root`` with ``folder``'s requirements.txt installed and nothing else; its python and a
    clean environment (no PYTHONPATH or VIRTUAL_ENV of the test's own interpreter)."""
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    clean = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    # --no-compile: pip byte-compiles every installed module (torch's thousands) by default, more than half of
    # this install's time on 2 cores; the app compiles only what it imports.
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile", "-r", "requirements.txt"], cwd=folder,
                   env=clean, check=True, timeout=1200)
    probe = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('convohub'))"],
                           cwd=root, env=clean, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "None"  # the venv has no convohub: only the folder's own code can serve
    return python, clean


@contextmanager
def _app(python: str, folder: Path, env: dict[str, str], log: Path) -> Iterator[object]:
    """The folder's app.py served on a free loopback port, and a gradio_client connected to it."""
    from gradio_client import Client

    port = free_port()
    server = subprocess.Popen([python, "app.py"], cwd=folder, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                              env={**env, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port)})
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False)
                break
            except Exception as exc:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the app did not start: {log.read_text()[-2000:]}") from exc
                time.sleep(1)
        yield client
    finally:
        server.terminate()
        server.wait(timeout=30)


def _greedy(model_dir: Path, prompt: str, max_new_tokens: int) -> str:
    """The chat LM's greedy reply to one user prompt, computed here: what the Space's /generate must return."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def test_exported_system_space_installs_and_runs_from_its_folder_alone(tmp_path: Path) -> None:
    from convohub.hub import HubTarget
    from convohub.registry import load_systems
    from convohub.release import ReleaseContext
    from convohub.tiny import build_tiny_causal_lm

    target = HubTarget(tmp_path / "release")
    ctx = ReleaseContext(profile="tiny", target=target, work_dir=tmp_path / "work")
    space_step = next(s for s in load_systems()["corpus"].steps if s.kind == "space")
    folder = Path(space_step.run(ctx)["space_dir"])  # the release's own export step
    assert (folder / "convohub").is_dir()  # the package travels with the Space
    assert main(["datasets", "build", "wildchat-sample", "--out", str(tmp_path / "data")]) == 0
    dataset = tmp_path / "data" / "datasets" / "convohub" / "wildchat-sample"
    model = build_tiny_causal_lm(tmp_path / "model", seed=0)  # a stand-in: the Space's plumbing is under test

    python, clean = _fresh_venv(tmp_path, folder)
    env = {**clean, "CONVOHUB_DATASET": str(dataset), "CONVOHUB_MODEL": str(model), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "datasets-cache")}
    with _app(python, folder, env, tmp_path / "app.log") as client:
        rows = client.predict("(all)", "(all)", api_name="/browse")[0]
        data = rows["data"] if isinstance(rows, dict) else rows
        assert data and all(len(row) == 5 for row in data)
        opened = client.predict(str(data[0][0]), api_name="/show")
        assert opened and str(data[0][4])[:20] in str(opened)
        scrubbed = client.predict("Mail me at ana.lopez@example.com", api_name="/scrub")[0]
        assert "ana.lopez@example.com" not in scrubbed and scrubbed.startswith("Mail me at ")
        generated = client.predict("Hello", 8, api_name="/generate")
        assert generated == _greedy(model, "Hello", 8)  # the model CONVOHUB_MODEL names, decoded as the app says
