"""Where the release's three CRyCHIc models are: a local hub root (``convohub release --out DIR``, by default
``hub_release``) or the Hub under a namespace.

Used by ``convohub tree reconstruct`` and the CRyCHIc Space, so both find the same folders and fail the same
way: a missing release says which folders were looked for and how to make them.
"""

from __future__ import annotations

from pathlib import Path

from convohub.crychic.model_specs import MODELS, TASKS
from convohub.hub import DEFAULT_NAMESPACE, HubTarget


class ModelsNotFound(FileNotFoundError):
    """The CRyCHIc models are not where they were looked for; the message says how to get them."""


def repo_names(profile: str = "tiny") -> dict[str, str]:
    """task -> the model repository name the release publishes for ``profile``."""
    return {task: spec.repo_name(profile) for task, spec in zip(TASKS, MODELS, strict=True)}


def local_models(hub: Path, namespace: str = DEFAULT_NAMESPACE, profile: str = "tiny") -> dict[str, Path]:
    """task -> model folder under a local hub root; :class:`ModelsNotFound` names what is missing."""
    target = HubTarget(root=Path(hub), namespace=namespace)
    folders = {task: target.repo_dir("models", name) for task, name in repo_names(profile).items()}
    missing = [str(folder) for folder in folders.values() if not (folder / "config.json").is_file()]
    if missing:
        where = "no release" if not Path(hub).is_dir() else "the release lacks " + ", ".join(missing)
        raise ModelsNotFound(
            f"{where} at {hub} (looked for {', '.join(repo_names(profile).values())} under "
            f"{Path(hub) / 'models' / namespace}). Make them with `convohub release --only crychic --out {hub}`, "
            "point --hub at the folder a release wrote, or pass --namespace ORG "
            "to download ORG's published models from the Hub")
    return folders


def hub_models(namespace: str, profile: str = "tiny") -> dict[str, Path]:
    """task -> local snapshot of ``namespace``'s published model (downloaded from the Hub once, then cached)."""
    from huggingface_hub import snapshot_download

    folders = {}
    for task, name in repo_names(profile).items():
        repo = f"{namespace}/{name}"
        try:
            folders[task] = Path(snapshot_download(repo, repo_type="model"))
        except Exception as exc:  # network, authentication, missing repo, HF_HUB_OFFLINE: all say the same
            raise ModelsNotFound(f"could not download {repo} from the Hub ({type(exc).__name__}: {exc}); check the "
                                 "namespace and your connection (HF_HUB_OFFLINE must be unset), or use a local "
                                 "release with --hub DIR") from exc
    return folders
