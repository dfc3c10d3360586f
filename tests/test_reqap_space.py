"""The ReQAP Space: export it, launch the app on loopback over a small PerQA and call it with gradio_client
(persona question, CSV upload, the persona list), checking answer, operator tree and per-node trace."""

from __future__ import annotations

import csv
import json
from datetime import date
from pathlib import Path

import pytest

from convohub.hub import HubTarget, read_card
from convohub.perqa import PerQAConfig, build_perqa, generate_perqa

ROOT = Path(__file__).resolve().parents[1]
TV_HOURS = "How many hours have I spent watching TV series altogether?"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = generate_perqa(PerQAConfig(n_personas=3, start_date=date(2024, 6, 1), seed=1, max_instances=1))
    return build_perqa(HubTarget(tmp_path_factory.mktemp("hub")), ROOT, data=data)


def test_export_space(tmp_path: Path) -> None:
    from convohub.reqap.space import export_space

    target = HubTarget(tmp_path)
    folder = export_space(target, ROOT, dataset_id=target.repo_id("perqa"), models=[target.repo_id("m")])
    meta, _ = read_card(folder / "README.md")
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py" and (folder / "app.py").is_file()
    assert meta["datasets"] == [target.repo_id("perqa")] and meta["models"] == [target.repo_id("m")]
    requirements = (folder / "requirements.txt").read_text().splitlines()  # buildable on the Hub:
    assert "convohub" not in {r.split("=")[0].split(">")[0] for r in requirements}  # no unpublished pin
    assert any(r.startswith("datasets") for r in requirements)  # convohub's own dependencies instead
    assert (folder / "convohub" / "__init__.py").is_file()  # the package travels with the Space


def test_examples_are_questions_the_trained_chain_answered_then_qud_trees(tmp_path: Path) -> None:
    from convohub.reqap.space import EXAMPLES_FILE, examples_note, export_space, read_examples, space_examples

    chain = [  # the end-to-end run of the trained chain: answered ones first, right ones, then the fastest
        {"persona_id": "p0", "template_id": "a", "question": "c1", "tree": "T", "error": None, "hit": False,
         "seconds": 30.0},
        {"persona_id": "p0", "template_id": "b", "question": "c2", "tree": "T", "error": None, "hit": False,
         "seconds": 8.94},
        {"persona_id": "p1", "template_id": "c", "question": "c3", "tree": None, "error": "NoTree: ...",
         "hit": False, "seconds": 5.0},
        {"persona_id": "p1", "template_id": "d", "question": "c4", "tree": None,
         "error": "TimeoutError: time budget of 60 s exceeded", "hit": False, "seconds": 95.0}]
    qud = [  # the QUD evaluation: a tree each, right answers first, then answered ones
        {"persona_id": "p0", "template_id": "a", "question": "q1", "tree": "T", "answer": "1", "hit": True},
        {"persona_id": "p2", "template_id": "d", "question": "q2", "tree": "T", "answer": None, "hit": False},
        {"persona_id": "p2", "template_id": "e", "question": "q3", "tree": None, "answer": None, "hit": False},
        {"persona_id": "p2", "template_id": "f", "question": "q4", "tree": "T", "answer": "2", "hit": False}]
    picked = space_examples(chain, qud)  # one per template: q1 shares c1's template
    assert [r["question"] for r in picked] == ["c2", "c1", "q4", "q2"]
    assert picked[0] == {"persona_id": "p0", "question": "c2", "hit": False, "source": "chain", "seconds": 8.9}
    assert picked[2] == {"persona_id": "p2", "question": "q4", "hit": False, "source": "qud"}
    assert space_examples(chain, qud, n=1) == picked[:1] and space_examples([], []) == []
    assert [r["question"] for r in space_examples([], qud)] == ["q1", "q4", "q2"]
    note = examples_note(picked)
    assert "the first 2 were answered by this trained chain" in note and "30 s at most" in note
    assert "the other 2 are questions for which the trained QUD wrote" in note
    assert examples_note(space_examples([], qud)).startswith("Examples: the 3 are questions") and not examples_note([])

    target = HubTarget(tmp_path)
    folder = export_space(target, ROOT, examples=picked)
    assert read_examples(folder) == picked
    assert not (export_space(HubTarget(tmp_path / "bare"), ROOT) / EXAMPLES_FILE).exists()
    assert read_examples(tmp_path / "bare") is None
    (folder / EXAMPLES_FILE).write_text('[{"question": "no persona"}]')
    with pytest.raises(ValueError, match=EXAMPLES_FILE):
        read_examples(folder)
    (folder / EXAMPLES_FILE).write_text('[{"persona_id": "p0",')  # cut short: the file and place are named
    with pytest.raises(ValueError, match=f"{EXAMPLES_FILE}: not valid JSON .* line 1"):
        read_examples(folder)


def test_app_opens_on_the_first_release_example(dataset: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub.cli import load_script
    from convohub.reqap.data.perqa import persona_ids
    from convohub.reqap.space import export_space

    monkeypatch.setenv("CONVOHUB_DATASET", str(dataset.resolve()))
    for name, spec in (("DECOMPOSER", "gold"), ("RETRIEVER", "bm25"), ("EXTRACTOR", "lookup")):
        monkeypatch.setenv(f"CONVOHUB_{name}", spec)
    persona = persona_ids(dataset, "test")[-1]
    picked = [{"persona_id": persona, "question": TV_HOURS, "hit": False, "source": "chain", "seconds": 9.0}]
    app = load_script(export_space(HubTarget(tmp_path), ROOT, examples=picked) / "app.py")
    assert (persona, TV_HOURS) == (app._PERSONA, app._QUESTION)
    assert [[persona, TV_HOURS]] == app._EXAMPLES and "answered by this trained chain" in app._EXAMPLES_NOTE
    stranger = [{"persona_id": "nobody", "question": "q", "hit": True, "source": "qud"}]  # not in the dataset: the first persona
    app = load_script(export_space(HubTarget(tmp_path / "other"), ROOT, examples=stranger) / "app.py")
    assert (app._CHOICES[0], "q") == (app._PERSONA, app._QUESTION) and "(1 right with BM25" in app._EXAMPLES_NOTE
    plain = load_script(ROOT / "spaces" / "reqap" / "app.py")  # no release examples: the dataset's
    assert plain._EXAMPLES and plain._EXAMPLES[0][1] == plain._QUESTION and "one per template" in plain._EXAMPLES_NOTE


def _write_csv(path: Path, dataset: Path) -> Path:
    from convohub.perqa import events_from_dataset

    rows = events_from_dataset(dataset, "test_persona_0")
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        cols = ["id", "structured_event_id", "start_date", "start_time", "end_date", "end_time", "event_type",
                "event_data", "properties_mentioned"]
        w.writerow(cols)
        for r in rows:
            w.writerow([json.dumps(r[c]) if c in ("event_data", "properties_mentioned") else r[c] for c in cols])
    return path


def test_app_answers_with_tree_and_trace(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gradio_client import Client, handle_file

    from convohub.cli import load_script

    monkeypatch.setenv("CONVOHUB_DATASET", str(dataset.resolve()))
    monkeypatch.setenv("CONVOHUB_HUB", str(tmp_path / "no-release"))
    monkeypatch.setenv("CONVOHUB_RETRIEVER", "bm25")
    monkeypatch.setenv("CONVOHUB_EXTRACTOR", "lookup")
    missing = load_script(ROOT / "spaces" / "reqap" / "app.py")  # the default QUD is the release's: none here
    assert "convohub release --only perqa reqap" in missing._components_markdown()
    monkeypatch.setenv("CONVOHUB_DECOMPOSER", "gold")
    app = load_script(ROOT / "spaces" / "reqap" / "app.py")
    assert "**ORACLE" in app._components_markdown() and "RETRIEVE: BM25" in app._components_markdown()
    app.demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        client = Client(app.demo.local_url, verbose=False)
        personas = client.predict(api_name="/personas")
        assert personas[0] == "test_persona_0"
        answer, picture, tree, trace = client.predict("test_persona_0", None, TV_HOURS, api_name="/answer")
        assert float(answer) > 0
        assert picture.startswith("<svg") and picture.count('<g class="node">') == 3  # the tree, drawn
        assert "APPLY(" in tree and "\n  EXTRACT(" in tree and "\n    RETRIEVE(" in tree
        assert trace["headers"][:3] == ["node", "depth", "operator"]
        assert [row[2] for row in trace["data"]] == ["APPLY", "EXTRACT", "RETRIEVE"]
        assert int(trace["data"][2][5]) > 0  # RETRIEVE output size
        assert trace["data"][2][6].startswith("[{")  # its first events, as JSON
        assert trace["data"][0][6] == answer.split("\n")[0]  # the APPLY node's output is the answer

        upload = _write_csv(tmp_path / "p_obs.csv", dataset)
        same, _, _, _ = client.predict("(uploaded file)", handle_file(str(upload)), TV_HOURS, api_name="/answer")
        assert same == answer
        failed, _, tree2, rows = client.predict("test_persona_0", None, "What is the meaning of life?",
                                             api_name="/answer")
        assert "NoTree" in failed and "(no tree)" in tree2
    finally:
        app.demo.close()


def test_ics_upload_becomes_calendar_events(tmp_path: Path) -> None:
    from convohub.reqap.space import events_from_ics

    ics = tmp_path / "cal.ics"
    ics.write_text("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:20241101T100000\r\nDTEND:20241101T110000\r\n"
                   "SUMMARY:Dentist\r\n appointment\r\nLOCATION:Main St\\, 5\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
    [event] = events_from_ics(ics).events
    assert event["summary"] == "Dentistappointment" and event["location"] == "Main St, 5"
    assert event["start_date"] == "2024-11-01" and event["start_time"] == "10:00:00" and event["source"] == "calendar"


def test_long_list_answers_show_their_size_and_first_items() -> None:
    from convohub.reqap.space import answer_text

    assert answer_text(42.5) == "42.5" and answer_text(None) == "null"
    assert answer_text(["Jazz", "rock"]) == '["Jazz", "rock"]'
    events = [{"id": i, "event": "watched an episode"} for i in range(1614)]
    text = answer_text(events)
    assert text.startswith("1,614 items, the first 10: [")
    assert '"id": 9,' in text and '"id": 10,' not in text
    assert answer_text(events[:10]).startswith('[{"id": 0')  # ten items are shown whole


def test_release_picks_examples_from_its_end_to_end_run_and_qud_evaluation(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from convohub.reqap.release import qud
    from convohub.reqap.system import _space_examples

    run = tmp_path / "end-to-end"
    (run / "reqap_sft").mkdir(parents=True)
    (run / "comparison.json").write_text("{}")
    (run / "reqap_sft" / "predictions.jsonl").write_text(json.dumps(
        {"persona_id": "p0", "template_id": "a", "question": "chain", "tree": "T", "error": None, "hit": False,
         "seconds": 9.0}) + "\n")
    (tmp_path / "qud_eval.json").write_text(json.dumps({"predictions": [
        {"persona_id": "p1", "template_id": "b", "question": "qud", "tree": "T", "answer": "1", "hit": False}]}))
    artifacts = {"reqap_end_to_end_path": str(run / "comparison.json"),
                 qud.SPEC.artifact("eval_path"): str(tmp_path / "qud_eval.json")}
    picked = _space_examples(SimpleNamespace(artifacts=artifacts))
    assert [(e["question"], e["source"]) for e in picked] == [("chain", "chain"), ("qud", "qud")]
    assert _space_examples(SimpleNamespace(artifacts={})) == []  # a release without them: the app's fallback
