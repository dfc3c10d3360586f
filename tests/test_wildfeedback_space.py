"""WildFeedback Space: conversation parsing, export, and the launched app called through gradio_client
(offline: rule labeller, tiny models, lexical judge)."""

from __future__ import annotations

from pathlib import Path

import pytest

from convohub.conversations.transcript import parse_transcript as parse_conversation
from convohub.wildfeedback.space import EXAMPLE, SPACE_NAME, export_space, query_prompt

ROOT = Path(__file__).resolve().parents[1]


def test_parse_conversation_text_and_sharegpt() -> None:
    turns = parse_conversation("User: hi\nthere\nAI: hello\nHuman: thanks")
    assert turns == [{"role": "user", "content": "hi\nthere"}, {"role": "assistant", "content": "hello"},
                     {"role": "user", "content": "thanks"}]
    share = parse_conversation('[{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]')
    assert share == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    for bad, match in (("", "paste a conversation"), ("hello", "must start with 'User:'"),
                       ("Assistant: only me", "no user turn"), ("[1, 2", "not valid JSON")):
        with pytest.raises(ValueError, match=match):
            parse_conversation(bad)


def test_query_prompt_follows_the_summary() -> None:
    turns = parse_conversation(EXAMPLE)
    prompt, checklist = query_prompt(turns, [{"query": 1, "preferences": ["Be short."]}])
    assert prompt == turns[:1] and checklist == ["Be short."]
    prompt, checklist = query_prompt(turns, [])
    assert prompt == turns and checklist == []


def test_export_space(tmp_path: Path) -> None:
    from convohub.hub import HubTarget, read_card

    path = export_space(HubTarget(root=tmp_path), "tiny", ROOT)
    meta, _ = read_card(path / "README.md")
    assert path.name == SPACE_NAME and meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert meta["models"] == ["convohub/wildfeedback-tiny-dpo"] and meta["datasets"] == ["convohub/wildfeedback"]
    requirements = (path / "requirements.txt").read_text().splitlines()  # buildable on the Hub:
    assert "convohub" not in {r.split("=")[0].split(">")[0] for r in requirements}  # no unpublished pin
    assert any(r.startswith("datasets") for r in requirements)  # convohub's own dependencies instead
    assert (path / "convohub" / "__init__.py").is_file()  # the package travels with the Space


def test_space_app_through_gradio_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradio_client import Client

    from convohub.cli import load_script

    for key in ("CONVOHUB_LLM_BASE_URL", "CONVOHUB_LLM_MODEL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CONVOHUB_MODEL", "convohub-tiny:causal")  # no trained model needed for the plumbing
    monkeypatch.setenv("CONVOHUB_BASE_MODEL", "convohub-tiny:causal")
    monkeypatch.setenv("CONVOHUB_JUDGE_MODEL", "lexical")
    app = load_script(ROOT / "spaces" / "wildfeedback" / "app.py")
    app.demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        client = Client(app.demo.local_url, verbose=False)
        table, prefs, source, marked = client.predict(EXAMPLE, api_name="/labels")
        rows = table["data"]
        marks = [(piece["token"], piece["class_or_confidence"]) for piece in marked]  # the labels tab's picture
        assert [label for _, label in marks if label] == ["DSAT", "SAT"]
        assert next(text for text, label in marks if label == "DSAT").startswith("User: That is too long")
        assert [r[0] for r in rows] == ["T-1", "T-2", "T-3"]
        assert "Revision" in rows[1][3] and "Gratitude" in rows[2][2]
        assert prefs and prefs[0]["query"] == 1 and prefs[0]["preferences"]
        assert "rules" in source and "DSAT: True" in source
        base, aligned, verdicts, verdict = client.predict(EXAMPLE, 16, api_name="/compare")
        assert verdicts["data"] == [["aligned better", 0], ["tie", 2], ["base better", 0]]  # the chart: both tie
        assert isinstance(base, str) and isinstance(aligned, str)
        assert verdict["judge"] == "convohub-lexical-judge" and verdict["checklist"] == prefs[0]["preferences"]
        assert verdict["outcome"] == "tie"  # same model on both sides: identical answers tie in both orders
        with pytest.raises(Exception, match="no user turn"):
            client.predict("Assistant: hi", api_name="/labels")
    finally:
        app.demo.close()
