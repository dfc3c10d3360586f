"""Where the release's three CRyCHIc models are: a local hub root (``convohub release --out DIR``, by default
``hub_release``) or the Hub under a namespace.

Used by ``convohub tree reconstruct`` and the CRyCHIc Space, so both find the same folders and fail the same
way: a missing release says which folders were looked for and how to make them.
"""

from __future__ import annotations

from pathlib import Path

from convohub.crychic.model_specs import MODELS, TASKS
from convohub.hub import DEFAULT_NAMESPACE, download_models
from convohub.hub import local_models as hub_local_models


class ModelsNotFound(FileNotFoundError):
    """The CRyCHIc models are not where they were looked for; the message says how to get them."""


def repo_names(profile: str = "tiny") -> dict[str, str]:
    """task -> the model repository name the release publishes for ``profile``."""
    return {task: spec.repo_name(profile) for task, spec in zip(TASKS, MODELS, strict=True)}


def local_models(hub: Path, namespace: str = DEFAULT_NAMESPACE, profile: str = "tiny") -> dict[str, Path]:
    """task -> model folder under a local hub root; :class:`ModelsNotFound` names what is missing."""
    folders, missing = hub_local_models(hub, namespace, repo_names(profile))
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
    try:
        return download_models(namespace, repo_names(profile))
    except Exception as exc:  # network, authentication, missing repo, HF_HUB_OFFLINE: all say the same
        raise ModelsNotFound(f"could not download {namespace}/{{{', '.join(repo_names(profile).values())}}} from the "
                             f"Hub ({type(exc).__name__}: {exc}); check the namespace and your connection "
                             "(HF_HUB_OFFLINE must be unset), or use a local release with --hub DIR") from exc
