"""``convohub tree reconstruct``: one conversation (messages, a WildChat row or a WildChatTree record) through
the release's three models found under a local hub root, as a table, as JSON and as one turn's filtered
history; and the errors a user meets (no release, a malformed file), which name the file, the item and the
field and say what to do.

The models are tiny and random (``tests/_crychic_tiny.py``) laid out as a release lays them out, so the
parents mean nothing here; tests/test_crychic_release.py runs the command on the release's trained models."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _crychic_tiny import one_thread, save_tiny

from convohub.cli import main
from convohub.crychic.conversation_input import (
    ConversationInputError,
    conversation_from_json,
    conversation_from_text,
    read_conversation_file,
)

MESSAGES = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Write a poem about the sea."},
    {"role": "assistant", "content": "Waves roll in, the tide runs out."},
    {"role": "user", "content": "Continue"},
    {"role": "assistant", "content": "Gulls cry over the grey water."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "Thanks! Now translate the poem into French."},
]
RECORD = {"conversation_id": "c1", "turns": [
    {"turn_index": 0, "user_prompt": "Write a poem about the sea.", "assistant_response": "Waves roll in.", "parent": -1},
    {"turn_index": 1, "user_prompt": "Make it rhyme.", "assistant_response": "Waves roll, the sea is old.",
     "parent": 0},
    {"turn_index": 2, "user_prompt": "How tall is Everest?", "assistant_response": "8,849 m.", "parent": -1},
    {"turn_index": 3, "user_prompt": "Translate the poem into French.", "assistant_response": "Les vagues.",
     "parent": 1}]}


@pytest.fixture(autouse=True, scope="module")
def _torch_on_one_thread() -> Iterator[None]:
    yield from one_thread()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local hub root holding the three models where a tiny release puts them."""
    root = tmp_path_factory.mktemp("hub")
    for task, kind in (("ifqc", "ifqc"), ("simplifier", "simplifier"), ("judge", "judge-bi")):
        save_tiny(kind, root / "models" / "convohub" / f"crychic-{task}-tiny")
    return root


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("conversations")
    out = {"messages": folder / "chat.json", "record": folder / "record.json", "records": folder / "trees.jsonl"}
    out["messages"].write_text(json.dumps(MESSAGES))
    out["record"].write_text(json.dumps(RECORD))
    out["records"].write_text("\n".join(json.dumps({**RECORD, "conversation_id": cid}) for cid in ("a", "b")) + "\n")
    return out


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["tree", "reconstruct", *args]) == 0
    return capsys.readouterr().out


def test_json_lists_every_turn_with_parent_module_and_score(hub: Path, files: dict[str, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    rows = json.loads(_run(capsys, str(files["messages"]), "--hub", str(hub), "--json"))
    assert [r["turn_index"] for r in rows] == [0, 1, 2, 3]  # the system message is no turn
    assert all(set(r) == {"turn_index", "parent", "module", "score"} for r in rows)
    assert rows[0] == {"turn_index": 0, "parent": -1, "module": "history", "score": None}
    for r in rows[1:]:
        assert r["parent"] == -1 or 0 <= r["parent"] < r["turn_index"]
        assert r["module"] in {"ifqc", "simplifier", "judge"}
        assert r["score"] is None or 0.0 <= r["score"] <= 1.0
    # the simplifier and the judge say how sure they were; the IFQC always does
    assert all(r["score"] is not None for r in rows[1:] if r["module"] in {"ifqc", "judge"})


def test_history_is_the_ancestors_of_the_turn(hub: Path, files: dict[str, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rows = json.loads(_run(capsys, str(files["messages"]), "--hub", str(hub), "--json"))
    parents = [r["parent"] for r in rows]
    chain, p = [], parents[3]
    while p != -1:
        chain.insert(0, p)
        p = parents[p]
    shown = json.loads(_run(capsys, str(files["messages"]), "--hub", str(hub), "--history", "3", "--json"))
    assert [h["turn_index"] for h in shown["history"]] == chain and shown["parent"] == parents[3]
    assert shown["prompt"] == MESSAGES[-1]["content"]
    text = _run(capsys, str(files["messages"]), "--hub", str(hub), "--history", "3")
    assert text.startswith("filtered history of turn 3")
    assert text.rstrip().endswith(f"[turn 3] user (the prompt): {MESSAGES[-1]['content']}")
    assert all(f"[turn {i}] user:" in text for i in chain)
    assert all(f"[turn {i}] user:" not in text for i in range(3) if i not in chain)


def test_record_shows_the_gold_parents_beside_the_reconstructed_ones(hub: Path, files: dict[str, Path],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    text = _run(capsys, str(files["record"]), "--hub", str(hub))
    assert text.startswith("conversation c1: 4 turn(s), gold parents from the record")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("turn"))
    assert "gold" in lines[header] and lines[header + 1].split()[:3] == ["0", "root", "root"]
    assert "parents match the gold tree" in text
    picked = _run(capsys, str(files["records"]), "--hub", str(hub), "--id", "b", "--json")
    assert len(json.loads(picked)) == 4


@pytest.mark.parametrize("payload,args,expected", [
    ([{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}], (),
     "item 1|message 1: a second user message"),
    ([{"role": "assistant", "content": "hello"}], (), "message 0: an assistant message before any user prompt"),
    ([{"role": "user"}], (), "item 0: need role user/assistant/system"),
    ({"conversation_id": "c", "turns": [{"turn_index": 0, "user_prompt": "a", "assistant_response": "",
                                         "parent": 0}]}, (), "turn 0: field 'parent' is 0"),
    ({"something": 1}, (), "needs 'turns'"),
])
def test_malformed_conversations_are_named(payload: object, args: tuple[str, ...], expected: str, hub: Path,
                                           tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(SystemExit, match=expected) as err:
        main(["tree", "reconstruct", str(path), "--hub", str(hub), *args])
    assert str(path) in str(err.value)


def test_missing_release_and_bad_options_say_what_to_do(files: dict[str, Path], hub: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no release at .*convohub release --only crychic.*--hub.*--namespace"):
        main(["tree", "reconstruct", str(files["messages"]), "--hub", str(tmp_path / "nothing")])
    with pytest.raises(SystemExit, match="has 4 turn\\(s\\), numbered 0..3"):
        main(["tree", "reconstruct", str(files["messages"]), "--hub", str(hub), "--history", "4"])
    with pytest.raises(SystemExit, match="holds 2 conversations \\(a, b\\); name one with --id"):
        main(["tree", "reconstruct", str(files["records"]), "--hub", str(hub)])
    with pytest.raises(SystemExit, match="not valid JSON"):
        (tmp_path / "broken.json").write_text("[{")
        main(["tree", "reconstruct", str(tmp_path / "broken.json"), "--hub", str(hub)])


def test_unreachable_hub_names_the_repositories_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub.crychic.published import ModelsNotFound, hub_models, repo_names

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelsNotFound, match=r"could not download no-such-org/\{.*HF_HUB_OFFLINE") as err:
        hub_models("no-such-org")
    assert all(name in str(err.value) for name in repo_names().values())


def test_accepted_shapes_read_alike() -> None:
    from_messages = conversation_from_json(MESSAGES, "m")
    row = conversation_from_json({"conversation_hash": "h1", "conversation": MESSAGES}, "row")
    text = conversation_from_text("\n".join(f"{m['role'].title()}: {m['content']}" for m in MESSAGES))
    assert from_messages.exchanges == row.exchanges == text.exchanges
    assert from_messages.exchanges[-1] == (MESSAGES[-1]["content"], "")  # unanswered last prompt
    assert row.conversation_id == "h1" and from_messages.gold is None
    record = conversation_from_text(json.dumps(RECORD))
    assert record.gold == [-1, 0, -1, 1] and record.prompts[1] == "Make it rhyme."
    with pytest.raises(ConversationInputError, match="no conversation with conversation_id 'zz'"):
        conversation_from_json([{**RECORD, "conversation_id": "a"}], "list", "zz")
    with pytest.raises(ConversationInputError, match="no such file"):
        read_conversation_file(Path("/nonexistent/chat.json"))


def test_thresholds_are_named_in_the_header_and_can_be_set(hub: Path, files: dict[str, Path],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    text = _run(capsys, str(files["record"]), "--hub", str(hub))
    # the tiny judge was never tuned, so the paper's values hold
    assert "root threshold 0.4 (the paper's), implicit threshold 0.5 (the IFQC's argmax)" in text
    assert "root threshold 0.9 (given), implicit threshold 0.7 (given)" in _run(
        capsys, str(files["record"]), "--hub", str(hub), "--threshold", "0.9", "--implicit-threshold", "0.7")
    with pytest.raises(SystemExit, match=r"--threshold 1.5: give a probability in \[0, 1\)"):
        main(["tree", "reconstruct", str(files["messages"]), "--hub", str(hub), "--threshold", "1.5"])
    with pytest.raises(SystemExit, match="implicit threshold must be in"):
        main(["tree", "reconstruct", str(files["messages"]), "--hub", str(hub), "--implicit-threshold", "1"])
