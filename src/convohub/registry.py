"""The one place where systems register, so that a new system never touches the CLI.

A *system* (one of the five papers, or the shared WildChat sample corpus) is an ordered list of release
steps (build -> train -> evaluate -> card -> space) plus the datasets it can build on their own. Each
system module exposes ``SYSTEM: System``; adding a system means adding its module path to
``SYSTEM_MODULES`` below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:  # pragma: no cover
    from convohub.release import ReleaseContext

#: Import paths of the modules that define ``SYSTEM``; release order follows this tuple.
SYSTEM_MODULES: tuple[str, ...] = (
    "convohub.corpus.system",
    "convohub.metrics.system",
    "convohub.perqa.system",
    "convohub.reqap.system",
    "convohub.crychic.system",
    "convohub.wildfeedback.system",
    "convohub.promise.system",
    "convohub.aqa.system",
)

STEP_KINDS = ("build", "train", "evaluate", "card", "space")

#: Every published model's spec (:class:`convohub.model_spec.ModelSpec`), as ``"module:NAME"``: one per model,
#: each rendering its card from ``model_cards/<template>.md``.
MODEL_SPECS: tuple[str, ...] = (
    "convohub.corpus.chat_lm:SPEC",
    "convohub.reqap.release.extract:SPEC",
    "convohub.reqap.release.retrieve:PATTERNS",
    "convohub.reqap.release.retrieve:EVENTS",
    "convohub.reqap.release.qud:SPEC",
    "convohub.wildfeedback.alignment:SPEC",
    "convohub.crychic.model_specs:IFQC",
    "convohub.crychic.model_specs:SIMPLIFIER",
    "convohub.crychic.model_specs:JUDGE",
    "convohub.promise.model_specs:TASK1_ENCODER",
    "convohub.promise.model_specs:TASK2_ENCODER",
    "convohub.promise.model_specs:GENERATOR",
    "convohub.aqa.model_specs:SPEC",
)


@overload
def positive_int_setting(name: str, default: int) -> int: ...
@overload
def positive_int_setting(name: str, default: None = None) -> int | None: ...
def positive_int_setting(name: str, default: int | None = None) -> int | None:
    """The positive integer the environment variable ``name`` holds (a step's count setting, such as a smoke
    test's dialogue or conversation cap), ``default`` when it is unset or empty; any other value is an error
    that names the variable."""
    import os

    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)


@dataclass(frozen=True)
class Step:
    """One release step. ``run`` returns the artifacts it produced (name -> path or value).

    ``inputs(ctx)``: the files whose content decides what the step produces (a training step's recipe and
    script); a re-run resumes the step only while they are unchanged, so an edited recipe retrains.

    ``settings``: the environment variables whose values decide what the step produces (a dataset's
    ``CONVOHUB_*_SOURCE`` folder, a dialogue count). Their values are part of the step's input digest; a value
    naming a file adds the file's content, one naming a folder adds its files' names, sizes and modification
    times (the paper path's sources are gigabytes, too big to hash at every start). Setting, unsetting, changing
    or editing one makes a resumed release run the step again.

    ``reads``: the artifacts (keys of ``ctx.artifacts``, from any system) the step reads. A finished step is
    resumed unless one of them was produced afresh in this run, so retraining one model re-evaluates what uses
    it and leaves the rest alone. ``None`` (the default) means it may read anything: it runs again once any
    earlier step of its system has run. The release checks a declaration while the step runs: a step that
    looks up an artifact it does not declare fails, naming it.
    """

    kind: str
    name: str
    run: Callable[[ReleaseContext], Mapping[str, Any]]
    inputs: Callable[[ReleaseContext], Sequence[Path]] | None = None
    reads: tuple[str, ...] | None = None
    settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"step {self.name!r}: kind {self.kind!r} is not one of {STEP_KINDS}")


@dataclass(frozen=True)
class DatasetBuilder:
    """A dataset a system publishes: ``build(ctx, source)`` writes it and returns the repo folder."""

    name: str
    description: str
    build: Callable[[ReleaseContext, Path | None], Path]


@dataclass(frozen=True)
class System:
    name: str
    title: str
    steps: tuple[Step, ...]
    datasets: tuple[DatasetBuilder, ...] = ()
    space: str | None = None  # folder name under spaces/
    #: Adds the system's own subcommands (e.g. ``convohub reqap ...``): called with the CLI's subparsers
    #: object; each added parser must set ``handler=callable(args) -> int`` via ``set_defaults``.
    add_cli: Callable[[Any], None] | None = None
    #: leaderboard benchmarks (convohub.scoring.Benchmark) scored by ``convohub evaluate NAME FILE``
    benchmarks: tuple[Any, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict)
    #: the systems whose artifacts its steps read (ReQAP reads PerQA's dataset): a release that runs systems
    #: side by side (``--jobs``) starts this one only after those finished
    needs: tuple[str, ...] = ()
    #: rough minutes of its tiny release on one thread of a 2-core machine beside another system (measured
    #: 2026-11-30); the side-by-side release starts the longest chains first, so that its processes end close
    #: together
    cost: float = 1.0


def load_systems() -> dict[str, System]:
    """Import every registered system module and return {name: System} in release order."""
    systems: dict[str, System] = {}
    for module_path in SYSTEM_MODULES:
        module = importlib.import_module(module_path)
        system = getattr(module, "SYSTEM", None)
        if not isinstance(system, System):
            raise TypeError(f"{module_path} must define SYSTEM = convohub.registry.System(...)")
        if system.name in systems:
            raise ValueError(f"two systems are named {system.name!r}")
        systems[system.name] = system
    return systems


def load_model_specs() -> dict[str, Any]:
    """Import every registered model spec and return {name: ModelSpec} in :data:`MODEL_SPECS` order."""
    from convohub.model_spec import ModelSpec

    specs: dict[str, ModelSpec] = {}
    for entry in MODEL_SPECS:
        module_path, _, attr = entry.partition(":")
        spec = getattr(importlib.import_module(module_path), attr, None)
        if not isinstance(spec, ModelSpec):
            raise TypeError(f"{entry} must be a convohub.model_spec.ModelSpec")
        if spec.name in specs:
            raise ValueError(f"two model specs are named {spec.name!r}")
        specs[spec.name] = spec
    return specs


def find_dataset(name: str) -> tuple[System, DatasetBuilder]:
    """Look a dataset builder up by name across systems, with the known names in the error."""
    known = []
    for system in load_systems().values():
        for builder in system.datasets:
            known.append(builder.name)
            if builder.name == name:
                return system, builder
    raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(sorted(known)) or 'none'}")
