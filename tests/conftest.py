"""Test-wide settings: everything runs offline, on models and data convohub builds itself."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Generator, Iterator

import pytest

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_EVALUATE_OFFLINE": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_key, _value)

# Under pytest-xdist (the README's ``-n 2``) two workers share the two cores: each gets one torch/OpenMP thread
# (inherited by the training scripts they launch), since two processes of two threads each on two cores make
# torch's threads wait on each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_key] = "1"


# Disk: a module's temporary folders (its releases, venvs and model copies, several GB in all) are removed when
# the module ends with every test passed, so the suite's peak is its largest module rather than their sum;
# pyproject's tmp_path_retention_policy = "failed" does the same for each passing test's tmp_path. Folders of
# a module with a failure stay for inspection, except under CI=true, where nobody can open them and a full
# disk would turn one failure into many (a CI run that ran out of disk failed 28 tests after the first).
_MODULES_WITH_FAILURES: set[str] = set()
_KEEP_FAILED = os.environ.get("CI", "").lower() not in {"true", "1"}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        _MODULES_WITH_FAILURES.add(item.nodeid.split("::")[0])
    return report


@pytest.fixture(scope="module", autouse=True)
def _free_module_tmp(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    base = tmp_path_factory.getbasetemp()
    before = set(base.iterdir())
    yield
    if not (_KEEP_FAILED and request.node.nodeid in _MODULES_WITH_FAILURES):
        for path in set(base.iterdir()) - before:
            shutil.rmtree(path, ignore_errors=True)


# Order: under ``-n 2 --dist loadfile`` the workers take whole modules in turn. xdist's default order (most
# tests first) left the few-test modules that build a release to the end, where one worker ran the
# WildFeedback release for ~10 minutes while the other sat idle; modules marked ``heavy`` now go first, then
# the rest with the most tests first, so the two workers finish close together.
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    sizes = Counter(map(module, items))
    heavy = {module(item) for item in items if item.get_closest_marker("heavy")}
    items.sort(key=lambda item: (module(item) not in heavy, -sizes[module(item)], module(item)))  # stable


@pytest.fixture(scope="session", autouse=True)
def _drop_finished_sessions(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Remove the folders of earlier pytest sessions that ended (no lock file) when this one starts.

    pytest prunes them only when a session ends, so a machine whose earlier runs kept everything (the default
    retention keeps three sessions) starts a run with that disk already taken; one worker does it, once."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker not in (None, "gw0"):
        return
    base = tmp_path_factory.getbasetemp()
    session = base.parent if worker else base
    number = session.name.removeprefix("pytest-")
    if not (session.name.startswith("pytest-") and number.isdigit()):
        return  # a --basetemp given by hand: not a numbered session folder
    for old in session.parent.glob("pytest-*"):
        older = old.name.removeprefix("pytest-")
        if older.isdigit() and int(older) < int(number) and not (old / ".lock").exists():
            shutil.rmtree(old, ignore_errors=True)
