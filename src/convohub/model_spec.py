"""One declarative spec per published model: what the release, the evaluation and the card all read.

A :class:`ModelSpec` names the training script, the recipe and the model repository of each profile, the
dataset the model is trained on, the evaluation function, the card template (``model_cards/<template>.md``)
and the function computing that template's values. :func:`release_steps` turns a spec into the release's
train -> evaluate -> card steps, so no system writes those closures by hand.

Card templates are Markdown with :class:`string.Template` placeholders (``$name``), as the dataset cards'
``dataset_scripts/*/card.md``; they are read from the source tree (``repo``, see :mod:`convohub.paths`).
Prose that only some cards carry (the tiny profile's limitations, a paragraph about a judge ...) is a named
*block* of the same file, after the card: a line ``<!-- block: NAME -->`` starts it, the next such line or
the end of the file ends it. A value :class:`Block` ``("NAME")`` puts the block in, rendered with the same
values, so the Python side computes values (numbers, names, tables) and picks blocks, and writes no prose.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from convohub.hub import HubTarget, ModelCardInfo, markdown_table, write_model

if TYPE_CHECKING:  # pragma: no cover - typing only
    from convohub.registry import Step

CARDS_DIR = "model_cards"
_BLOCK_LINE = re.compile(r"^<!-- block: ([A-Za-z0-9_]+) -->[ \t]*\n", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\$(?:\{\s*[_A-Za-z][_A-Za-z0-9]*\s*\}|[_A-Za-z])")


# --------------------------------------------------------------------------------------------- templates
#: What a model's release steps produce: its trained folder, its evaluation's results and its card's repo.
ARTIFACT_KINDS = ("dir", "eval_path", "card_dir")


def artifact_name(model: str, kind: str) -> str:
    """The release artifact name of model ``model``'s ``kind`` (:data:`ARTIFACT_KINDS`), for a step that names
    a model's artifacts without importing its spec."""
    return f"{model}_{kind}"


@dataclass(frozen=True)
class Block:
    """A template value standing for the template's block ``name``, rendered with the same values."""

    name: str


def block(condition: bool, name: str, otherwise: str | None = None) -> Block | str:
    """``Block(name)`` when ``condition`` holds, else ``Block(otherwise)`` (or nothing, without one)."""
    if condition:
        return Block(name)
    return Block(otherwise) if otherwise else ""


class _Values(Mapping[str, Any]):
    """The values a template is rendered with; a :class:`Block` value renders (lazily) on lookup."""

    def __init__(self, template: CardTemplate, values: Mapping[str, Any], used: set[str]) -> None:
        self._template, self._values, self._used = template, values, used

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]
        if not isinstance(value, Block):
            return value
        if value.name not in self._template.blocks:
            raise KeyError(f"block {value.name!r} (value of ${key})")
        self._used.add(value.name)
        return Template(self._template.blocks[value.name]).substitute(self)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _tidy(text: str) -> str:
    """At most one blank line in a row outside code fences (a block left out leaves none behind)."""
    out: list[str] = []
    fenced = blank = False
    for line in text.strip("\n").split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and not line.strip():
            if blank:
                continue
            blank = True
            out.append("")
            continue
        blank = False
        out.append(line)
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class CardTemplate:
    """A model card template: the card's Markdown and its named blocks (module doc)."""

    source: str
    body: str
    blocks: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> CardTemplate:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"card template {path} does not exist (model cards live in {CARDS_DIR}/)")
        parts = _BLOCK_LINE.split(path.read_text(encoding="utf-8"))
        blocks: dict[str, str] = {}
        for name, text in zip(parts[1::2], parts[2::2], strict=True):
            if name in blocks:
                raise ValueError(f"{path}: block {name!r} is defined twice")
            blocks[name] = text.strip("\n")
        return cls(str(path), parts[0], blocks)

    def placeholders(self) -> set[str]:
        """Every ``$name`` of the card and of its blocks."""
        found = set()
        for text in (self.body, *self.blocks.values()):
            for match in Template.pattern.finditer(text):
                name = match.group("named") or match.group("braced")
                if name:
                    found.add(name)
        return found

    def render(self, values: Mapping[str, Any], used: set[str] | None = None) -> str:
        """The card's Markdown; raises on a placeholder without a value and on a ``$`` left over. ``used``
        collects the names of the blocks that went in."""
        used = set() if used is None else used
        try:
            text = Template(self.body).substitute(_Values(self, values, used))
        except KeyError as exc:
            raise KeyError(f"{self.source}: no value for ${exc.args[0]}") from None
        except ValueError as exc:  # a lone `$`: write `$$` for a dollar sign
            raise ValueError(f"{self.source}: {exc}") from None
        return _tidy(text)


def unfilled(text: str) -> list[str]:
    """The ``$placeholders`` still in a rendered card (none, once every value was given)."""
    return _PLACEHOLDER.findall(text)


# --------------------------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class CardInput:
    """What a card's values are computed from: the trained folder (the arguments and results its training
    run saved there), the measured ``results``, and where the card goes."""

    target: HubTarget
    profile: str
    name: str  # the model repository's name
    model_dir: Path
    results: Mapping[str, Any]
    recipe: Path
    dataset_id: str

    @property
    def tiny(self) -> bool:
        return self.profile == "tiny"

    @property
    def repo_id(self) -> str:
        return self.target.repo_id(self.name)

    def recipe_text(self, path: Path | None = None) -> str:
        return Path(path or self.recipe).read_text(encoding="utf-8")


#: What a spec's ``card_values`` returns: the card's metadata (YAML) and its template's values.
CardValues = tuple[ModelCardInfo, Mapping[str, Any]]
#: ``evaluate(model_dir, dataset_dir, models)``: the measured results (JSON-ready) of a trained folder;
#: ``models`` holds the folders of the models named in the spec's ``uses`` that this release trained.
Evaluate = Callable[[Path, Path, Mapping[str, Path]], dict[str, Any]]


@dataclass(frozen=True)
class ModelSpec:
    """One published model, declared once (module doc). Paths are relative to the repository root."""

    name: str  # snake_case: artifact, scratch and step names derive from it
    script: str
    recipes: Mapping[str, str]  # profile -> recipe
    repos: Mapping[str, str]  # profile -> model repository name
    dataset: str  # the dataset repository it is trained on (its id goes into the card)
    template: str  # model_cards/<template>.md
    card_values: Callable[[CardInput], CardValues]
    evaluate: Evaluate | None = None  # None: the system measures it in its own step
    uses: tuple[str, ...] = ()  # other specs whose trained folders ``evaluate`` is given
    headline: tuple[str, ...] = ()  # result keys the release summary shows
    eval_settings: tuple[str, ...] = ()  # environment variables ``evaluate`` reads (the evaluate step's settings)

    def __post_init__(self) -> None:
        if set(self.recipes) != set(self.repos):
            raise ValueError(f"model {self.name!r}: recipes {sorted(self.recipes)} and repos {sorted(self.repos)} "
                             "must name the same profiles")

    def _check(self, profile: str) -> str:
        if profile not in self.repos:
            raise ValueError(f"model {self.name!r} has no profile {profile!r}; profiles: {', '.join(self.repos)}")
        return profile

    def repo_name(self, profile: str) -> str:
        return self.repos[self._check(profile)]

    def recipe(self, repo: Path, profile: str) -> Path:
        return Path(repo) / self.recipes[self._check(profile)]

    def artifact(self, kind: str) -> str:
        """The release artifact name of this model's ``dir`` (trained folder), ``eval_path`` or ``card_dir``."""
        return artifact_name(self.name, kind)

    def train(self, repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int, *,
              extra: Sequence[str] = ()) -> Path:
        """Launch the script with the profile's recipe under ``accelerate launch`` on the built dataset
        folder (:func:`convohub.training.runs.run_recipe`; ``extra``: more CLI overrides); returns the
        trained folder, which holds the run's resolved arguments (``training_args.json``)."""
        from convohub.training.runs import run_recipe

        return run_recipe(Path(repo) / self.script, self.recipe(repo, profile), Path(dataset_dir), Path(output_dir),
                          seed, profile=profile, extra=tuple(extra))

    def card(self, target: HubTarget, repo: Path, profile: str, model_dir: Path, results: Mapping[str, Any], *,
             used: set[str] | None = None) -> tuple[ModelCardInfo, str]:
        """The card's metadata and its Markdown body, rendered from the template (``used`` collects the
        template blocks that went in)."""
        name = self.repo_name(profile)
        given = CardInput(target=target, profile=profile, name=name, model_dir=Path(model_dir), results=results,
                          recipe=self.recipe(repo, profile), dataset_id=target.repo_id(self.dataset))
        info, values = self.card_values(given)
        rows = [[r.dataset_name, r.dataset_split or "", r.metric_name or r.metric_type, float(r.metric_value)]
                for r in info.results]
        common = {"name": name, "repo_id": given.repo_id, "dataset_id": given.dataset_id, "license": info.license,
                  "recipe_name": given.recipe.name, "recipe": given.recipe_text(), "script": self.script,
                  "results_table": markdown_table(["dataset", "split", "metric", "value"], rows)}
        template = CardTemplate.read(Path(repo) / CARDS_DIR / f"{self.template}.md")
        return info, template.render({**common, **values}, used)

    def publish(self, target: HubTarget, repo: Path, profile: str, model_dir: Path,
                results: Mapping[str, Any]) -> Path:
        """Write the model repository: the trained folder's weights and the card with ``results``."""
        info, body = self.card(target, repo, profile, model_dir, results)
        return write_model(target, self.repo_name(profile), Path(model_dir), info, body)


def profile_recipes(folder: str, *profiles: str) -> dict[str, str]:
    """``{profile: "<folder>/<profile>.yaml"}``: a model folder's recipes."""
    return {p: f"{folder}/{p}.yaml" for p in profiles}


# --------------------------------------------------------------------------------------------- release
def _step_name(spec: ModelSpec) -> str:
    return spec.name.replace("_", "-")


def _reads(dataset_reads: Sequence[str] | None, *names: str) -> tuple[str, ...] | None:
    """A step's declared reads: ``names`` and what the dataset function reads (None when that is not known)."""
    return None if dataset_reads is None else (*names, *dataset_reads)


def train_step(spec: ModelSpec, *, system: str, dataset: Callable[[Any], Path],
               dataset_reads: Sequence[str] | None = None, extra_args: Callable[[Any], Sequence[str]] | None = None,
               extra_reads: Sequence[str] = ()) -> Step:
    """Train with the profile's recipe into the system's scratch folder (``--max-train-steps`` applies).
    ``dataset_reads``: the artifacts ``dataset(ctx)`` looks up (:attr:`convohub.registry.Step.reads`);
    ``extra_args(ctx)``: more script arguments (other models' folders, say), from the artifacts ``extra_reads``."""
    from convohub.registry import Step

    def run(ctx: Any) -> dict[str, Any]:
        out = ctx.scratch(system, f"{spec.name}-{ctx.profile}")
        extra = (*(extra_args(ctx) if extra_args is not None else ()), *ctx.train_overrides())
        spec.train(ctx.repo, ctx.profile, dataset(ctx), out, ctx.seed, extra=extra)
        return {spec.artifact("dir"): out}

    def inputs(ctx: Any) -> list[Path]:
        return [spec.recipe(ctx.repo, ctx.profile), Path(ctx.repo) / spec.script]

    return Step("train", _step_name(spec), run, inputs=inputs, reads=_reads(dataset_reads, *extra_reads))


def evaluate_step(spec: ModelSpec, *, system: str, dataset: Callable[[Any], Path],
                  dataset_reads: Sequence[str] | None = None) -> Step:
    """Measure the trained folder (and the models of ``spec.uses``) with the spec's evaluation; the results go
    to ``<name>_eval.json``."""
    from convohub.hub import atomic_write_text, dump_json
    from convohub.registry import Step

    if spec.evaluate is None:
        raise ValueError(f"model {spec.name!r} declares no evaluation function")
    evaluate = spec.evaluate

    def run(ctx: Any) -> dict[str, Any]:
        models = {n: Path(ctx.artifacts[f"{n}_dir"]) for n in spec.uses if f"{n}_dir" in ctx.artifacts}
        results = evaluate(Path(ctx.artifacts[spec.artifact("dir")]), dataset(ctx), models)
        path = ctx.scratch(system) / f"{spec.name}_eval.json"
        atomic_write_text(path, dump_json(results))
        return {spec.artifact("eval_path"): path, **{f"{spec.name}_{k}": results[k] for k in spec.headline}}

    used = (spec.artifact("dir"), *(f"{n}_dir" for n in spec.uses))
    return Step("evaluate", f"{_step_name(spec)}-eval", run, reads=_reads(dataset_reads, *used),
                settings=spec.eval_settings)


def card_step(spec: ModelSpec, *, extra: Callable[[Any], Mapping[str, Any]] | None = None,
              extra_reads: Sequence[str] = ()) -> Step:
    """Publish the trained folder with a card carrying the evaluation step's results (merged with
    ``extra(ctx)``: results a later step of the system measured, e.g. CRyCHIc's LLM baseline, read from the
    artifacts ``extra_reads``). The card's template is an input file: an edited template re-renders it."""
    from convohub.hub import read_json
    from convohub.registry import Step

    def run(ctx: Any) -> dict[str, Any]:
        results = read_json(Path(ctx.artifacts[spec.artifact("eval_path")]))
        if extra is not None:
            results = {**results, **extra(ctx)}
        path = spec.publish(ctx.target, ctx.repo, ctx.profile, Path(ctx.artifacts[spec.artifact("dir")]), results)
        return {spec.artifact("card_dir"): path}

    def inputs(ctx: Any) -> list[Path]:
        return [Path(ctx.repo) / CARDS_DIR / f"{spec.template}.md"]

    return Step("card", f"{_step_name(spec)}-card", run, inputs=inputs,
                reads=(spec.artifact("eval_path"), spec.artifact("dir"), *extra_reads))


def release_steps(spec: ModelSpec, *, system: str, dataset: Callable[[Any], Path],
                  dataset_reads: Sequence[str] | None = None) -> tuple[Step, Step, Step]:
    """The train -> evaluate -> card steps of a model; ``dataset(ctx)`` is the built dataset folder, looked up
    under the artifacts ``dataset_reads`` (None: not known, so the train and evaluate steps declare no reads)."""
    return (train_step(spec, system=system, dataset=dataset, dataset_reads=dataset_reads),
            evaluate_step(spec, system=system, dataset=dataset, dataset_reads=dataset_reads), card_step(spec))
