"""The trained ReQAP models of a release, found where ``convohub release`` put them.

``convohub reqap ask|evaluate`` and the Space run the trained chain by default -- QUD (the SFT model) ->
RETRIEVE (BM25 first stage, then the patterns and events cross-encoders) -> EXTRACT (the trained model) --
and take its four models from a release: a local hub root (``<hub>/models/<namespace>/<repo>``, the
folder ``convohub release --out`` writes, ``./hub_release`` by default) or, when a namespace is named and
the local folder lacks them, the Hub repositories ``<namespace>/<repo>``. Repository names come from the
models' :class:`~convohub.model_spec.ModelSpec` (one per profile), so they cannot drift from what the
release publishes. A release that has not been built gives an error that says how to build it or which
flags name the components instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_HUB", "PROFILES", "MissingRelease", "ReleaseModels", "chain_specs", "find_release_models"]

#: The release's default output folder (``convohub release`` writes ``./hub_release``).
DEFAULT_HUB = Path("hub_release")
#: Profiles looked for, in order, when none is named.
PROFILES = ("tiny", "paper")
BUILD_HINT = "convohub release --only perqa reqap --out {hub}"


class MissingRelease(FileNotFoundError):
    """The trained models are not where the flags point; the message says what to pass or build."""


@dataclass(frozen=True)
class ReleaseModels:
    """Folders of the four trained models of one release profile, and where they were found."""

    qud: Path
    events: Path
    patterns: Path
    extract: Path
    profile: str
    source: str  # "local hub root hub_release" or "Hub namespace convohub"

    def specs(self) -> dict[str, str]:
        """The component specs of :func:`convohub.reqap.components.build.make_system` for this release."""
        return {"decomposer": f"sft:{self.qud}", "retriever": f"ce:{self.events},{self.patterns}",
                "extractor": f"model:{self.extract}"}


def chain_specs() -> dict[str, Any]:
    """The :class:`~convohub.model_spec.ModelSpec` of each model of the chain, by its field of :class:`ReleaseModels`."""
    from convohub.reqap.release import extract, qud, retrieve

    return {"qud": qud.SPEC, "events": retrieve.EVENTS, "patterns": retrieve.PATTERNS, "extract": extract.SPEC}


def _repos(profile: str) -> dict[str, str]:
    return {kind: spec.repo_name(profile) for kind, spec in chain_specs().items()}


def find_release_models(hub: str | Path | None = DEFAULT_HUB, namespace: str | None = None,
                        profile: str | None = None) -> ReleaseModels:
    """The trained QUD, RETRIEVE (events, patterns) and EXTRACT folders of a release.

    Looks in ``<hub>/models/<namespace or convohub>/`` for every profile in :data:`PROFILES` (or ``profile``)
    and takes the first profile whose four models are all there. With ``namespace`` set and nothing local,
    downloads ``<namespace>/<repo>`` from the Hub. Raises :class:`MissingRelease` naming the folders
    looked at and the command that builds them.
    """
    from convohub.hub import DEFAULT_NAMESPACE, download_models, local_models

    profiles = (profile,) if profile else PROFILES
    missing: list[str] = []
    remote = ""
    for name in profiles:
        if hub is not None:
            folders, absent = local_models(hub, namespace or DEFAULT_NAMESPACE, _repos(name))
            if not absent:
                return ReleaseModels(**folders, profile=name, source=f"local hub root {hub}")
            missing += absent
    if namespace:
        try:
            folders = download_models(namespace, _repos(profiles[0]))
            return ReleaseModels(**folders, profile=profiles[0], source=f"Hub namespace {namespace}")
        except Exception as err:  # offline, unknown repository, no access: say what was tried
            remote = (f"; nor the Hub repositories {namespace}/{{{', '.join(_repos(profiles[0]).values())}}} "
                      f"({type(err).__name__}: {str(err).splitlines()[0][:160]})")
    shown = "; ".join(missing[:4]) + (f"; and {len(missing) - 4} more" if len(missing) > 4 else "") + remote
    hub_text = hub if hub is not None else DEFAULT_HUB
    raise MissingRelease(
        f"no trained ReQAP models found (looked for {shown}). Build them with `{BUILD_HINT.format(hub=hub_text)}`, "
        "point --hub at another release folder (or --namespace ORG for models on the Hub), or name the "
        "components: --decomposer sft:DIR --retriever ce:EVENTS_DIR,PATTERNS_DIR --extractor model:DIR "
        "(stand-ins: --decomposer gold [ORACLE] --retriever bm25 --extractor lookup)")
