"""Hub layer: every artifact convohub releases is a folder laid out exactly like a Hub repository.

Datasets, models and Spaces are written into a local *hub root* (``<root>/datasets/<ns>/<Name>``,
``<root>/models/<ns>/<Name>``, ``<root>/spaces/<ns>/<Name>``) so that the offline release, the tests and
users all see the same bytes; ``--push --namespace ORG`` makes the Hub repository hold that same folder
(:func:`push_folder`: changed files added, files the folder no longer has deleted, in one commit, or none
when nothing changed). Dataset and model cards are huggingface_hub ``DatasetCard``/``ModelCard`` objects.
Writes are atomic (a temp sibling folder, then a rename) and deterministic (same inputs and seed ->
byte-identical Parquet and cards), so a re-run of the release changes nothing and a re-push commits nothing.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from convohub.space_export import export_convohub

if TYPE_CHECKING:  # pragma: no cover - typing only
    import datasets

REPO_KINDS = ("datasets", "models", "spaces")
MAX_ROWS_PER_SHARD = 100_000
DEFAULT_NAMESPACE = "convohub"
logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- targets
@dataclass(frozen=True)
class HubTarget:
    """Where artifacts go: a local hub root, and optionally the real Hub under ``namespace``."""

    root: Path
    namespace: str = DEFAULT_NAMESPACE
    push: bool = False
    token: str | None = None
    private: bool = False

    def repo_id(self, name: str) -> str:
        return f"{self.namespace}/{name}"

    def repo_dir(self, kind: str, name: str) -> Path:
        if kind not in REPO_KINDS:
            raise ValueError(f"unknown repo kind {kind!r}; expected one of {REPO_KINDS}")
        return Path(self.root) / kind / self.namespace / name


@contextmanager
def atomic_dir(dest: Path) -> Iterator[Path]:
    """Yield a temp folder next to ``dest``; on success it replaces ``dest`` in one rename.

    On any exception the temp folder is removed and ``dest`` is left exactly as it was, so a failed or
    killed build never leaves a half-written repository behind.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: Path, text: str) -> None:
    """Write a text file atomically (temp file in the same folder, then ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------- cards
def render_card(metadata: Mapping[str, Any], body: str) -> str:
    """A Hub card: YAML front matter (key order kept, so output is stable) and a Markdown body."""
    front = yaml.safe_dump(dict(metadata), sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{front}---\n\n{body.strip()}\n"


def read_card(path: Path) -> tuple[dict[str, Any], str]:
    """Split a card into (front matter dict, body); a card without front matter gives ``({}, text)``."""
    text = Path(path).read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---", 4)
    if end < 0:
        raise ValueError(f"{path}: front matter opened with '---' but never closed")
    meta = yaml.safe_load(text[4:end]) or {}
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: front matter must be a YAML mapping, got {type(meta).__name__}")
    return meta, text[end + 4 :].lstrip("\n")


def merge_card_metadata(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Merge card YAML instead of overwriting it: a card written after the data must keep ``configs:``."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_card_metadata(merged[key], value)
        else:
            merged[key] = value
    return merged


def size_category(n_rows: int) -> str:
    """The Hub's ``size_categories`` bucket for a row count."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
              (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")]
    for bound, label in bounds:
        if n_rows < bound:
            return label
    return "n>1T" if n_rows > 10**12 else "100M<n<1B"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; floats are shown with 4 significant decimals."""

    def cell(v: Any) -> str:
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- datasets
@dataclass
class DatasetCardInfo:
    """What a dataset card says beyond the data itself: provenance, licence, citation, prose."""

    pretty_name: str
    license: str
    description: str
    citation: str = ""
    language: Sequence[str] = ("en",)
    task_categories: Sequence[str] = ()
    tags: Sequence[str] = ()
    sections: Mapping[str, str] = field(default_factory=dict)  # heading -> Markdown


def _shard_paths(config: str, split: str, n_rows: int) -> list[str]:
    n = max(1, -(-n_rows // MAX_ROWS_PER_SHARD))
    return [f"data/{config}/{split}-{i:05d}-of-{n:05d}.parquet" for i in range(n)]


def write_dataset(
    target: HubTarget,
    name: str,
    configs: Mapping[str, Mapping[str, datasets.Dataset]],
    card: DatasetCardInfo,
    *,
    default_config: str | None = None,
) -> Path:
    """Write a dataset repository folder (Parquet shards + README card with YAML ``configs:``).

    ``configs`` maps config name -> split name -> ``datasets.Dataset``. The folder loads with
    ``datasets.load_dataset(str(folder), config)`` and is pushed as one commit when the target pushes.
    """
    if not configs:
        raise ValueError(f"dataset {name!r}: no configs to write")
    dest = target.repo_dir("datasets", name)
    total_rows = 0
    config_yaml: list[dict[str, Any]] = []
    info_yaml: list[dict[str, Any]] = []
    stats_rows: list[list[Any]] = []
    with atomic_dir(dest) as tmp:
        for config, splits in configs.items():
            if not splits:
                raise ValueError(f"dataset {name!r}, config {config!r}: no splits")
            files, split_info, download_size = [], [], 0
            for split, ds in splits.items():
                paths = _shard_paths(config, split, len(ds))
                for i, rel in enumerate(paths):
                    shard = ds.shard(num_shards=len(paths), index=i, contiguous=True) if len(paths) > 1 else ds
                    out = tmp / rel
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shard.to_parquet(str(out))
                    download_size += out.stat().st_size
                glob = f"data/{config}/{split}-*.parquet"
                files.append({"split": split, "path": glob})
                split_info.append({"name": split, "num_bytes": int(ds.data.nbytes), "num_examples": len(ds)})
                total_rows += len(ds)
                stats_rows.append([config, split, len(ds), ", ".join(ds.column_names)])
            entry: dict[str, Any] = {"config_name": config, "data_files": files}
            if config == (default_config or next(iter(configs))) and len(configs) > 1:
                entry["default"] = True
            config_yaml.append(entry)
            info_yaml.append({"config_name": config, "splits": split_info, "download_size": download_size,
                              "dataset_size": sum(x["num_bytes"] for x in split_info)})
        body = _dataset_card_body(target, name, card, stats_rows, list(configs))
        readme = dataset_card(card, total_rows, config_yaml, info_yaml, body)
        (tmp / "README.md").write_text(str(readme), encoding="utf-8")
    if target.push:
        push_folder(dest, target, "dataset", name)
    return dest


#: The order of a dataset card's YAML keys: what a reader looks for first, the loader's ``configs:`` last.
DATASET_CARD_KEYS = ("license", "pretty_name", "language", "size_categories", "task_categories", "tags",
                     "configs", "dataset_info")


def dataset_card(
    card: DatasetCardInfo,
    n_rows: int,
    configs: Sequence[Mapping[str, Any]],
    dataset_info: Sequence[Mapping[str, Any]],
    body: str,
) -> Any:
    """The ``huggingface_hub.DatasetCard`` of a dataset repo: ``DatasetCardData`` as YAML, then ``body``.

    Building the card with huggingface_hub (rather than dumping our own YAML) keeps the metadata in the
    shape the Hub validates and lets ``DatasetCard.load`` read it back. ``configs`` (one entry per config,
    with the ``data_files`` globs) is what ``load_dataset`` reads; ``dataset_info`` carries each split's size,
    as ``push_to_hub`` writes it, and ``datasets`` also keys its cache of a local folder on this metadata
    (not on the Parquet content), so a rebuild with other rows gets a new cache entry instead of the
    previous build's rows. Keys are written in :data:`DATASET_CARD_KEYS` order and empty optional fields are
    left out, so the same inputs always give the same bytes.
    """
    from huggingface_hub import DatasetCard, DatasetCardData

    data = DatasetCardData(
        license=card.license, pretty_name=card.pretty_name, language=list(card.language),
        size_categories=[size_category(n_rows)], task_categories=list(card.task_categories) or None,
        tags=list(card.tags) or None, configs=[dict(c) for c in configs],
        dataset_info=[dict(i) for i in dataset_info])
    yaml_block = data.to_yaml(original_order=list(DATASET_CARD_KEYS))
    return DatasetCard(f"---\n{yaml_block}\n---\n\n{body.strip()}\n")


def _dataset_card_body(
    target: HubTarget, name: str, card: DatasetCardInfo, stats: list[list[Any]], configs: list[str]
) -> str:
    repo = target.repo_id(name)
    first = configs[0]
    parts = [
        f"# {card.pretty_name}",
        card.description.strip(),
        "## Loading",
        "```python\nfrom datasets import load_dataset\n\n"
        f'ds = load_dataset("{repo}", "{first}")  # or a local copy: load_dataset("/abs/path/{name}", "{first}")\n```',
        "## Configs and splits",
        markdown_table(["config", "split", "rows", "columns"], stats),
    ]
    for heading, text in card.sections.items():
        parts += [f"## {heading}", text.strip()]
    parts += ["## Licence", f"`{card.license}`. See the provenance section for the terms of the sources."]
    if card.citation:
        parts += ["## Citation", f"```bibtex\n{card.citation.strip()}\n```"]
    return "\n\n".join(parts)


def load_local(folder: Path | str, config: str, split: str | None = None) -> Any:
    """Load a locally written dataset repo folder, bypassing the ``datasets`` cache.

    ``load_dataset(folder, config)`` keys its cache on the folder name and the card's metadata, not on the
    Parquet content: the card's ``dataset_info`` (split sizes) tells most rebuilds apart, but a rebuild
    with the same sizes could still come back with the old rows. Convohub's own
    readers (training, evaluation, scoring) read the Parquet shards listed in the card's ``configs:``
    directly into Arrow instead. Returns a ``Dataset`` for one split, else a ``DatasetDict``.
    """
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = data_files(folder, config)
    if split is not None:
        if split not in files:
            raise KeyError(f"{folder}: config {config!r} has no split {split!r}; splits: {sorted(files)}")
        files = {split: files[split]}
    splits = {name: datasets.Dataset(pa.concat_tables([pq.read_table(f) for f in paths]))
              for name, paths in files.items()}
    return splits[split] if split is not None else datasets.DatasetDict(splits)


def data_files(folder: Path | str, config: str) -> dict[str, list[Path]]:
    """split -> the Parquet shards of ``config`` in a local dataset folder, as its card's ``configs:`` list
    them (sorted); a config or split without files is an error naming the folder."""
    folder = Path(folder)
    meta, _ = read_card(folder / "README.md")
    entries = {c["config_name"]: c for c in meta.get("configs", [])}
    if config not in entries:
        raise KeyError(f"{folder}: no config {config!r}; configs in its card: {sorted(entries)}")
    out = {}
    for item in entries[config]["data_files"]:
        files = sorted(folder.glob(item["path"]))
        if not files:
            raise FileNotFoundError(f"{folder}: config {config!r} split {item['split']!r} has no file {item['path']}")
        out[item["split"]] = files
    return out


def load_split(dataset: Path | str, config: str, split: str | None = None) -> Any:
    """One config and split of a dataset wherever it lives: a folder convohub wrote (its Parquet shards, read
    by :func:`load_local`, never the ``datasets`` cache), a single Parquet file (the config is then moot), or a
    Hub dataset id. ``split=None`` takes the config's first split, so a config with one split needs no name."""
    path = Path(dataset)
    if path.is_dir():
        if split is not None:
            return load_local(path, config, split)
        splits = load_local(path, config)
        return splits[next(iter(splits))]
    import datasets

    if path.is_file():
        return datasets.Dataset.from_parquet(str(path))
    if split is not None:
        return datasets.load_dataset(str(dataset), config, split=split)
    splits = datasets.load_dataset(str(dataset), config)
    return splits[next(iter(splits))]


# --------------------------------------------------------------------------------------------- models
#: Files a trainer leaves in its output folder that do not belong in a model repo (logs with run times
#: would also break byte-identical re-runs; the card carries the evaluation instead).
TRAINING_LEFTOVERS = frozenset({"README.md", "training_args.bin", "training_args.json", "trainer_state.json",
                                "eval_results.json", "all_results.json", "train_results.json", "runs"})


@dataclass(frozen=True)
class ModelCardInfo:
    """A model card's metadata (its YAML): licence, base model, data, tags and the measured results.

    ``results`` are huggingface_hub ``EvalResult`` entries (measured by convohub's own evaluation); they become
    the card's ``model-index``. The card's Markdown comes from a template (:mod:`convohub.model_spec`).
    """

    license: str
    pipeline_tag: str
    base_model: str | None = None
    datasets: Sequence[str] = ()
    tags: Sequence[str] = ()
    library_name: str = "transformers"
    language: Sequence[str] = ("en",)
    results: Sequence[Any] = ()  # huggingface_hub.EvalResult


def model_card(name: str, card: ModelCardInfo, body: str) -> Any:
    """The ``huggingface_hub.ModelCard`` of a model repo: ``ModelCardData`` (with the ``EvalResult`` entries
    as ``model-index``, values rounded to 6 decimals) as YAML front matter, then ``body``."""
    from dataclasses import replace

    from huggingface_hub import ModelCard, ModelCardData

    results = [replace(r, metric_value=round(float(r.metric_value), 6)) for r in card.results]
    data = ModelCardData(
        license=card.license, language=list(card.language), library_name=card.library_name,
        pipeline_tag=card.pipeline_tag, base_model=card.base_model, datasets=list(card.datasets) or None,
        tags=list(card.tags) or None, model_name=name if results else None, eval_results=results or None)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body.strip()}\n")


def write_model(
    target: HubTarget,
    name: str,
    save: Callable[[Path], None] | Path,
    card: ModelCardInfo,
    body: str,
) -> Path:
    """Write a model repository folder: ``save_pretrained`` output (or a copied folder) + its card
    (:func:`model_card`: ``card`` as the YAML, ``body`` as the Markdown).

    ``save`` is either a callable that saves into the folder it is given (``model.save_pretrained``)
    or the path of a trained model folder to copy (its own README is replaced by the card).
    """
    readme = str(model_card(name, card, body))
    dest = target.repo_dir("models", name)
    with atomic_dir(dest) as tmp:
        if callable(save):
            save(tmp)
        else:
            src = Path(save)
            if not (src / "config.json").exists() and not (src / "modules.json").exists():
                raise FileNotFoundError(f"model {name!r}: {src} holds no config.json; was it trained?")
            for item in sorted(src.iterdir()):
                if item.name in TRAINING_LEFTOVERS or item.name.startswith("checkpoint-"):
                    continue
                dst = tmp / item.name
                shutil.copytree(item, dst) if item.is_dir() else shutil.copy2(item, dst)
        (tmp / "README.md").write_text(readme, encoding="utf-8")
    if target.push:
        push_folder(dest, target, "model", name)
    return dest


def resolve_folder(spec: str | None, repo_type: str) -> Path | None:
    """A local folder, or a Hub repo id downloaded with ``snapshot_download`` (None stays None): how a Space
    reads "dataset/model id or local folder" from its environment."""
    if not spec:
        return None
    path = Path(spec).expanduser()
    if path.exists():
        return path
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(spec, repo_type=repo_type))


def local_models(root: Path | str, namespace: str, repos: Mapping[str, str]) -> tuple[dict[str, Path], list[str]]:
    """``key -> <root>/models/<namespace>/<repo>`` for ``repos`` (key -> repository name), and the folders
    among them that hold no saved model (no ``config.json``): how a CLI or a Space finds a local release."""
    folders = {key: Path(root) / "models" / namespace / repo for key, repo in repos.items()}
    return folders, [str(f) for f in folders.values() if not (f / "config.json").is_file()]


def download_models(namespace: str, repos: Mapping[str, str]) -> dict[str, Path]:
    """``key -> local snapshot of <namespace>/<repo>`` (downloaded once, then served from the Hub cache); the
    first failure propagates, so the caller can say what it tried."""
    from huggingface_hub import snapshot_download

    return {key: Path(snapshot_download(f"{namespace}/{repo}", repo_type="model")) for key, repo in repos.items()}


# --------------------------------------------------------------------------------------------- spaces
SPACE_REQUIRED_KEYS = ("title", "sdk", "app_file")


def write_space(target: HubTarget, name: str, source: Path, *, extra_front_matter: Mapping[str, Any] | None = None,
                extra_files: Mapping[str, str] | None = None) -> Path:
    """Export a Gradio Space folder (app + README front matter + requirements) from ``spaces/<system>``.

    The README front matter is merged (never overwritten) with ``extra_front_matter`` (e.g. the ``models:``
    and ``datasets:`` the release just produced, under the target namespace).
    """
    source = Path(source)
    meta, body = read_card(source / "README.md")
    missing = [k for k in SPACE_REQUIRED_KEYS if k not in meta]
    if missing:
        raise ValueError(f"{source / 'README.md'}: Space front matter lacks {missing}; add them")
    if not (source / meta["app_file"]).exists():
        raise FileNotFoundError(f"{source}: app_file {meta['app_file']!r} does not exist")
    if not (source / "requirements.txt").exists():
        raise FileNotFoundError(f"{source}: requirements.txt is missing")
    meta = merge_card_metadata(meta, extra_front_matter or {})
    dest = target.repo_dir("spaces", name)
    with atomic_dir(dest) as tmp:
        for item in sorted(source.iterdir()):
            if item.name in {"README.md", "__pycache__"} or item.name.startswith("."):
                continue
            dst = tmp / item.name
            shutil.copytree(item, dst, ignore=shutil.ignore_patterns("__pycache__")) if item.is_dir() \
                else shutil.copy2(item, dst)
        for rel, text in (extra_files or {}).items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text, encoding="utf-8")
        export_convohub(tmp, meta["app_file"])
        (tmp / "README.md").write_text(render_card(meta, body), encoding="utf-8")
    if target.push:
        push_folder(dest, target, "space", name)
    return dest


# --------------------------------------------------------------------------------------------- push
#: Remote files a push never deletes even when the local folder lacks them: the Hub writes
#: ``.gitattributes`` (the LFS rules) when it creates a repository, and convohub's folders do not carry one.
KEEP_REMOTE = frozenset({".gitattributes"})


@dataclass(frozen=True)
class PushResult:
    """What one :func:`push_folder` did: the files it added or replaced, the ones it deleted, and the commit.

    ``commit_url`` is ``None`` when the remote repository already held exactly the local files: then no
    commit was made and :attr:`unchanged` is true.
    """

    repo_id: str
    repo_type: str
    added: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    commit_url: str | None = None

    @property
    def unchanged(self) -> bool:
        return not self.added and not self.deleted

    def __str__(self) -> str:
        if self.unchanged:
            return f"{self.repo_type} {self.repo_id}: unchanged, no commit"
        return (f"{self.repo_type} {self.repo_id}: {len(self.added)} file(s) added or changed, "
                f"{len(self.deleted)} deleted in {self.commit_url}")


def _local_files(folder: Path) -> dict[str, Path]:
    """Every file of a written repo folder by its path in the repo (POSIX separators), skipping what
    ``upload_folder`` skips too: a ``.git`` folder and huggingface_hub's ``.cache/huggingface`` upload state."""
    out = {}
    for path in sorted(Path(folder).rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or ".git" in rel.parts or rel.parts[:2] == (".cache", "huggingface"):
            continue
        out[rel.as_posix()] = path
    return out


def _hash_file(path: Path, algorithm: str) -> str:
    """``sha256`` of a file's bytes, or its git blob id (``sha1`` of ``b"blob <size>\\0"`` + bytes), read in
    1 MiB chunks so that model weights never sit in memory whole."""
    import hashlib

    digest = hashlib.new(algorithm)
    if algorithm == "sha1":
        digest.update(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def same_content(path: Path, remote: Any) -> bool:
    """Whether a local file holds exactly the bytes of a remote ``huggingface_hub.RepoFile``.

    The Hub's file listing names an LFS (or Xet) file by the sha256 of its content and a regular file by its
    git blob id, so the local side is hashed the same way; the sizes are compared first, which settles most
    changed files without reading them. This is the comparison ``huggingface_hub``'s own ``verify`` makes.
    """
    path = Path(path)
    if path.stat().st_size != remote.size:
        return False
    if remote.lfs is not None:
        return _hash_file(path, "sha256") == remote.lfs.sha256.lower()
    return _hash_file(path, "sha1") == remote.blob_id.lower()


def push_folder(folder: Path, target: HubTarget, repo_type: str, name: str, *, api: Any = None) -> PushResult:
    """Make the Hub repository hold exactly the files of a written repo folder, in at most one commit.

    ``upload_folder`` only adds, so a re-push with fewer Parquet shards would leave the old ones behind for
    the card's ``data/<config>/<split>-*`` globs to pick up. Instead the remote tree is listed and compared
    with the folder (:func:`same_content`): files that are new or differ are uploaded, remote files the folder
    no longer has are deleted (except :data:`KEEP_REMOTE`), all in one ``create_commit``; when nothing differs
    no commit is made and the result says ``unchanged``. The commit names the listed revision as its parent,
    so if someone else pushed in between, the Hub refuses it instead of deleting files this push never saw.

    ``api`` is an ``HfApi`` (or an object with the same ``create_repo``, ``repo_info``, ``list_repo_tree`` and
    ``create_commit`` methods, as the tests use); by default one is made with ``target.token``.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete
    from huggingface_hub.hf_api import RepoFile

    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=target.token)
    folder = Path(folder)
    repo_id = target.repo_id(name)
    kwargs: dict[str, Any] = {"space_sdk": "gradio"} if repo_type == "space" else {}
    api.create_repo(repo_id, repo_type=repo_type, private=target.private, exist_ok=True, **kwargs)
    head = api.repo_info(repo_id, repo_type=repo_type).sha
    remote = {entry.path: entry
              for entry in api.list_repo_tree(repo_id, repo_type=repo_type, revision=head, recursive=True)
              if isinstance(entry, RepoFile)}
    local = _local_files(folder)
    added = tuple(rel for rel, path in local.items() if rel not in remote or not same_content(path, remote[rel]))
    deleted = tuple(sorted(rel for rel in remote if rel not in local and rel not in KEEP_REMOTE))
    if not added and not deleted:
        result = PushResult(repo_id, repo_type)
        logger.info("%s", result)
        return result
    operations: list[Any] = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(local[rel])) for rel in added]
    operations += [CommitOperationDelete(path_in_repo=rel) for rel in deleted]
    info = api.create_commit(
        repo_id, operations, repo_type=repo_type, parent_commit=head,
        commit_message=f"convohub release: {name}",
        commit_description=f"{len(added)} file(s) added or changed, {len(deleted)} deleted.")
    result = PushResult(repo_id, repo_type, added, deleted, str(getattr(info, "commit_url", info)))
    logger.info("%s", result)
    return result


def folder_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (relative path -> hex), to check re-runs are byte-identical."""
    import hashlib

    out = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def dump_json(obj: Any) -> str:
    """Stable JSON for files that must be byte-identical across runs."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def read_json(path: Path | str) -> Any:
    """Read back what :func:`dump_json` wrote (results handed from an evaluate step to a card step)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
