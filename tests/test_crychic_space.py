"""The CRyCHIc Space as a visitor and a client use it: launched on loopback over a hub root laid out as a
release lays it out (tiny random models, ``tests/_spaces.py``), called through ``gradio_client`` with a pasted
conversation and with a test conversation (gold tree beside), refusing malformed input with a message; and its
export as a Space folder. The browser test is in tests/test_spaces_browser.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _crychic_tiny import one_thread
from _spaces import ROOT, SpaceApp, build_crychic_data, serve

from convohub.crychic.space import EXAMPLE, PASTED, SPACE_NAME


@pytest.fixture(autouse=True, scope="module")
def _torch_on_one_thread() -> Iterator[None]:
    yield from one_thread()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_crychic_data(tmp_path_factory.mktemp("crychic-space"))


@pytest.fixture(scope="module")
def client(hub: Path) -> Iterator[tuple[Any, Any]]:
    from gradio_client import Client

    app = SpaceApp("crychic", ROOT / "spaces" / "crychic" / "app.py",
                   {"CONVOHUB_MODELS": str(hub), "CONVOHUB_DATASET": str(hub / "datasets" / "convohub" / "wildchat-tree"),
                    "GRADIO_ANALYTICS_ENABLED": "False"})
    with serve(app) as (url, module):
        yield Client(url, verbose=False), module


def _boxes(svg: str) -> int:
    return len(re.findall(r'<g class="node', svg))


def test_pasted_conversation_is_drawn_with_decisions_and_the_last_prompts_history(client: tuple[Any, Any]) -> None:
    api, _ = client
    picture, gold, decisions, history = api.predict(PASTED, EXAMPLE, api_name="/reconstruct")
    turns = EXAMPLE.count("User:")
    assert picture.startswith("<svg") and _boxes(picture) == turns
    assert "No gold tree" in gold
    # the judge's threshold, as the judge's config gives it (the fixture's judge: the tiny recipe's tuning or none)
    assert re.search(r"The judge's threshold is 0\.\d+ \((the paper's|tuned for this judge)\)", gold)
    rows = decisions["data"]
    assert [row[0] for row in rows] == list(range(turns)) and rows[0][1:4] == ["root", "-", "history"]
    roots = sum(row[1] == "root" for row in rows)
    assert picture.count("<line") == turns - roots  # a forest: one edge per non-root turn
    assert f"turn {turns - 1}, user (the prompt):" in history and "Now translate it into French." in history


def test_test_conversation_is_drawn_beside_its_gold_tree(client: tuple[Any, Any]) -> None:
    api, module = client
    ids = api.predict(api_name="/conversations")
    assert ids == module.conversations() and len(ids) == 50
    picked = module._conversations()[ids[0]]
    picture, gold, decisions, _ = api.predict(ids[0], "", api_name="/reconstruct")
    n = len(picked.exchanges)
    assert _boxes(picture) == _boxes(gold) == n
    assert gold.count("<line") == n - picked.gold.count(-1)
    predicted = [-1 if row[1] == "root" else int(row[1]) for row in decisions["data"]]
    wrong = sum(p != g for p, g in zip(predicted, picked.gold, strict=True))
    assert picture.count('class="node marked"') == wrong  # amber where the parent differs from the gold one
    assert f"{n - wrong} of {n} reconstructed parents match" in gold
    assert [row[2] for row in decisions["data"]] == ["root" if g == -1 else str(g) for g in picked.gold]


def test_malformed_input_is_refused_with_what_to_change(client: tuple[Any, Any]) -> None:
    from gradio_client.exceptions import AppError

    api, _ = client
    with pytest.raises(AppError, match="must start with 'User:'"):
        api.predict(PASTED, "hello there", api_name="/reconstruct")
    with pytest.raises(AppError, match="a second user message"):
        api.predict(PASTED, '[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]',
                    api_name="/reconstruct")


def test_export_writes_a_space_folder_with_the_release_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.cli import main
    from convohub.hub import read_card

    assert main(["space", "crychic", "--out", str(tmp_path), "--namespace", "org"]) == 0
    folder = tmp_path / "spaces" / "org" / SPACE_NAME
    assert capsys.readouterr().out.strip() == f"wrote {folder}"
    meta, body = read_card(folder / "README.md")
    assert meta["app_file"] == "app.py" and meta["sdk"] == "gradio"
    assert "org/wildchat-tree" in meta["datasets"] and "org/crychic-judge-tiny" in meta["models"]
    assert (folder / "app.py").is_file() and (folder / "convohub" / "crychic" / "space.py").is_file()
    assert "Filtered history" in body or "filtered history" in body
