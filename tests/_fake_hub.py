"""An in-memory stand-in for the Hub, for push tests that must not touch the network.

Imported as ``from _fake_hub import FakeHub``. It answers the four ``HfApi`` calls ``convohub.hub.push_folder``
makes (``create_repo``, ``repo_info``, ``list_repo_tree``, ``create_commit``) and records them. The tree it serves is
made of huggingface_hub's own ``RepoFile``/``RepoFolder`` objects, with the ids the real Hub gives: the sha256 of
the content for LFS files and the git blob id for regular files, so the code under test reads the same attributes
it reads from the Hub. Commits apply their operations, so a second push sees what the first one left.
"""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any

from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.hf_api import RepoFile, RepoFolder

#: Suffixes the Hub's default ``.gitattributes`` stores in LFS (a subset: enough for convohub's folders).
LFS_SUFFIXES = frozenset({".parquet", ".safetensors", ".bin"})


def git_blob_id(content: bytes) -> str:
    """What ``git hash-object`` prints for a file with these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class FakeHub:
    """One fake repository per repo id; ``calls`` lists ``(method, repo_id, details)`` in call order."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.repos: dict[str, dict[str, bytes]] = {}
        self.heads: dict[str, str] = {}
        self.calls: list[tuple[str, str, Any]] = []

    # ------------------------------------------------------------------ helpers for tests
    def seed(self, repo_id: str, files: dict[str, bytes]) -> None:
        """Give a repository these files (plus ``.gitattributes``) as if an earlier push had left them."""
        self.repos[repo_id] = {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n", **files}
        self._new_head(repo_id)

    def commits(self) -> list[dict[str, list[str]]]:
        """The operations of every ``create_commit`` call: ``{"add": [...], "delete": [...]}``."""
        return [details for method, _, details in self.calls if method == "create_commit"]

    def _new_head(self, repo_id: str) -> None:
        self.heads[repo_id] = hashlib.sha1(f"{repo_id}:{len(self.calls)}:{sorted(self.repos[repo_id])}".encode()
                                           ).hexdigest()

    # ------------------------------------------------------------------ the HfApi surface push_folder uses
    def create_repo(self, repo_id: str, *, repo_type: str, private: bool = False, exist_ok: bool = False,
                    **kwargs: Any) -> str:
        self.calls.append(("create_repo", repo_id, {"repo_type": repo_type, "private": private, **kwargs}))
        if repo_id in self.repos and not exist_ok:
            raise RuntimeError(f"{repo_id} exists")
        if repo_id not in self.repos:
            self.seed(repo_id, {})
        return f"https://huggingface.co/{repo_id}"

    def repo_info(self, repo_id: str, *, repo_type: str) -> SimpleNamespace:
        self.calls.append(("repo_info", repo_id, {"repo_type": repo_type}))
        return SimpleNamespace(sha=self.heads[repo_id])

    def list_repo_tree(self, repo_id: str, *, repo_type: str, revision: str | None = None,
                       recursive: bool = False, **kwargs: Any) -> list[RepoFile | RepoFolder]:
        self.calls.append(("list_repo_tree", repo_id, {"revision": revision, "recursive": recursive}))
        assert recursive, "push_folder must list the whole tree, not only its top level"
        assert revision in (None, self.heads[repo_id]), "listed a revision that is not the head"
        entries: list[RepoFile | RepoFolder] = []
        folders = sorted({str(parent) for path in self.repos[repo_id] for parent in PurePosixPath(path).parents
                          if str(parent) != "."})
        entries += [RepoFolder(path=folder, oid=hashlib.sha1(folder.encode()).hexdigest()) for folder in folders]
        for path, content in sorted(self.repos[repo_id].items()):
            lfs = None
            if PurePosixPath(path).suffix in LFS_SUFFIXES:
                lfs = {"size": len(content), "oid": hashlib.sha256(content).hexdigest(), "pointerSize": 134}
            # an LFS file's git oid is that of its pointer file, not of its content
            oid = git_blob_id(b"pointer " + content) if lfs else git_blob_id(content)
            entries.append(RepoFile(path=path, size=len(content), oid=oid, lfs=lfs))
        return entries

    def create_commit(self, repo_id: str, operations: list[Any], *, commit_message: str, repo_type: str,
                      parent_commit: str | None = None, **kwargs: Any) -> SimpleNamespace:
        if parent_commit is not None and parent_commit != self.heads[repo_id]:
            raise RuntimeError(f"{repo_id}: parent commit {parent_commit} is not the head {self.heads[repo_id]}")
        files = self.repos[repo_id]
        details: dict[str, list[str]] = {"add": [], "delete": []}
        for op in operations:
            if isinstance(op, CommitOperationAdd):
                source = op.path_or_fileobj
                files[op.path_in_repo] = source if isinstance(source, bytes) else Path(source).read_bytes()
                details["add"].append(op.path_in_repo)
            elif isinstance(op, CommitOperationDelete):
                if op.path_in_repo not in files:
                    raise RuntimeError(f"{repo_id}: cannot delete missing {op.path_in_repo}")
                del files[op.path_in_repo]
                details["delete"].append(op.path_in_repo)
            else:
                raise TypeError(f"unexpected operation {op!r}")
        self.calls.append(("create_commit", repo_id, details))
        self._new_head(repo_id)
        return SimpleNamespace(commit_url=f"https://huggingface.co/{repo_id}/commit/{self.heads[repo_id]}")
