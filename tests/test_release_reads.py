"""Resume by declared reads: a finished step runs again only when an artifact it reads was produced again since
it ran (in this release or an earlier one), and a step that looks up an artifact it does not declare fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from convohub.hub import HubTarget
from convohub.registry import Step, System
from convohub.release import ReleaseContext, StepFailed, run_system


class Toy:
    """Steps that write one file each and log their runs; ``recipes`` are their input files."""

    def __init__(self, root: Path) -> None:
        self.root, self.runs = root, []
        self.recipes = {name: root / f"{name}.yaml" for name in ("a", "b")}
        for path in self.recipes.values():
            path.write_text("lr: 1\n")

    def step(self, kind: str, name: str, reads: tuple[str, ...] | None, *, looks_up: tuple[str, ...] = ()) -> Step:
        def run(ctx: ReleaseContext) -> dict[str, Path]:
            self.runs.append(name)
            for key in looks_up:
                assert key in ctx.artifacts
                Path(ctx.artifacts[key]).read_text()
            path = ctx.scratch("outputs") / f"{name}.txt"
            path.write_text(name)
            return {f"{name}_path": path}

        inputs: Callable[[ReleaseContext], list[Path]] | None = None
        if name in self.recipes:
            inputs = lambda ctx, recipe=self.recipes[name]: [recipe]  # noqa: E731
        return Step(kind, name, run, inputs=inputs, reads=reads)

    def context(self) -> ReleaseContext:
        return ReleaseContext(profile="tiny", target=HubTarget(self.root / "hub"), work_dir=self.root / "work")


@pytest.fixture
def toy(tmp_path: Path) -> Toy:
    return Toy(tmp_path)


def _models(toy: Toy) -> System:
    """data -> a, b (each reads data) -> a-eval (reads a) and b-eval (reads b) -> space (declares nothing)."""
    return System(name="models", title="Models", steps=(
        toy.step("build", "data", None),
        toy.step("train", "a", ("data_path",), looks_up=("data_path",)),
        toy.step("train", "b", ("data_path",), looks_up=("data_path",)),
        toy.step("evaluate", "a-eval", ("a_path",), looks_up=("a_path",)),
        toy.step("evaluate", "b-eval", ("b_path",), looks_up=("b_path",)),
        toy.step("space", "space", None)))


def _statuses(records: list) -> dict[str, str]:
    return {r.step.split(":")[1]: r.status for r in records}


def test_a_retrained_model_reruns_only_what_reads_it(toy: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    system = _models(toy)
    run_system(system, toy.context())
    assert toy.runs == ["data", "a", "b", "a-eval", "b-eval", "space"]
    assert set(_statuses(run_system(system, toy.context())).values()) == {"resumed"}

    toy.recipes["a"].write_text("lr: 2\n")
    statuses = _statuses(run_system(system, toy.context()))
    assert statuses == {"data": "resumed", "a": "done", "b": "resumed", "a-eval": "done", "b-eval": "resumed",
                        "space": "done"}
    out = capsys.readouterr().out
    assert "evaluate:a-eval: runs again: it reads a_path, produced again in this release" in out
    assert "space:space: runs again: an earlier step of its system ran in this release" in out

    (toy.root / "work" / "outputs" / "data.txt").unlink()  # the build's output is gone: everything below runs
    statuses = _statuses(run_system(system, toy.context()))
    assert set(statuses.values()) == {"done"}


def test_an_artifact_produced_again_by_another_system_reruns_its_readers(toy: Toy) -> None:
    upstream = System(name="up", title="Up", steps=(toy.step("build", "data", None),))
    downstream = System(name="down", title="Down", steps=(
        toy.step("train", "a", ("data_path",), looks_up=("data_path",)),
        toy.step("train", "b", ()),))
    ctx = toy.context()
    run_system(upstream, ctx)
    run_system(downstream, ctx)
    ctx = toy.context()
    assert set(_statuses(run_system(upstream, ctx) + run_system(downstream, ctx)).values()) == {"resumed"}

    (toy.root / "work" / "outputs" / "data.txt").unlink()
    ctx = toy.context()
    run_system(upstream, ctx)
    assert ctx.fresh == {"data_path"}
    assert _statuses(run_system(downstream, ctx)) == {"a": "done", "b": "resumed"}


def test_an_artifact_produced_again_by_an_earlier_release_run_reruns_its_readers(
        toy: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    """``--only up`` and then ``--only down``: two release runs, each with its own context (a real step finds
    another system's artifact on disk when that system is not in the run, as ReQAP finds PerQA)."""
    upstream = System(name="up", title="Up", steps=(toy.step("build", "data", None),))
    downstream = System(name="down", title="Down", steps=(
        toy.step("train", "a", ("data_path",)),
        toy.step("train", "b", ()),))
    ctx = toy.context()
    run_system(upstream, ctx)
    run_system(downstream, ctx)

    (toy.root / "work" / "outputs" / "data.txt").unlink()
    assert _statuses(run_system(upstream, toy.context())) == {"data": "done"}
    capsys.readouterr()
    assert _statuses(run_system(downstream, toy.context())) == {"a": "done", "b": "resumed"}
    assert "train:a: runs again: it reads data_path, produced again by a release run since it last ran" in (
        capsys.readouterr().out)
    assert toy.runs == ["data", "a", "b", "data", "a"]
    assert set(_statuses(run_system(downstream, toy.context())).values()) == {"resumed"}
    ctx = toy.context()
    assert set(_statuses(run_system(upstream, ctx) + run_system(downstream, ctx)).values()) == {"resumed"}


def test_a_step_reading_an_undeclared_artifact_fails_and_names_it(toy: Toy) -> None:
    system = System(name="sloppy", title="Sloppy", steps=(
        toy.step("build", "data", None),
        toy.step("train", "a", (), looks_up=("data_path",))))
    with pytest.raises(StepFailed, match=r"read the artifacts \['data_path'\], which its Step\(reads=\.\.\.\) "
                                         "does not declare"):
        run_system(system, toy.context())
    assert toy.runs == ["data", "a"]
    # a lookup outside a step is not recorded
    ctx = toy.context()
    ctx.artifacts["x"] = 1
    assert "x" in ctx.artifacts and ctx.artifacts.get("x") == 1


def test_every_registered_model_step_declares_its_reads() -> None:
    """The spec-based train/evaluate/card steps of every system declare their reads (the expensive steps, whose
    needless reruns the declarations avoid); a card also names its template as an input file."""
    from convohub.registry import load_systems

    for system in load_systems().values():
        for step in system.steps:
            if step.kind in ("train", "card") or step.name.endswith("-eval"):
                assert step.reads is not None, f"{system.name}/{step.kind}:{step.name} declares no reads"
            if step.kind == "card":
                assert step.inputs is not None, f"{system.name}/{step.kind}:{step.name} names no template"


def test_wildfeedback_steps_name_the_aligned_model_artifacts_as_its_spec_does() -> None:
    """The WildFeedback steps spell the aligned model's artifact names out (importing its spec is slow); a
    rename of the spec must not leave a read that nothing produces."""
    from convohub.wildfeedback import system
    from convohub.wildfeedback.alignment import SPEC

    assert {kind: SPEC.artifact(kind) for kind in ("dir", "eval_path", "card_dir")} == system.DPO_ARTIFACTS
    assert SPEC.name == system.DPO_MODEL
