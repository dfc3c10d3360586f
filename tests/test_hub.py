"""The hub layer: dataset/model/Space folders that load like Hub repos, atomic and deterministic writes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import datasets
import pytest
from _fake_hub import FakeHub

from convohub.cli import main
from convohub.hub import (
    DatasetCardInfo,
    HubTarget,
    ModelCardInfo,
    atomic_dir,
    folder_digest,
    merge_card_metadata,
    push_folder,
    read_card,
    same_content,
    size_category,
    write_dataset,
    write_model,
    write_space,
)
from convohub.paths import repo_root

REPO = repo_root()


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


def test_dataset_card_is_a_huggingface_hub_dataset_card(tmp_path: Path) -> None:
    """The README is a DatasetCard: it loads back with DatasetCard.load (and re-serialises to the same bytes),
    its YAML says what convohub's cards always said, and plain load_dataset still reads every config."""
    from huggingface_hub import DatasetCard

    folder = write_dataset(HubTarget(root=tmp_path, namespace="org"), "toy", _configs(), _card())
    text = (folder / "README.md").read_text(encoding="utf-8")
    card = DatasetCard.load(folder / "README.md")
    assert str(card) == text
    assert (card.data.license, card.data.pretty_name, card.data.language) == ("cc-by-4.0", "Toy", ["en"])
    assert card.data.configs == [
        {"config_name": "main", "data_files": [{"split": "train", "path": "data/main/train-*.parquet"},
                                               {"split": "test", "path": "data/main/test-*.parquet"}],
         "default": True},
        {"config_name": "scores", "data_files": [{"split": "train", "path": "data/scores/train-*.parquet"}]}]
    meta, body = read_card(folder / "README.md")
    assert list(meta) == ["license", "pretty_name", "language", "size_categories", "tags", "configs", "dataset_info"]
    assert meta["tags"] == ["convohub"] and [i["config_name"] for i in meta["dataset_info"]] == ["main", "scores"]
    assert body.startswith("# Toy\n\nA toy dataset.") and "@misc{toy" in body
    for config, rows in (("main", {"train": 20, "test": 10}), ("scores", {"train": 5})):
        loaded = datasets.load_dataset(str(folder.resolve()), config, cache_dir=str(tmp_path / "cache"))
        assert {split: ds.num_rows for split, ds in loaded.items()} == rows


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


def test_space_that_imports_convohub_carries_it_and_no_unpublished_pin(tmp_path: Path) -> None:
    """Vendoring follows the code: an app importing convohub gets the package and its dependencies; one that
    does not gets neither; a ``convohub`` requirement line (no index serves it) never reaches the export."""
    src = tmp_path / "space"
    src.mkdir()
    (src / "README.md").write_text("---\ntitle: T\nsdk: gradio\napp_file: app.py\n---\n\n# T\n")
    (src / "requirements.txt").write_text("# a comment\ngradio==6.31.0\nconvohub==0.1.0\n")
    (src / "app.py").write_text("from convohub.metrics import ndcg_at_k\ndemo = None\n")
    folder = write_space(HubTarget(root=tmp_path / "hub"), "uses", src)
    lines = (folder / "requirements.txt").read_text().splitlines()
    assert (folder / "convohub" / "__init__.py").is_file()
    assert not [line for line in lines if line.startswith("convohub")]
    assert lines[:2] == ["# a comment", "gradio==6.31.0"] and any(line.startswith("datasets") for line in lines)
    (src / "app.py").write_text("import json\ndemo = None\n")
    (src / "requirements.txt").write_text("gradio==6.31.0\n")
    plain = write_space(HubTarget(root=tmp_path / "hub"), "plain", src)
    assert not (plain / "convohub").exists() and (plain / "requirements.txt").read_text() == "gradio==6.31.0\n"


def test_space_using_standalone_convohub_modules_gets_copies_not_the_package(tmp_path: Path) -> None:
    """A metric Space imports only convohub modules that import nothing else of convohub: those files are
    copied beside it and the imports rewritten (relative in the ``evaluate`` module, so ``evaluate`` copies
    the file into its cache), and its requirements stay its own."""
    src = tmp_path / "metric"
    src.mkdir()
    (src / "README.md").write_text("---\ntitle: M\nsdk: gradio\napp_file: app.py\n---\n\n# M\n")
    (src / "requirements.txt").write_text("# convohub comment\nevaluate>=0.4.5,<0.5\nconvohub==0.1.0\n")
    (src / "app.py").write_text("from convohub.metrics._space import build_metric_demo\ndemo = build_metric_demo\n")
    (src / "m.py").write_text("import evaluate\n\nfrom convohub.metrics.ndcg import (\n    ndcg_at_k,\n"
                              "    recall_at_k as recall,\n)\n\nX = 1\n")
    folder = write_space(HubTarget(root=tmp_path / "hub"), "m", src)
    assert not (folder / "convohub").exists()
    assert {p.name for p in folder.glob("convohub_*.py")} == {"convohub_metrics_ndcg.py", "convohub_metrics__space.py",
                                                              "convohub_charts.py"}  # _space's own import
    assert "from convohub_charts import" in (folder / "convohub_metrics__space.py").read_text()
    assert (folder / "m.py").read_text() == ("import evaluate\n\nfrom .convohub_metrics_ndcg import ndcg_at_k, "
                                             "recall_at_k as recall\n\nX = 1\n")
    assert (folder / "app.py").read_text().startswith("from convohub_metrics__space import build_metric_demo\n")
    lines = (folder / "requirements.txt").read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == ["evaluate>=0.4.5,<0.5"]


def test_exported_metric_space_loads_with_evaluate_where_convohub_is_not_installed(tmp_path: Path) -> None:
    """issue 16's must-show for metric Spaces, without the fresh venv (measured at 12 min to install
    here): a child interpreter that cannot import convohub at all loads the exported folder with
    ``evaluate.load`` and scores."""
    import subprocess
    import sys

    from convohub.metrics.system import SYSTEM

    assert main(["release", "--only", SYSTEM.name, "--out", str(tmp_path)]) == 0
    folder = tmp_path / "spaces" / "convohub" / "ndcg"
    script = (
        "import importlib.abc, sys\n"
        "class NoConvohub(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'convohub' or name.startswith('convohub.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoConvohub())\n"
        "import evaluate\n"
        f"m = evaluate.load({str(folder)!r})\n"
        "print(m.compute(predictions=[[0, 1]], references=[[1.0, 0.0]], k=[1])['ndcg@1'])\n"
        f"sys.path.insert(0, {str(folder)!r})\n"
        "import app\n"  # the Gradio app builds from the copied modules too
        "print([n for n in sys.modules if n.split('.')[0] == 'convohub'], type(app.demo).__name__)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300, env={**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules")})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["1.0", "[] Interface"]


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in (REPO / "spaces").glob("*/requirements.txt"))
                         + sorted(f"../evaluation/{p.parent.name}" for p in (REPO / "evaluation").glob("*/requirements.txt")))
def test_space_sources_pin_no_unpublished_convohub(folder: str) -> None:
    lines = (REPO / "spaces" / folder / "requirements.txt").read_text().splitlines()
    assert not [line for line in lines if line.strip().lower().startswith("convohub")], folder


def test_merge_and_size_categories() -> None:
    assert merge_card_metadata({"a": {"x": 1}, "configs": [1]}, {"a": {"y": 2}}) == {
        "a": {"x": 1, "y": 2}, "configs": [1]}
    assert [size_category(n) for n in (0, 999, 1000, 50_000, 2_000_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "1M<n<10M"]


def _remote(hub: FakeHub, repo_id: str) -> dict[str, str]:
    """The fake remote's files as path -> sha256, to compare with ``folder_digest`` of the pushed folder."""
    return {path: hashlib.sha256(content).hexdigest() for path, content in hub.repos[repo_id].items()
            if path != ".gitattributes"}


def _rows(n: int, tag: str = "") -> dict[str, dict[str, datasets.Dataset]]:
    return {"main": {"train": datasets.Dataset.from_list([{"id": i, "text": f"row {i}{tag}"} for i in range(n)])}}


def test_push_goes_through_hfapi_with_the_targets_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--push on write_dataset: HfApi is built with the target's token, the repo created, the folder committed."""
    import huggingface_hub

    made: list[FakeHub] = []
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda token=None: made.append(FakeHub(token)) or made[-1])
    folder = write_dataset(HubTarget(root=tmp_path, namespace="me", push=True, token="hf_x"), "toy", _configs(),
                           _card())
    [hub] = made
    assert hub.token == "hf_x"
    assert [c[0] for c in hub.calls] == ["create_repo", "repo_info", "list_repo_tree", "create_commit"]
    assert hub.calls[0][1:] == ("me/toy", {"repo_type": "dataset", "private": False})
    assert _remote(hub, "me/toy") == folder_digest(folder)


def test_first_push_adds_every_file(tmp_path: Path) -> None:
    hub = FakeHub()
    target = HubTarget(root=tmp_path, namespace="me")
    folder = write_dataset(target, "toy", _configs(), _card())
    result = push_folder(folder, target, "dataset", "toy", api=hub)
    [commit] = hub.commits()
    assert sorted(commit["add"]) == sorted(folder_digest(folder)) and commit["delete"] == []
    assert result.added == tuple(sorted(folder_digest(folder))) and not result.unchanged
    assert result.commit_url and result.commit_url.startswith("https://huggingface.co/me/toy/commit/")
    assert ".gitattributes" in hub.repos["me/toy"]  # made by the Hub, never deleted


def test_repush_with_fewer_shards_deletes_the_stale_ones_in_the_same_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """20 rows in shards of 8 make three Parquet files; a rebuild with 10 rows makes two with other names.
    The second push uploads the new ones and deletes all three old ones in one commit, so the card's
    ``data/main/train-*`` glob sees only the new rows."""
    import convohub.hub

    monkeypatch.setattr(convohub.hub, "MAX_ROWS_PER_SHARD", 8)
    hub = FakeHub()
    target = HubTarget(root=tmp_path, namespace="me")
    push_folder(write_dataset(target, "toy", _rows(20), _card()), target, "dataset", "toy", api=hub)
    old = sorted(p for p in hub.repos["me/toy"] if p.startswith("data/"))
    assert old == [f"data/main/train-0000{i}-of-00003.parquet" for i in range(3)]
    folder = write_dataset(target, "toy", _rows(10), _card())
    result = push_folder(folder, target, "dataset", "toy", api=hub)
    second = hub.commits()[1]
    assert sorted(second["delete"]) == old == sorted(result.deleted)
    assert sorted(second["add"]) == ["README.md", *(f"data/main/train-0000{i}-of-00002.parquet" for i in range(2))]
    assert len(hub.commits()) == 2 and _remote(hub, "me/toy") == folder_digest(folder)
    # a file pushed earlier by hand, outside data/, goes as well; .gitattributes stays
    hub.repos["me/toy"]["notes.txt"] = b"left over"
    hub._new_head("me/toy")
    assert push_folder(folder, target, "dataset", "toy", api=hub).deleted == ("notes.txt",)
    assert hub.commits()[2] == {"add": [], "delete": ["notes.txt"]} and ".gitattributes" in hub.repos["me/toy"]


def test_unchanged_folder_makes_no_commit(tmp_path: Path) -> None:
    hub = FakeHub()
    target = HubTarget(root=tmp_path, namespace="me")
    folder = write_dataset(target, "toy", _configs(), _card())
    push_folder(folder, target, "dataset", "toy", api=hub)
    rebuilt = write_dataset(target, "toy", _configs(), _card())  # byte-identical rebuild
    result = push_folder(rebuilt, target, "dataset", "toy", api=hub)
    assert result.unchanged and result.commit_url is None and (result.added, result.deleted) == ((), ())
    assert len(hub.commits()) == 1 and hub.calls[-1][0] == "list_repo_tree"
    assert str(result) == "dataset me/toy: unchanged, no commit"


@pytest.mark.parametrize("changed", ["README.md", "data/x.parquet"], ids=["regular-file", "lfs-file"])
def test_changed_file_is_the_only_one_uploaded(tmp_path: Path, changed: str) -> None:
    """A regular file is compared by git blob id, an LFS file by sha256; a same-size edit is still seen."""
    folder = tmp_path / "repo"
    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_bytes(b"---\nlicense: mit\n---\n\n# x\n")
    (folder / "data" / "x.parquet").write_bytes(b"PAR1 first version PAR1")
    (folder / "app.py").write_bytes(b"demo = None\n")
    hub = FakeHub()
    target = HubTarget(root=tmp_path / "hub", namespace="me")
    push_folder(folder, target, "space", "x", api=hub)
    assert hub.calls[0][2]["space_sdk"] == "gradio"
    content = (folder / changed).read_bytes()
    (folder / changed).write_bytes(content[:-2] + b"!\n")  # same size, other bytes
    result = push_folder(folder, target, "space", "x", api=hub)
    assert hub.commits()[1] == {"add": [changed], "delete": []} and result.added == (changed,)
    assert _remote(hub, "me/x") == folder_digest(folder)


def test_push_commits_on_the_revision_it_listed(tmp_path: Path) -> None:
    """The commit names the listed head as its parent: if the repo moved in between, the Hub refuses it."""
    hub = FakeHub()
    hub.seed("me/x", {"old.txt": b"old"})
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "new.txt").write_text("new")
    real_list = hub.list_repo_tree

    def list_then_someone_pushes(repo_id: str, **kw: object) -> list:
        entries = real_list(repo_id, **kw)
        hub.repos[repo_id]["theirs.txt"] = b"pushed meanwhile"
        hub._new_head(repo_id)
        return entries

    hub.list_repo_tree = list_then_someone_pushes  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="is not the head"):
        push_folder(tmp_path / "repo", HubTarget(root=tmp_path, namespace="me"), "model", "x", api=hub)
    assert "theirs.txt" in hub.repos["me/x"]


def test_same_content_matches_the_hubs_ids(tmp_path: Path) -> None:
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils.sha import git_hash

    path = tmp_path / "f"
    path.write_bytes(b"Hello, World!")
    blob = "b45ef6fec89518d314f546fd6c3025367b721684"  # git hash-object of these bytes
    assert git_hash(b"Hello, World!") == blob
    assert same_content(path, RepoFile(path="f", size=13, oid=blob))
    assert not same_content(path, RepoFile(path="f", size=13, oid="0" * 40))
    sha = hashlib.sha256(b"Hello, World!").hexdigest()
    lfs = {"size": 13, "oid": sha, "pointerSize": 134}
    assert same_content(path, RepoFile(path="f", size=13, oid="1" * 40, lfs=lfs))
    assert not same_content(path, RepoFile(path="f", size=12, oid=blob))


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


def test_load_split_reads_a_folder_a_parquet_file_or_asks_the_hub(tmp_path: Path, monkeypatch) -> None:
    """Every reader of a training or evaluation split goes through ``load_split``: a built folder (its first
    split when none is named), a Parquet file, else a Hub id through ``datasets.load_dataset``."""
    from convohub.hub import load_split

    target = HubTarget(root=tmp_path)
    splits = {"validation": datasets.Dataset.from_list([{"x": 1}]), "test": datasets.Dataset.from_list([{"x": 2}])}
    write_dataset(target, "toy", {"main": splits}, _card())
    folder = target.repo_dir("datasets", "toy")
    assert load_split(folder, "main", "test")["x"] == [2]
    assert load_split(folder, "main")["x"] == [1]  # the first split the card lists
    with pytest.raises(KeyError, match="no split 'train'"):
        load_split(folder, "main", "train")
    shard = next((folder / "data" / "main").glob("test-*.parquet"))
    assert load_split(shard, "ignored")["x"] == [2]
    asked = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: asked.append((a, k)) or "rows")
    assert load_split("org/name", "main", "test") == "rows" and asked == [(("org/name", "main"), {"split": "test"})]


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


def test_vendored_space_requires_only_what_its_code_reaches(tmp_path: Path) -> None:
    """A Space that carries the package lists the convohub dependencies its code can import (followed through
    lazy, relative and string module paths), plus the runtime companions (torch under transformers, gguf for
    the SmolLM2 conversion), and not the training stack it never reaches."""
    from convohub.space_export import reached_distributions

    src = tmp_path / "space"
    src.mkdir()
    (src / "README.md").write_text("---\ntitle: T\nsdk: gradio\napp_file: app.py\n---\n\n# T\n")
    (src / "requirements.txt").write_text("gradio==6.31.0\n")
    (src / "app.py").write_text("import convohub\n\ndef load():\n    from convohub.models import smollm2_path\n"
                                "    return smollm2_path()\n")
    reached = reached_distributions(src)
    assert {"gguf", "torch", "transformers"} <= reached  # companions of convohub.models / transformers
    assert not {"trl", "peft", "bitsandbytes", "duckdb"} & reached
    folder = write_space(HubTarget(root=tmp_path / "hub"), "t", src)
    names = {line.split(">")[0].split("=")[0].split("<")[0] for line in
             (folder / "requirements.txt").read_text().splitlines()}
    assert {"gradio", "gguf", "torch", "transformers"} <= names and not {"trl", "peft", "bitsandbytes"} & names
    (src / "app.py").write_text("MODULES = ('convohub.reqap.engine_missing', 'convohub.metrics.ndcg:ndcg_at_k')\n"
                                "from convohub.paths import repo_root\n")
    assert "scikit-learn" in reached_distributions(src)  # a module path written as a string is followed


@pytest.mark.parametrize("space", ["corpus", "reqap", "wildfeedback"])
def test_system_space_exports_skip_the_unused_training_stack(space: str, tmp_path: Path) -> None:
    from convohub.space_export import reached_distributions

    reached = reached_distributions(Path(__file__).resolve().parents[1] / "spaces" / space)
    assert {"gradio", "transformers", "torch"} <= reached
    assert not {"peft", "bitsandbytes"} & reached
