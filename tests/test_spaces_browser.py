"""Every Space opened as a visitor opens it: headless Chromium (Debian's package, driven by Playwright) loads
the page with no console error, runs the default inputs or the first example, waits until the outputs and
the picture (chart or drawn tree) fill, and saves a screenshot.

Screenshots go to ``$CONVOHUB_SCREENSHOTS`` when set, else to a pytest temporary folder. Without Playwright
or Chromium the tests skip with the reason, except under CI (``CI=true``), where they fail: CI installs both
(.ci/run).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _spaces import METRICS, build_data, serve, space_apps

from convohub.charts import count_frame

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT_MS = 30_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[test]')"
    else:
        missing = "" if Path(CHROMIUM).is_file() else f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    if missing:
        if _in_ci():
            pytest.fail(f"CI must run the browser tests: {missing}")
        pytest.skip(missing)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {app.name: app for app in space_apps(build_data(tmp_path_factory.mktemp("spaces-data")))}


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("CONVOHUB_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Visit:
    """One browser tab on a launched Space, recording every console error and uncaught page error."""

    def __init__(self, browser: Any, url: str, *, until_idle: bool = True) -> None:
        """Open ``url`` and wait until the network is idle; ``until_idle=False`` waits for the load event only,
        for a page that keeps a stream open (the ProMISe page holds Gradio's ``/gradio_api/heartbeat`` request
        open, so its network never goes idle); the clicks and waits that follow still wait for their elements."""
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        self.page.wait_for_load_state("networkidle" if until_idle else "load")

    def click(self, button: str) -> None:
        self.page.get_by_role("button", name=button, exact=True).first.click()

    def text_of(self, label: str, timeout: float | None = None) -> str:
        """The value of the textbox labelled ``label``, once it is non-empty (``timeout`` in ms: the page's
        default when None)."""
        box = self.page.get_by_label(label, exact=True)
        self.page.wait_for_function("el => el.value.trim().length > 0", arg=box.element_handle(), timeout=timeout)
        return box.input_value()

    def bars(self, elem_id: str, first_has_height: bool = True) -> int:
        """How many bars the chart with ``elem_id`` drew (Vega draws each as a path of a ``mark-rect`` group),
        once the first is drawn; visible means it has a height (a bar of value 0 has none)."""
        bar = self.page.locator(f"#{elem_id} g.mark-rect path")
        bar.first.wait_for(state="visible" if first_has_height else "attached")
        return bar.count()

    def finish(self, shots: Path, name: str) -> None:
        self.page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
        self.page.close()
        assert not self.errors, f"{name}: console errors {self.errors}"


def test_corpus_space_filters_and_charts_counts(browser: Any, apps: dict[str, Any], shots: Path) -> None:
    with serve(apps["corpus"]) as (url, app):
        visit = Visit(browser, url)
        rows, _, _ = app.browse(app.ALL, app.ALL)  # what the page must show
        conversations = app._conversations()
        by_country, by_language = count_frame(conversations["country"], "country"), count_frame(
            conversations["language"], "language")
        total = conversations.num_rows
        assert by_country["count"].sum() == by_language["count"].sum() == total >= len(rows) > 0
        visit.page.get_by_label("language", exact=True).click()  # the dropdown offers the split's languages
        for language in by_language["language"]:
            visit.page.get_by_role("option", name=language, exact=True).wait_for()
        visit.page.keyboard.press("Escape")
        visit.click("Filter")  # default filters: every country and language
        visit.page.get_by_text(rows[0][0], exact=True).first.wait_for(state="attached")  # the table filled
        assert visit.bars("country-chart") == len(by_country)
        assert visit.bars("language-chart") == len(by_language)
        visit.finish(shots, "corpus")


def test_reqap_space_first_example_draws_the_tree(browser: Any, apps: dict[str, Any], shots: Path) -> None:
    with serve(apps["reqap"]) as (url, _):
        visit = Visit(browser, url)
        example = visit.page.locator("[data-testid='dataset-cell-0-1']")
        example.click()  # the first example fills persona and question
        assert visit.page.get_by_label("question", exact=True).input_value() == example.inner_text().strip()
        visit.click("Answer")
        answer = visit.text_of("answer")
        assert "failed" not in answer and answer.strip() not in {"null", "[]", '""'}
        picture = visit.page.locator("#tree-picture svg")
        picture.wait_for()
        operators = picture.locator("g.node text[font-weight='bold']").all_text_contents()
        assert len(operators) >= 2 and "RETRIEVE" in operators  # a drawn tree, down to its data access
        assert visit.page.locator("#tree-picture svg line").count() == len(operators) - 1  # a tree: n-1 edges
        visit.finish(shots, "reqap")


def test_wildfeedback_space_labels_and_charts_the_judge(browser: Any, apps: dict[str, Any], shots: Path) -> None:
    with serve(apps["wildfeedback"]) as (url, _):
        visit = Visit(browser, url)
        visit.click("Label")  # the example conversation is the textbox's default
        assert "DSAT: True" in visit.text_of("produced by")
        marks = visit.page.locator("#feedback-marks .token.highlighted")  # the user turns marked SAT / DSAT
        marks.first.wait_for()
        assert marks.count() == 2
        visit.page.get_by_role("tab", name="Base vs aligned").click()
        visit.click("Compare")
        assert visit.text_of("base model") and visit.text_of("aligned model")
        assert visit.bars("verdict-chart", first_has_height=False) == 3  # aligned better (0 here), tie, base better
        visit.page.get_by_text("convohub-lexical-judge").first.wait_for()
        visit.finish(shots, "wildfeedback")


def test_crychic_space_draws_the_reconstructed_tree_beside_the_gold_one(browser: Any, apps: dict[str, Any],
                                                                        shots: Path) -> None:
    with serve(apps["crychic"]) as (url, app):
        visit = Visit(browser, url)
        first = app.conversations()[0]
        gold = app._conversations()[first].gold
        visit.page.get_by_label("conversation", exact=True).click()  # pick a test conversation
        visit.page.get_by_role("option", name=first, exact=True).click()
        assert visit.text_of("conversation text (User: / Assistant: lines, or JSON)").startswith("User: ")
        visit.click("Reconstruct")
        for elem_id in ("tree-picture", "gold-picture"):
            boxes = visit.page.locator(f"#{elem_id} svg g.node")
            boxes.first.wait_for()  # the drawing, not a loading icon
            assert boxes.count() == len(gold)  # one box per turn
        edges = visit.page.locator("#gold-picture svg line").count()
        assert edges == len(gold) - gold.count(-1)  # the gold forest: one edge per non-root turn
        visit.page.get_by_text(f"turn {len(gold) - 1}, user (the prompt):").wait_for()  # the last prompt's history
        visit.finish(shots, "crychic")


def test_promise_space_plays_a_turn_and_charts_the_simulator(browser: Any, apps: dict[str, Any], shots: Path) -> None:
    with serve(apps["promise"]) as (url, _):
        visit = Visit(browser, url, until_idle=False)
        visit.click("Start")  # the example intent and first question are the textboxes' defaults
        choose = visit.page.get_by_role("button", name="Choose", exact=True).element_handle()
        visit.page.wait_for_function("el => el.disabled", arg=choose)  # no choice while the turn is written
        visit.page.get_by_text("SQ4", exact=True).first.wait_for(timeout=120_000)  # four suggestions (SmolLM2)
        # the turn's last output (the dialogue state) has arrived, so Choose continues this dialogue
        assert visit.text_of("dialogue state (JSON; the API's /choose takes it back)").startswith('{"intent"')
        visit.page.wait_for_function("el => !el.disabled", arg=choose)
        visit.page.get_by_label("none helps", exact=True).check()
        visit.click("Choose")
        # the first Choose loads the trained simulator: 30 s was not enough with the other test worker and a
        # release training on the same 2 cores
        assert visit.text_of("you vs the simulator", timeout=120_000).startswith("You chose: none helps.")
        assert visit.bars("simulator-chart", first_has_height=False) == 6  # one bar per choice
        visit.finish(shots, "promise")


def test_wildchat_aqa_space_ranks_and_charts_the_gold_weights(browser: Any, apps: dict[str, Any], shots: Path) -> None:
    with serve(apps["wildchat_aqa"]) as (url, app):
        question = app._explorer().questions[0]
        rows, _, request, evidence, _ = app.rank(question.question, "", "", "probe", "summary", None, 20)  # warm
        assert len(rows) == 10 and "queries" in request and evidence
        visit = Visit(browser, url)
        visit.click("Rank")  # the first question, PROBE over the summaries
        visit.page.get_by_text(request["fallback"] or request["queries"][0]).first.wait_for()  # the request, as used
        visit.page.get_by_text(evidence[0][4]).first.wait_for(state="attached")  # the evidence table filled
        assert visit.bars("gold-chart", first_has_height=False) == 10  # one bar per option
        body = visit.page.inner_text("body")
        assert all(row[1] in body for row in rows) and evidence[0][1] in body
        visit.finish(shots, "wildchat_aqa")


@pytest.mark.parametrize("metric", METRICS)
def test_metric_space_scores_and_charts(metric: str, browser: Any, apps: dict[str, Any], shots: Path) -> None:
    with serve(apps[f"metric-{metric}"]) as (url, _):
        visit = Visit(browser, url)
        if metric == "checklist_judge":  # its example names SmolLM2 (slow here): the stand-in for plumbing
            kwargs = visit.page.get_by_label("keyword arguments (JSON object)", exact=True)
            kwargs.fill(json.dumps({**json.loads(kwargs.input_value()), "judge_model": "lexical"}))
        visit.click("Submit")  # the example inputs are the textboxes' defaults
        assert visit.bars("score-chart") >= 1
        scores = visit.page.locator(".json-holder, .json-node").first
        scores.wait_for()
        assert any(ch.isdigit() for ch in scores.inner_text())
        visit.finish(shots, f"metric-{metric}")
