"""Every convohub Space with the cheapest data that lets it answer, and a way to serve it on loopback.

Shared by tests/test_spaces_browser.py (a real browser) and benchmarks/bench_spaces.py (50 concurrent
gradio_client clients), so both exercise the same apps on the same inputs. The data is built in seconds:
the synthetic wildchat-sample dataset (train, validation and test splits), a three-persona PerQA,
WildChatTree, and convohub's randomly initialised tiny models standing in for trained ones (the Spaces'
plumbing and pictures are under test here, not model quality).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
METRICS = tuple(sorted(p.name for p in (ROOT / "evaluation").iterdir() if (p / "app.py").is_file()))


@dataclass(frozen=True)
class SpaceApp:
    """One Space: its app file, the environment it reads, and one API call with its default inputs."""

    name: str
    app: Path
    env: dict[str, str] = field(default_factory=dict)
    api_name: str = ""
    args: tuple[Any, ...] = ()


def build_data(root: Path) -> dict[str, Path]:
    """The datasets the corpus, ReQAP, CRyCHIc and WildChat-AQA Spaces read, and untrained ProMISe classifiers,
    built under ``root`` (seconds)."""
    from _aqa_fixture import build_fixture

    from convohub.cli import main
    from convohub.hub import HubTarget
    from convohub.perqa import PerQAConfig, build_perqa, generate_perqa

    if main(["datasets", "build", "wildchat-sample", "--out", str(root / "corpus")]):  # synthetic, 3 splits
        raise RuntimeError("building wildchat-sample failed")
    perqa = generate_perqa(PerQAConfig(n_personas=3, start_date=date(2024, 6, 1), seed=1, max_instances=1))
    return {"wildchat-sample": (root / "corpus" / "datasets" / "convohub" / "wildchat-sample").resolve(),
            "perqa": build_perqa(HubTarget(root / "reqap"), ROOT, data=perqa).resolve(),
            "crychic": build_crychic_data(root / "crychic"),
            **promise_classifiers(root / "promise"),
            "wildchat-aqa": build_fixture(root / "aqa").resolve()}


def build_crychic_data(root: Path) -> Path:
    """A hub root as a CRyCHIc release lays it out: the WildChatTree test split and the three models (tiny
    random ones, ``tests/_crychic_tiny.py``: the Space's plumbing and pictures are under test, not quality)."""
    from _crychic_tiny import save_tiny

    from convohub.cli import main

    if main(["datasets", "build", "wildchat-tree", "--out", str(root)]):
        raise RuntimeError("building wildchat-tree failed")
    for task, kind in (("ifqc", "ifqc"), ("simplifier", "simplifier"), ("judge", "judge-bi")):
        save_tiny(kind, root / "models" / "convohub" / f"crychic-{task}-tiny")
    return root.resolve()


#: The ReQAP Space's stand-ins, named (its default is the trained chain of a release, which tests do not build;
#: the page then says ORACLE).
REQAP_STAND_INS = {"CONVOHUB_DECOMPOSER": "gold", "CONVOHUB_RETRIEVER": "bm25", "CONVOHUB_EXTRACTOR": "lookup"}


def promise_classifiers(root: Path) -> dict[str, Path]:
    """MiniLM with fresh Task 1 and Task 2 heads (Task 2 multiple-choice, as the tiny recipe), saved: the
    ProMISe Space's simulator for plumbing."""
    from transformers import AutoTokenizer

    from convohub.models import minilm_path
    from convohub.promise.training import fresh_classifier

    out = {}
    for task in ("task1", "task2"):
        folder = root / task
        fresh_classifier(task, str(minilm_path()), "multiple-choice" if task == "task2" else "sequence") \
            .save_pretrained(folder)
        AutoTokenizer.from_pretrained(str(minilm_path())).save_pretrained(folder)
        out[f"promise-{task}"] = folder.resolve()
    return out


def space_apps(data: dict[str, Path]) -> list[SpaceApp]:
    """The system Spaces and every metric Space, each with the call its first button makes."""
    from _aqa_fixture import QUESTIONS

    from convohub.crychic.space import EXAMPLE as CRYCHIC_EXAMPLE
    from convohub.crychic.space import PASTED as CRYCHIC_PASTED
    from convohub.promise.space import EXAMPLE_INTENT, EXAMPLE_QUESTION
    from convohub.training.models import resolve_model
    from convohub.wildfeedback.space import EXAMPLE

    tiny = "convohub-tiny:causal"
    apps = [
        SpaceApp("corpus", ROOT / "spaces" / "corpus" / "app.py",
                 {"CONVOHUB_DATASET": str(data["wildchat-sample"]), "CONVOHUB_MODEL": tiny},
                 "/browse", ("(all)", "(all)")),
        SpaceApp("reqap", ROOT / "spaces" / "reqap" / "app.py",
                 {"CONVOHUB_DATASET": str(data["perqa"]), **REQAP_STAND_INS},
                 "/answer", ("test_persona_0", None, "How many hours have I spent watching TV series altogether?")),
        SpaceApp("wildfeedback", ROOT / "spaces" / "wildfeedback" / "app.py",
                 {"CONVOHUB_MODEL": tiny, "CONVOHUB_BASE_MODEL": tiny, "CONVOHUB_JUDGE_MODEL": "lexical",
                  "CONVOHUB_LLM_BASE_URL": "", "CONVOHUB_LLM_MODEL": ""},
                 "/compare", (EXAMPLE, 16)),
        # the agent is the real SmolLM2 (a random model writes no suggestion that passes the checks); its answers
        # are cached on disk, so after the first call a repeated question is answered from the cache
        SpaceApp("promise", ROOT / "spaces" / "promise" / "app.py",
                 {"CONVOHUB_PROMISE_AGENT": "smollm2", "CONVOHUB_PROMISE_TASK1_MODEL": str(data["promise-task1"]),
                  "CONVOHUB_PROMISE_TASK2_MODEL": str(data["promise-task2"])},
                 "/start", (EXAMPLE_INTENT, EXAMPLE_QUESTION)),
        # the random tiny causal LM stands in for SmolLM2 as the local LLM (plumbing, not answer quality)
        SpaceApp("wildchat_aqa", ROOT / "spaces" / "wildchat_aqa" / "app.py",
                 {"CONVOHUB_DATASET": str(data["wildchat-aqa"]),
                  "CONVOHUB_LLM_BASE_URL": f"local:{resolve_model(tiny)}", "CONVOHUB_LLM_MODEL": ""},
                 "/rank", (QUESTIONS[0][0], "", "", "rag", "summary", None, 20, 192)),
    ]
    apps.append(SpaceApp("crychic", ROOT / "spaces" / "crychic" / "app.py",
                         {"CONVOHUB_MODELS": str(data["crychic"]),
                          "CONVOHUB_DATASET": str(data["crychic"] / "datasets" / "convohub" / "wildchat-tree")},
                         "/reconstruct", (CRYCHIC_PASTED, CRYCHIC_EXAMPLE)))
    apps += [SpaceApp(f"metric-{name}", ROOT / "evaluation" / name / "app.py", api_name="/score")
             for name in METRICS]
    return apps


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` (an empty value unsets the variable) and restore the previous values afterwards."""
    saved = {k: os.environ.get(k) for k in env}
    try:
        for key, value in env.items():
            if value:
                os.environ[key] = value
            else:
                os.environ.pop(key, None)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def serve(space: SpaceApp) -> Iterator[tuple[str, ModuleType]]:
    """Import the Space's app with its environment, launch it on a free loopback port, yield (url, module).

    The environment holds while the app runs: the apps read some variables at import and some on the first
    request (the WildFeedback labeller).
    """
    import sys

    from convohub.cli import load_script

    with environment(space.env):
        sys.path.insert(0, str(space.app.parent))  # a metric app sits next to its module
        try:
            app = load_script(space.app)
        finally:
            sys.path.remove(str(space.app.parent))
        app.demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
        try:
            yield app.demo.local_url, app
        finally:
            app.demo.close()
