"""The side-by-side release (``convohub release --jobs N``): its start order, its limits, its failures and its
stop, first with toy child processes, then with real systems through the command."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convohub.cli import main
from convohub.registry import Step, System
from convohub.release_parallel import run_side_by_side, start_order


def _system(name: str, cost: float, needs: tuple[str, ...] = ()) -> System:
    return System(name=name, title=name, steps=(Step("build", name, lambda ctx: {}),), needs=needs, cost=cost)


def test_the_longest_chain_starts_first() -> None:
    systems = {s.name: s for s in (_system("corpus", 5), _system("perqa", 0.4), _system("reqap", 19, ("perqa",)),
                                   _system("promise", 14), _system("aqa", 14))}
    # perqa leads a chain of 19.4 minutes; equal chains keep the release order
    assert start_order(systems) == ["perqa", "reqap", "promise", "aqa", "corpus"]


def test_systems_that_need_each_other_are_refused() -> None:
    systems = {s.name: s for s in (_system("a", 1, ("c",)), _system("b", 1, ("a",)), _system("c", 1, ("b",)))}
    with pytest.raises(ValueError, match=r"the systems a -> b -> c -> a need each other"):
        start_order(systems)


class ToyLauncher:
    """Starts, for each system, a Python process that sleeps, then writes its records (or fails, or dies)."""

    def __init__(self, behaviour: dict[str, tuple[float, str]]) -> None:
        self.behaviour = behaviour
        self.started: list[tuple[str, float, int]] = []
        self.ended: dict[str, float] = {}

    def __call__(self, system: str, threads: int, records_path: Path) -> subprocess.Popen:
        seconds, outcome = self.behaviour[system]
        self.started.append((system, time.monotonic(), threads))
        failure = {"system": system, "step": f"build:{system}", "cause": "disk full"} if outcome == "fail" else None
        status = "failed" if outcome == "fail" else "done"
        payload = {"records": [{"system": system, "step": f"build:{system}", "status": status,
                                "seconds": seconds, "detail": ""}], "failure": failure}
        code = (f"import json, sys, time; time.sleep({seconds}); "
                + ("sys.exit(9)" if outcome == "die" else
                   f"open({str(records_path)!r}, 'w').write({json.dumps(json.dumps(payload))}); "
                   f"sys.exit({1 if outcome == 'fail' else 0})"))
        return subprocess.Popen([sys.executable, "-c", code])


def test_at_most_jobs_run_and_a_system_waits_for_what_it_needs(tmp_path: Path) -> None:
    systems = {s.name: s for s in (_system("a", 1), _system("b", 5, ("a",)), _system("c", 3), _system("d", 2))}
    launch = ToyLauncher({"a": (0.6, "ok"), "b": (0.3, "ok"), "c": (0.6, "ok"), "d": (0.2, "ok")})
    records, failure = run_side_by_side(systems, 2, launch, tmp_path, poll_s=0.05)
    assert failure is None
    assert [r["system"] for r in records] == ["a", "b", "c", "d"]  # release order, whatever the finishing order
    order = [name for name, _, _ in launch.started]
    assert order[:2] == ["a", "c"]  # a leads the longest chain (a + b); b cannot start before a finished
    starts = {name: when for name, when, _ in launch.started}
    assert starts["b"] - starts["a"] >= 0.6
    assert {threads for _, _, threads in launch.started} == {max(1, _cpus() // 2)}


def _cpus() -> int:
    from convohub.release_parallel import available_cpus

    return available_cpus()


def test_after_a_failure_nothing_new_starts_and_the_running_system_finishes(tmp_path: Path) -> None:
    systems = {s.name: s for s in (_system("slow", 9), _system("bad", 8), _system("later", 1),
                                   _system("needs_bad", 1, ("bad",)))}
    launch = ToyLauncher({"slow": (1.0, "ok"), "bad": (0.1, "fail"), "later": (0.1, "ok"), "needs_bad": (0.1, "ok")})
    records, failure = run_side_by_side(systems, 2, launch, tmp_path, poll_s=0.05)
    assert failure == {"system": "bad", "step": "build:bad", "cause": "disk full"}
    status = {r["system"]: (r["status"], r["detail"]) for r in records}
    assert status["slow"][0] == "done" and status["bad"][0] == "failed"
    assert status["later"] == ("skipped", "not started: bad failed")
    assert status["needs_bad"] == ("skipped", "not started: bad failed")
    assert [name for name, _, _ in launch.started] == ["slow", "bad"]


def test_a_process_that_dies_without_records_is_a_failure_naming_its_exit_code(tmp_path: Path) -> None:
    records, failure = run_side_by_side({"x": _system("x", 1)}, 2, ToyLauncher({"x": (0.0, "die")}), tmp_path,
                                        poll_s=0.05)
    assert failure is not None and "exited with code 9 without recording its steps" in failure["cause"]
    assert "convohub release --only x" in failure["cause"] and records[0]["status"] == "failed"


def test_a_stopped_release_stops_its_running_systems(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM (which the ``convohub`` command turns into SystemExit) while systems run: each gets
    SIGTERM, so that it stops its own training subprocess, instead of running on, orphaned."""
    children: list[subprocess.Popen] = []

    def launch(system: str, threads: int, records_path: Path) -> subprocess.Popen:
        if children:
            raise KeyboardInterrupt
        children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
        return children[0]

    systems = {"one": _system("one", 2), "two": _system("two", 1)}
    with pytest.raises(KeyboardInterrupt):
        run_side_by_side(systems, 2, launch, tmp_path, poll_s=0.05)
    assert children[0].poll() == -signal.SIGTERM


def test_an_interrupted_release_leaves_no_side_by_side_folder(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import convohub.release_parallel as parallel
    from convohub.release import run_release

    def interrupted(*args: object, **kwargs: object) -> None:
        assert list((tmp_path / ".convohub-work" / "side-by-side").glob("run-*"))  # the run's folder exists
        raise KeyboardInterrupt

    monkeypatch.setattr(parallel, "run_side_by_side", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_release(out=tmp_path, only=["metrics", "perqa"], jobs=2, use_rules=True)
    assert not list((tmp_path / ".convohub-work" / "side-by-side").glob("run-*"))


def test_a_backend_object_without_its_spec_cannot_reach_the_processes(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub.release import run_release

    monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="pass llm_spec"):
        run_release(out=tmp_path, only=["metrics", "perqa"], jobs=2, llm=object())
    assert not (tmp_path / ".convohub-work").exists()


def test_jobs_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--jobs must be >= 1, got 0"):
        main(["release", "--only", "metrics", "perqa", "--out", str(tmp_path), "--jobs", "0"])


def test_side_by_side_release_of_real_systems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Through the command, each system in a process of its own: a system whose input is missing fails with its
    own error, the system that needs it is not started, an independent one finishes into its own progress
    file; a re-run resumes what finished and runs the failed system again. (PerQA's missing source keeps this
    to seconds; the main job is the full-size run of the same path.)"""
    out = tmp_path / "hub"
    monkeypatch.setenv("CONVOHUB_PERQA_SOURCE", str(tmp_path / "missing"))
    assert main(["release", "--only", "metrics", "perqa", "reqap", "--out", str(out), "--jobs", "2"]) == 1
    captured = capsys.readouterr()
    assert re.search(r"perqa\s+build:perqa\s+failed\s+0\.0\s+PerQA source /", captured.out)
    assert re.search(r"reqap\s+-\s+skipped\s+0\.0\s+not started: perqa failed", captured.out)
    assert re.search(r"metrics\s+space:metric-spaces\s+done", captured.out)
    assert "FAILED at perqa/build:perqa: PerQA source" in captured.err
    work = out / ".convohub-work"
    assert {p.parent.name for p in work.glob("*/progress.json")} == {"metrics"}
    assert (out / "spaces" / "convohub" / "ndcg" / "app.py").is_file()
    assert not list((work / "side-by-side").iterdir())  # the run's option and record files are cleaned up

    assert main(["release", "--only", "metrics", "perqa", "--out", str(out), "--jobs", "2"]) == 1
    captured = capsys.readouterr()
    assert re.search(r"metrics\s+space:metric-spaces\s+resumed", captured.out)
    assert re.search(r"perqa\s+build:perqa\s+failed", captured.out)
    steps = json.loads((work / "metrics" / "progress.json").read_text())["steps"]
    assert steps["space:metric-spaces"]["metric_spaces"] == "6"
