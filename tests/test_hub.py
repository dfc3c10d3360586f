"""The hub layer: dataset/model/Space folders that load like Hub repos, atomic and deterministic writes."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from convohub.hub import (
    DatasetCardInfo,
    HubTarget,
    ModelCardInfo,
    atomic_dir,
    folder_digest,
    merge_card_metadata,
    read_card,
    size_category,
    write_dataset,
    write_model,
    write_space,
)


def _configs() -> dict[str, dict[str, datasets.Dataset]]:
    a = datasets.Dataset.from_list([{"id": i, "text": f"row {i}", "tags": ["x"] * (i % 3)} for i in range(30)])
    b = datasets.Dataset.from_list([{"id": i, "score": i / 10} for i in range(5)])
    return {"main": {"train": a.select(range(20)), "test": a.select(range(20, 30))}, "scores": {"train": b}}


def _card() -> DatasetCardInfo:
    return DatasetCardInfo(pretty_name="Toy", license="cc-by-4.0", description="A toy dataset.",
                           citation="@misc{toy, title={Toy}}", tags=("convohub",))


def test_dataset_folder_loads_per_config(tmp_path: Path) -> None:
    target = HubTarget(root=tmp_path, namespace="org")
    folder = write_dataset(target, "toy", _configs(), _card())
    assert folder == tmp_path / "datasets" / "org" / "toy"
    main = datasets.load_dataset(str(folder.resolve()), "main")
    assert main["train"].num_rows == 20 and main["test"].num_rows == 10
    assert main["train"][3] == {"id": 3, "text": "row 3", "tags": []}
    scores = datasets.load_dataset(str(folder.resolve()), "scores", split="train")
    assert scores["score"][4] == pytest.approx(0.4)
    meta, body = read_card(folder / "README.md")
    assert [c["config_name"] for c in meta["configs"]] == ["main", "scores"]
    assert meta["configs"][0]["default"] is True
    assert meta["license"] == "cc-by-4.0" and meta["size_categories"] == ["n<1K"]
    assert "load_dataset(\"org/toy\", \"main\")" in body and "@misc{toy" in body


def test_dataset_rewrite_is_byte_identical(tmp_path: Path) -> None:
    target = HubTarget(root=tmp_path)
    first = folder_digest(write_dataset(target, "toy", _configs(), _card()))
    again = folder_digest(write_dataset(target, "toy", _configs(), _card()))
    assert first == again and any(p.endswith(".parquet") for p in first)


def test_failed_write_leaves_previous_folder(tmp_path: Path) -> None:
    target = HubTarget(root=tmp_path)
    folder = write_dataset(target, "toy", _configs(), _card())
    before = folder_digest(folder)
    with pytest.raises(ValueError, match="config 'empty': no splits"):
        write_dataset(target, "toy", {"main": _configs()["main"], "empty": {}}, _card())
    assert folder_digest(folder) == before
    assert [p.name for p in folder.parent.iterdir()] == ["toy"]  # no temp folder left behind


def test_atomic_dir_cleans_up_on_error(tmp_path: Path) -> None:
    dest = tmp_path / "x"
    with pytest.raises(RuntimeError), atomic_dir(dest) as tmp:
        (tmp / "f").write_text("half")
        raise RuntimeError("killed")
    assert not dest.exists() and list(tmp_path.iterdir()) == []


def test_model_folder_card_has_model_index(tmp_path: Path) -> None:
    """The card is huggingface_hub's ModelCard: ModelCardData YAML (EvalResults as the model-index), then the
    body as given; it loads back with ModelCard.load and its eval results round-trip."""
    from huggingface_hub import EvalResult, ModelCard

    src = tmp_path / "trained"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (src / "training_args.bin").write_bytes(b"x")
    card = ModelCardInfo(license="apache-2.0", pipeline_tag="text-generation", base_model="org/base",
                         datasets=("org/toy",), tags=("convohub",),
                         results=(EvalResult(task_type="text-generation", dataset_name="toy", dataset_type="org/toy",
                                             metric_type="perplexity", metric_value=12.3456789,
                                             dataset_split="test"),))
    folder = write_model(HubTarget(root=tmp_path / "hub", namespace="org"), "m", src, card, "# m\n\nA model.\n")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json"]
    meta, body = read_card(folder / "README.md")
    assert (meta["license"], meta["base_model"], meta["datasets"], meta["tags"]) == \
        ("apache-2.0", "org/base", ["org/toy"], ["convohub"])
    assert (meta["pipeline_tag"], meta["library_name"], meta["language"]) == ("text-generation", "transformers", ["en"])
    result = meta["model-index"][0]["results"][0]
    assert meta["model-index"][0]["name"] == "m"
    assert result["metrics"][0] == {"type": "perplexity", "value": 12.345679}
    assert result["dataset"] == {"name": "toy", "type": "org/toy", "split": "test"}
    assert body == "# m\n\nA model.\n"
    [loaded] = ModelCard.load(folder / "README.md").data.eval_results
    assert (loaded.metric_type, loaded.metric_value, loaded.dataset_split) == ("perplexity", 12.345679, "test")


def test_model_folder_refuses_untrained(tmp_path: Path) -> None:
    card = ModelCardInfo(license="mit", pipeline_tag="text-generation")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        write_model(HubTarget(root=tmp_path), "m", tmp_path, card, "# m")


def test_space_front_matter_is_merged(tmp_path: Path) -> None:
    src = tmp_path / "space"
    src.mkdir()
    (src / "README.md").write_text("---\ntitle: T\nsdk: gradio\napp_file: app.py\ntags: [a]\n---\n\n# T\n")
    (src / "app.py").write_text("demo = None\n")
    (src / "requirements.txt").write_text("convohub\n")
    folder = write_space(HubTarget(root=tmp_path / "hub"), "demo", src, extra_front_matter={"models": ["o/m"]})
    meta, body = read_card(folder / "README.md")
    assert meta == {"title": "T", "sdk": "gradio", "app_file": "app.py", "tags": ["a"], "models": ["o/m"]}
    assert body.startswith("# T")
    (src / "README.md").write_text("---\ntitle: T\n---\n")
    with pytest.raises(ValueError, match="lacks \\['sdk', 'app_file'\\]"):
        write_space(HubTarget(root=tmp_path / "hub"), "demo", src)


def test_merge_and_size_categories() -> None:
    assert merge_card_metadata({"a": {"x": 1}, "configs": [1]}, {"a": {"y": 2}}) == {
        "a": {"x": 1, "y": 2}, "configs": [1]}
    assert [size_category(n) for n in (0, 999, 1000, 50_000, 2_000_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "1M<n<10M"]


def test_push_uploads_the_written_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--push calls create_repo + upload_folder on the same folder (HfApi replaced by a recorder)."""
    calls = []

    class Recorder:
        def __init__(self, token=None):
            calls.append(("init", token))

        def create_repo(self, repo_id, **kw):
            calls.append(("create", repo_id, kw["repo_type"]))

        def upload_folder(self, **kw):
            calls.append(("upload", kw["repo_id"], Path(kw["folder_path"]).name, sorted(
                p.name for p in Path(kw["folder_path"]).iterdir())))
            return "url"

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", Recorder)
    target = HubTarget(root=tmp_path, namespace="me", push=True, token="hf_x")
    write_dataset(target, "toy", _configs(), _card())
    assert calls[0] == ("init", "hf_x") and calls[1] == ("create", "me/toy", "dataset")
    assert calls[2][:3] == ("upload", "me/toy", "toy") and "README.md" in calls[2][3]


def test_load_local_sees_a_rebuilt_folder(tmp_path: Path) -> None:
    """A folder rebuilt with same-size shards must load with its new rows (the datasets cache would not)."""
    from convohub.hub import load_local

    target = HubTarget(root=tmp_path)
    rows = [{"id": i, "text": f"row {i}"} for i in range(4)]
    write_dataset(target, "toy", {"main": {"train": datasets.Dataset.from_list(rows)}}, _card())
    folder = target.repo_dir("datasets", "toy")
    assert load_local(folder, "main", "train")["text"][0] == "row 0"
    rows[0]["text"] = "row 9"
    write_dataset(target, "toy", {"main": {"train": datasets.Dataset.from_list(rows)}}, _card())
    assert load_local(folder, "main", "train")["text"][0] == "row 9"
    assert set(load_local(folder, "main")) == {"train"}
    with pytest.raises(KeyError, match="no config 'nope'"):
        load_local(folder, "nope")


def test_plain_load_dataset_sees_a_rebuild_with_other_rows(tmp_path: Path) -> None:
    """Users load with plain ``load_dataset``: its cache of a local folder is keyed on the card's metadata,
    so the card carries each split's size (``dataset_info``) and a rebuild with other rows loads fresh."""
    target = HubTarget(root=tmp_path / "hub")
    folder = target.repo_dir("datasets", "toy")
    cache = tmp_path / "cache"
    for n in (4, 6):
        rows = [{"id": i, "text": f"row {i} of {n}"} for i in range(n)]
        write_dataset(target, "toy", {"main": {"train": datasets.Dataset.from_list(rows)}}, _card())
        loaded = datasets.load_dataset(str(folder), "main", split="train", cache_dir=str(cache))
        assert loaded.num_rows == n and loaded["text"][0] == f"row 0 of {n}"
    meta, _ = read_card(folder / "README.md")
    assert meta["dataset_info"] == [{"config_name": "main", "splits": [
        {"name": "train", "num_bytes": meta["dataset_info"][0]["dataset_size"], "num_examples": 6}],
        "download_size": (folder / "data" / "main" / "train-00000-of-00001.parquet").stat().st_size,
        "dataset_size": meta["dataset_info"][0]["dataset_size"]}]
