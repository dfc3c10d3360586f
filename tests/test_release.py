"""The main job as a newcomer runs it: `convohub release` offline, then load what it wrote the way users do
(load_dataset, from_pretrained, the Space through gradio_client), re-run it, and make it fail."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import datasets
import pytest

from convohub.cli import main
from convohub.corpus import chat_lm
from convohub.hub import folder_digest, read_card

pytestmark = [pytest.mark.slow, pytest.mark.heavy]
NS = "convohub"
#: The release as the test runs it: the tiny recipe cut to one optimiser step (~20 s on 2 cores; the recipe's 10
#: take ~3 min); the fixture and the byte-identical re-run each train once.
SMOKE = ["--max-train-steps", "1"]


def _published(root: Path) -> dict[str, str]:
    return {k: v for k, v in folder_digest(root).items() if not k.startswith(".convohub-work")}


#: held-out conversations the chat LM's perplexities are measured on (the recipe's 32 take ~30 s a run)
EVAL_CONVERSATIONS = 8


@pytest.fixture(scope="module", autouse=True)
def _short_evaluation() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(chat_lm.EVAL_CONVERSATIONS_ENV, str(EVAL_CONVERSATIONS))
        yield


@pytest.fixture(scope="module")
def release_root(tmp_path_factory: pytest.TempPathFactory, _short_evaluation: None) -> Path:
    root = tmp_path_factory.mktemp("hub")
    assert main(["release", "--only", "corpus", "--out", str(root), *SMOKE]) == 0
    return root


def test_dataset_loads_by_config_with_disjoint_users(release_root: Path) -> None:
    folder = release_root / "datasets" / NS / "wildchat-sample"
    ds = datasets.load_dataset(str(folder.resolve()), "conversations")
    assert set(ds) == {"train", "validation", "test"}
    users = {split: set(ds[split]["user_id"]) for split in ds}
    assert not users["train"] & users["test"] and not users["train"] & users["validation"]
    assert ds["train"].num_rows > 300
    text = " ".join(t["content"] for row in ds["train"] for t in row["turns"])
    assert "@example.com" not in text and "[EMAIL]" in text  # PII scrubbed before publishing
    meta, body = read_card(folder / "README.md")
    assert meta["configs"][0]["config_name"] == "conversations" and meta["license"] == "cc-by-4.0"
    assert "generate_wildchat_sample" in body and "@inproceedings{zhao2024wildchat" in body


def test_model_loads_and_card_numbers_are_the_measured_ones(release_root: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = release_root / "models" / NS / "wildchat-chat-lm-tiny"
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    enc = tok.apply_chat_template([{"role": "user", "content": "How do I sort a list in Python?"}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**enc, max_new_tokens=8, do_sample=False)
    assert out.shape[1] > enc["input_ids"].shape[1]
    measured = json.loads((release_root / ".convohub-work" / "corpus" / "chat_lm_eval.json").read_text())
    meta, body = read_card(folder / "README.md")
    metric = meta["model-index"][0]["results"][0]["metrics"][0]
    assert metric["type"] == "perplexity" and metric["value"] == measured["perplexity_trained"]
    assert measured["perplexity_trained"] < measured["perplexity_base"]  # fine-tuning beat SmolLM2 itself
    assert measured["conversations"] == EVAL_CONVERSATIONS  # the setting reached the evaluation step
    assert meta["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and model.config.vocab_size == 49152
    assert f"| base (before fine-tuning) | {measured['perplexity_base']} |" in body
    assert not (folder / "trainer_state.json").exists()
    assert "| optimiser steps | 1 |" in body  # --max-train-steps reached the script; the card says what ran


def test_card_usage_snippet_runs(release_root: Path) -> None:
    folder = release_root / "models" / NS / "wildchat-chat-lm-tiny"
    _, body = read_card(folder / "README.md")
    snippet = re.search(r"```python\n(.*?)```", body, re.S).group(1).replace(f"{NS}/wildchat-chat-lm-tiny",
                                                                              str(folder))
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_space_export_and_app(release_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    space = release_root / "spaces" / NS / "wildchat-sample-explorer"
    meta, _ = read_card(space / "README.md")
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert meta["datasets"] == [f"{NS}/wildchat-sample"] and meta["models"] == [f"{NS}/wildchat-chat-lm-tiny"]
    requirements = (space / "requirements.txt").read_text().splitlines()  # buildable on the Hub:
    assert "convohub" not in {r.split("=")[0].split(">")[0] for r in requirements}  # no unpublished pin
    assert any(r.startswith("datasets") for r in requirements)  # convohub's own dependencies instead
    assert (space / "convohub" / "__init__.py").is_file()  # the package travels with the Space

    monkeypatch.setenv("CONVOHUB_DATASET", str((release_root / "datasets" / NS / "wildchat-sample").resolve()))
    monkeypatch.setenv("CONVOHUB_MODEL", str((release_root / "models" / NS / "wildchat-chat-lm-tiny").resolve()))
    from gradio_client import Client

    from convohub.cli import load_script

    app = load_script(space / "app.py")
    app.demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        client = Client(app.demo.local_url, verbose=False)
        scrubbed, counts, found = client.predict("write to bob@example.org", api_name="/scrub")
        assert [(part["token"], part["class_or_confidence"]) for part in found] == [
            ("write to ", None), ("bob@example.org", "EMAIL")]
        assert scrubbed == "write to [EMAIL]" and counts == {"EMAIL": 1}
        table, by_country, _ = client.predict("(all)", "(all)", api_name="/browse")
        assert len(table["data"]) > 0
        assert sum(count for _, count in by_country["data"]) >= len(table["data"])  # the chart counts them all
        first_id = table["data"][0][0]
        chat = client.predict(first_id, api_name="/show")
        assert chat and chat[0]["role"] == "user"
        assert isinstance(client.predict("Hello there", 8, api_name="/generate"), str)
    finally:
        app.demo.close()


def test_rerun_resumes_and_changes_nothing(release_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _published(release_root)
    assert main(["release", "--only", "corpus", "--out", str(release_root), *SMOKE]) == 0
    assert capsys.readouterr().out.count("resumed") >= 5
    assert _published(release_root) == before


def test_fresh_run_is_byte_identical(release_root: Path, tmp_path: Path) -> None:
    assert main(["release", "--only", "corpus", "--out", str(tmp_path), "--force", *SMOKE]) == 0
    card = f"models/{NS}/wildchat-chat-lm-tiny/README.md"  # states the measured training time

    def timeless(root: Path) -> str:
        return re.sub(r"\| training time \|[^\n]*", "", (root / card).read_text())

    assert timeless(tmp_path) == timeless(release_root)
    assert {k: v for k, v in _published(tmp_path).items() if k != card} == \
        {k: v for k, v in _published(release_root).items() if k != card}


def test_failed_step_is_named_and_exit_is_nonzero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from convohub import registry
    from convohub.registry import Step, System

    def boom(ctx: object) -> dict[str, str]:
        raise RuntimeError("disk full")

    broken = System(name="broken", title="Broken", steps=(Step("build", "ok", lambda ctx: {}),
                                                          Step("train", "explodes", boom)))
    monkeypatch.setattr(registry, "load_systems", lambda: {"broken": broken})
    import convohub.release as release_mod

    monkeypatch.setattr(release_mod, "load_systems", lambda: {"broken": broken})
    assert main(["release", "--out", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "FAILED at broken/train:explodes: disk full" in captured.err
    assert re.search(r"broken\s+train:explodes\s+failed", captured.out)


def test_a_changed_recipe_reruns_its_step_and_the_later_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A step that names its input files (a training step: recipe and script) resumes only while they are
    unchanged; once one changes, that step and every later one run again."""
    import convohub.release as release_mod
    from convohub.registry import Step, System

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text("learning_rate: 2.0e-4\n")
    calls: list[str] = []

    def fit(ctx: object) -> dict[str, Path]:
        calls.append("fit")
        folder = tmp_path / "fit"
        folder.mkdir(exist_ok=True)
        return {"fit_dir": folder}

    def card(ctx: object) -> dict[str, str]:
        calls.append("card")
        return {}

    system = System(name="toy", title="Toy", steps=(
        Step("build", "data", lambda ctx: calls.append("data") or {}),
        Step("train", "fit", fit, inputs=lambda ctx: [recipe]),
        Step("card", "card", card)))
    monkeypatch.setattr(release_mod, "load_systems", lambda: {"toy": system})
    out = tmp_path / "release"
    for _ in range(2):
        assert main(["release", "--out", str(out)]) == 0
    assert calls == ["data", "fit", "card"]  # the second run resumed every step
    recipe.write_text("learning_rate: 5.0e-5\n")
    assert main(["release", "--out", str(out)]) == 0
    assert calls == ["data", "fit", "card", "fit", "card"]
    assert "train:fit: runs again: its input files changed since the last run" in capsys.readouterr().out
    recipe.unlink()
    assert main(["release", "--out", str(out)]) == 1
    assert f"reads {recipe}, which does not exist" in capsys.readouterr().err


def test_a_step_runs_again_when_a_setting_it_names_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A build step naming an environment variable among its settings (a source folder) resumes only while the
    variable keeps its value and the folder's files keep their names, sizes and modification times."""
    import os

    import convohub.release as release_mod
    from convohub.registry import Step, System

    calls: list[str] = []
    system = System(name="toy", title="Toy", steps=(
        Step("build", "data", lambda ctx: calls.append("data") or {}, settings=("TOY_SOURCE",)),))
    monkeypatch.setattr(release_mod, "load_systems", lambda: {"toy": system})
    monkeypatch.delenv("TOY_SOURCE", raising=False)
    out = tmp_path / "release"
    source = tmp_path / "source"
    (source / "part").mkdir(parents=True)
    table = source / "part" / "events.csv"
    table.write_text("a,b\n")

    def release() -> int:
        assert main(["release", "--out", str(out)]) == 0
        return len(calls)

    assert release() == 1 and release() == 1  # resumed
    monkeypatch.setenv("TOY_SOURCE", str(source))
    assert release() == 2
    assert "build:data: runs again: its input files or the settings TOY_SOURCE changed" in capsys.readouterr().out
    assert release() == 2
    stat = table.stat()
    os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert release() == 3
    (source / "part" / "more.csv").write_text("")
    assert release() == 4
    monkeypatch.delenv("TOY_SOURCE")
    assert release() == 5 and release() == 5


def test_build_from_shipped_source_sample(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[1] / "dataset_scripts" / "wildchat_sample" / "sample"
    assert main(["datasets", "build", "wildchat-sample", "--source", str(sample), "--out", str(tmp_path)]) == 0
    folder = tmp_path / "datasets" / NS / "wildchat-sample"
    ds = datasets.load_dataset(str(folder), "conversations")
    assert sum(d.num_rows for d in ds.values()) > 20
    meta, body = read_card(folder / "README.md")
    assert meta["license"] == "odc-by" and "Normalised from `sample`" in body and str(tmp_path) not in body


def test_metric_spaces_are_exported_and_loadable(tmp_path: Path) -> None:
    import evaluate

    assert main(["release", "--only", "metrics", "--out", str(tmp_path)]) == 0
    spaces = tmp_path / "spaces" / NS
    names = {p.name for p in spaces.iterdir()}
    assert {"ndcg", "hit_at_1", "tree_reconstruction", "user_simulation", "sq_quality"} <= names
    meta, _ = read_card(spaces / "ndcg" / "README.md")
    assert meta["sdk"] == "gradio" and "convohub" in meta["tags"] and "evaluate" in meta["tags"]
    ndcg = evaluate.load(str(spaces / "ndcg"))
    assert ndcg.compute(predictions=[[0, 1]], references=[[1.0, 0.0]], k=[1])["ndcg@1"] == 1.0


def test_release_options_reach_every_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub import registry
    from convohub.registry import Step, System

    seen: list[object] = []
    probe = System(name="probe", title="Probe", steps=(Step("train", "look", lambda ctx: seen.append(ctx) or {}),))
    monkeypatch.setattr(registry, "load_systems", lambda: {"probe": probe})
    import convohub.release as release_mod

    monkeypatch.setattr(release_mod, "load_systems", lambda: {"probe": probe})
    assert main(["release", "--out", str(tmp_path), "--llm", "rules", "--max-train-steps", "2"]) == 0
    ctx = seen[0]
    assert ctx.use_rules and ctx.llm is None and ctx.train_overrides() == ("--max_steps", "2")
    progress = json.loads((tmp_path / ".convohub-work" / "probe" / "progress.json").read_text())
    assert progress["fingerprint"]["rules"] is True and progress["fingerprint"]["max_train_steps"] == 2
    with pytest.raises(ValueError, match="max_train_steps must be >= 1"):
        release_mod.ReleaseContext(profile="tiny", target=ctx.target, work_dir=tmp_path, max_train_steps=0)


def test_a_step_that_runs_again_runs_every_later_step_again(tmp_path: Path) -> None:
    """Resume keeps finished steps only up to the first step that runs: a card after a re-run evaluation
    must be written again from the new results."""
    from convohub.hub import HubTarget
    from convohub.registry import Step, System
    from convohub.release import ReleaseContext, run_system

    runs: list[str] = []

    def step(name: str) -> Step:
        def run(ctx: ReleaseContext) -> dict[str, Path]:
            runs.append(name)
            path = ctx.scratch("toy") / f"{name}.txt"
            path.write_text(name)
            return {f"{name}_path": path}

        return Step("evaluate", name, run)

    system = System(name="toy", title="Toy", steps=(step("a"), step("b"), step("c")))

    def context() -> ReleaseContext:
        return ReleaseContext(profile="tiny", target=HubTarget(tmp_path / "hub"), work_dir=tmp_path / "work")

    run_system(system, context())
    assert runs == ["a", "b", "c"]
    assert [r.status for r in run_system(system, context())] == ["resumed"] * 3 and runs == ["a", "b", "c"]
    (tmp_path / "work" / "toy" / "b.txt").unlink()  # b's output is gone: b runs again, and so does c
    records = run_system(system, context())
    assert [r.status for r in records] == ["resumed", "done", "done"] and runs[3:] == ["b", "c"]
