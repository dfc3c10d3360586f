"""Launch a recipe from release code, and read back what the run resolved.

Why a saved copy of the arguments: a recipe is only the starting point of a run -- the release passes
``--dataset_path``/``--output_dir``/``--seed``, tests and users add overrides (``--max_events_per_source 5``).
Evaluation and cards that re-read the YAML miss those overrides (they would derive pairs with other
settings, or name another base model). So every training script calls :func:`save_arguments` on its main
process, which writes ``training_args.json`` (each argument group as the parser resolved it) next to the
model, and everything downstream reads :func:`saved_arguments` instead of the recipe.

:func:`run_recipe` is what the release's model modules share: launch ``script`` with ``recipe`` through
``accelerate launch`` (:func:`convohub.training.launch.run_script`) with the release's standard overrides,
keep the log beside the output folder, and check the run left its arguments behind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convohub.hub import atomic_write_text, dump_json, read_json

__all__ = ["ARGS_FILE", "launch_profile", "run_recipe", "save_arguments", "saved_arguments"]

#: The file (next to a trained model) holding the run's resolved arguments, one mapping per group.
ARGS_FILE = "training_args.json"


def _plain(group: Any) -> dict[str, Any]:
    """A JSON-ready mapping of one argument group (TrainingArguments' own ``to_dict`` where it has one)."""
    if hasattr(group, "to_dict"):
        data = group.to_dict()
    elif dataclasses.is_dataclass(group) and not isinstance(group, type):
        data = dataclasses.asdict(group)
    else:
        data = dict(group)
    return {k: v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)
            for k, v in data.items()}


def save_arguments(output_dir: str | Path, **groups: Any) -> Path:
    """Write the resolved argument groups (``script=args, training=training_args, model=model_args``)."""
    path = Path(output_dir) / ARGS_FILE
    atomic_write_text(path, dump_json({name: _plain(group) for name, group in groups.items()}))
    return path


def saved_arguments(model_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The argument groups a convohub training script saved next to ``model_dir``'s model."""
    path = Path(model_dir) / ARGS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: {model_dir} was not written by a convohub training script "
                                "(or by an older version); re-run its training so evaluation sees the run's "
                                "own arguments")
    return read_json(path)


def launch_profile(profile: str) -> str:
    """The launch profile (accelerate config) of a model profile: ``tiny`` runs on the CPU, every other
    profile (``paper``, ``paper_xs`` ...) is a paper-scale run."""
    return "tiny" if profile == "tiny" else "paper"


def run_recipe(script: Path, recipe: Path, dataset_dir: Path, output_dir: Path, seed: int, *,
               profile: str, extra: Sequence[str] = ()) -> Path:
    """Train with ``recipe`` under ``accelerate launch``; the release's overrides (data, output, seeds)
    come first, ``extra`` after them. The log goes to ``<output_dir>.log``. Returns ``output_dir``."""
    from convohub.training.launch import TrainingFailed, run_script

    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    args = ["--dataset_path", str(dataset_dir), "--output_dir", str(output_dir), "--seed", str(seed),
            "--data_seed", str(seed), *map(str, extra)]
    run_script(Path(script), Path(recipe), args, profile=launch_profile(profile),
               log_file=output_dir.parent / f"{output_dir.name}.log")
    if not (output_dir / ARGS_FILE).is_file():
        raise TrainingFailed(f"{Path(script).name} with {recipe} finished but wrote no {ARGS_FILE} into "
                             f"{output_dir}; the script must call convohub.training.runs.save_arguments")
    return output_dir
