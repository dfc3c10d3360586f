"""Issue 16's must-show for a metric Space, the way a machine that has never seen convohub meets it: the
folder the release exports, installed into a fresh venv from its own requirements.txt alone, loads with
``evaluate.load(folder)`` and its app answers a gradio_client call. (A system Space needs torch and the
rest of convohub's stack: the same check by hand took 12 min 43 s of installing here, too slow for CI.)"""

from __future__ import annotations

import os
import subprocess
import time
import venv
from pathlib import Path

import pytest
from _spaces import free_port

from convohub.cli import main
from convohub.metrics.ndcg import ndcg_at_k

pytestmark = pytest.mark.slow


def test_exported_metric_space_installs_and_runs_from_its_folder_alone(tmp_path: Path) -> None:
    assert main(["release", "--only", "metrics", "--out", str(tmp_path / "release")]) == 0
    folder = tmp_path / "release" / "spaces" / "convohub" / "ndcg"
    assert not (folder / "convohub").exists()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    clean = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    subprocess.run([python, "-m", "pip", "install", "-q", "-r", "requirements.txt"], cwd=folder, env=clean,
                   check=True, timeout=900)
    probe = subprocess.run([python, "-c", "import importlib.util as u; print(u.find_spec('convohub'))"],
                           cwd=tmp_path, env=clean, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "None"  # the fresh venv has no convohub: the folder must carry what it needs
    scored = subprocess.run(
        [python, "-c", "import evaluate, sys; m = evaluate.load(sys.argv[1]); "
                       "print(m.compute(predictions=[[0, 1]], references=[[1.0, 0.0]], k=[1])['ndcg@1'])",
         str(folder)], cwd=tmp_path, env={**clean, "HF_MODULES_CACHE": str(tmp_path / "modules")},
        capture_output=True, text=True, timeout=300)
    assert scored.returncode == 0 and scored.stdout.strip() == "1.0", scored.stderr[-2000:]

    port = free_port()
    log = tmp_path / "app.log"
    server = subprocess.Popen([python, "app.py"], cwd=folder, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                              env={**clean, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
                                   "HF_MODULES_CACHE": str(tmp_path / "modules")})
    try:
        from gradio_client import Client

        deadline = time.monotonic() + 180
        while True:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False)
                break
            except Exception as exc:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the app did not start: {log.read_text()[-2000:]}") from exc
                time.sleep(1)
        answer = client.predict("[[0, 2, 1]]", "[[0.5, 1.0, 0.0]]", '{"k": [1, 3]}', "default", api_name="/score")
        scores = answer[0] if isinstance(answer, tuple | list) else answer
        expected = ndcg_at_k([[0, 2, 1]], [[0.5, 1.0, 0.0]], k=[1, 3])
        assert scores == pytest.approx(expected) and 0 < expected["ndcg@1"] < 1
    finally:
        server.terminate()
        server.wait(timeout=30)
