"""Locating the repository's artifact folders (dataset_scripts/, training/, model_cards/, spaces/, evaluation/).

The release reads card templates (``dataset_scripts/*/card.md``, ``model_cards/*.md``), recipes and Space apps
from the source tree, next to the package in the src layout (``pip install -e .``). ``CONVOHUB_REPO`` points
elsewhere when the package is installed from a wheel and the tree lives in another folder.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

_MARKERS = ("dataset_scripts", "training", "model_cards", "spaces")


def _looks_like_repo(path: Path) -> bool:
    return (path / "pyproject.toml").is_file() and all((path / m).is_dir() for m in _MARKERS)


@lru_cache(maxsize=1)
def repo_root() -> Path:
    """The convohub source tree; raises with what to do when it cannot be found."""
    env = os.environ.get("CONVOHUB_REPO")
    if env:
        path = Path(env).resolve()
        if not _looks_like_repo(path):
            raise FileNotFoundError(f"CONVOHUB_REPO={env} is not a convohub checkout (no {_MARKERS} there)")
        return path
    candidates = [Path(__file__).resolve().parents[2], *Path.cwd().resolve().parents, Path.cwd().resolve()]
    for path in candidates:
        if _looks_like_repo(path):
            return path
    raise FileNotFoundError(
        "cannot find the convohub source tree (dataset_scripts/, training/, model_cards/, spaces/). Install with "
        "`pip install -e .` from a clone, run from inside the clone, or set CONVOHUB_REPO=/path/to/clone."
    )


def repo_path(*parts: str) -> Path:
    """A path inside the source tree that must exist (error names it)."""
    path = repo_root().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist in the convohub checkout")
    return path
