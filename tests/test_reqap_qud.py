"""ReQAP's QUD decomposer: the example bank, the recursion and its guards (scripted backend), rejection of
invalid LLM outputs, the ICL prompt, SFT data, distillation, a real `transformers serve` endpoint, and a
tiny SFT model trained end to end, evaluated and published."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path

import pytest
from _serving import served_fixture, tiny_causal_fixture  # noqa: F401  (pytest fixtures)

from convohub.hub import HubTarget, read_card
from convohub.llm import ChatBackend, ChatRequest, ChatResponse
from convohub.perqa import PerQAConfig, build_perqa, generate_perqa
from convohub.perqa.templates import TEMPLATES
from convohub.reqap import EventStore, Executor, OracleRetriever, parse_tree, placeholders
from convohub.reqap.components.qud import (
    INSTRUCTION,
    ICLDecomposer,
    RecursiveDecomposer,
    SFTDecomposer,
    history_messages,
    load_examples,
    parse_step,
    step_chains,
)
from convohub.reqap.data.perqa import load_questions
from convohub.reqap.data.qud import OFFLINE_SOURCE, distill_pairs, offline_pairs, read_pairs, write_pairs
from convohub.reqap.engine.errors import TreeSyntaxError
from convohub.reqap.engine.parse import OPERATORS, Placeholder

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "training" / "reqap_qud" / "train_reqap_qud.py"


def asked(request: ChatRequest) -> str:
    """The (sub-)question the last user turn asks about."""
    node = parse_tree(request.messages[-1]["content"].split("Input: ", 1)[1])
    assert isinstance(node, Placeholder)
    return node.question


class Scripted(ChatBackend):
    """Answers each request with ``answer(question, request index in its batch)``; records every request."""

    kind = "scripted"

    def __init__(self, answer: Callable[[str, int], str]) -> None:
        self.answer = answer
        self.requests: list[ChatRequest] = []

    @property
    def model_id(self) -> str:
        return "scripted"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.requests += requests
        return [ChatResponse(text=self.answer(asked(r), i), finish_reason="stop") for i, r in enumerate(requests)]


class Plain(RecursiveDecomposer):
    def messages(self, chain, question):
        return history_messages(chain, question)


@pytest.fixture(scope="module")
def examples():
    return load_examples()


# -- example bank -------------------------------------------------------------------------------------------
def test_example_bank_parses_and_covers_every_operator(examples) -> None:
    assert 40 <= len(examples) <= 60
    ops = set()
    for ex in examples:
        tree = parse_tree(ex.tree)
        assert placeholders(tree) == [], ex.question
        chains = step_chains(ex.step_map, ex.question)
        assert [inp for _, inp, _ in chains] == [inp for inp, _ in ex.steps], ex.question  # dialogue order
        for chain, inp, out in chains:
            node = parse_step(out)
            ops.add(node.op)
            if chain:  # the parent asked for exactly this sub-question
                assert inp in placeholders(parse_tree(chain[-1][1]))
    assert ops == set(OPERATORS) - {"SELECT"}
    # worded on their own: no example question is an instance of a PerQA template
    from convohub.reqap.data.gold import _pattern

    patterns = [_pattern(t.question) for t in TEMPLATES]
    assert not [ex.question for ex in examples if any(p.match(ex.question) for p in patterns)]


def test_bad_example_file_names_the_example(tmp_path: Path) -> None:
    bad = tmp_path / "bank.yaml"
    bad.write_text("- question: q\n  steps:\n    - ['q', 'APPLY(l=QU(\"x\"), fct=len)']\n    - ['x', 'os.system(1)']\n")
    with pytest.raises(ValueError, match=r"example 0 \('q'\) step 1: output does not parse"):
        load_examples(bad)


# -- the recursion ------------------------------------------------------------------------------------------
def test_recursion_rebuilds_an_example_tree(examples) -> None:
    ex = next(e for e in examples if "JOIN" in e.tree and "UNNEST" not in e.tree)
    backend = Scripted(lambda q, i: ex.step_map[q])
    dec = ICLDecomposer(backend, examples, n_options=1)
    trees = list(dec.candidates(ex.question))
    assert trees == [ex.tree]
    assert dec.stats.llm_calls == len(ex.step_map) and dec.stats.parsed == len(ex.step_map)
    # context = ancestor turns only: the second branch of the JOIN never sees the first branch's turns
    join_step = next((c, i, o) for c, i, o in ex.chains if o.startswith("JOIN"))
    right = placeholders(parse_tree(join_step[2]))[1]
    req = next(r for r in backend.requests if asked(r) == right)
    history = req.messages[-(2 * (len(join_step[0]) + 1) + 1):]
    assert history == history_messages((*join_step[0], (join_step[1], join_step[2])), right)


def test_alternatives_form_a_lazy_product_in_order() -> None:
    def answer(q: str, i: int) -> str:
        if q == "root":
            return 'JOIN(l1=QU("a"), l2=QU("b"), condition="i1.start_date == i2.start_date")'
        return f'RETRIEVE(query="{q}{i}")'

    backend = Scripted(answer)
    dec = Plain(backend, n_options=3)
    it = dec.candidates("root")
    first = next(it)
    assert 'query="a0"' in first and 'query="b0"' in first
    calls_for_first = dec.stats.llm_calls
    rest = list(it)
    assert len(rest) == 8  # 1 root option x 3 x 3 child options
    order = [(t.split('query="')[1][:2], t.split('query="')[2][:2]) for t in [first, *rest]]
    assert order == [(f"a{i}", f"b{j}") for i in range(3) for j in range(3)]
    assert calls_for_first == dec.stats.llm_calls == 3 * 3  # root + a + b, 3 requests each, memoised
    assert [r.temperature for r in backend.requests[:3]] == [0.0, 0.7, 0.7]  # first greedy, then sampled
    assert len({r.seed for r in backend.requests[1:3]}) == 2


def test_guards_repeat_depth_and_tree_cap() -> None:
    repeat = Plain(Scripted(lambda q, i: 'FILTER(l=QU("same"), filter=lambda attr: True)'))
    assert list(repeat.candidates("same")) == []
    assert repeat.stats.repeated == 1 and repeat.stats.trees == 0

    deeper = Plain(Scripted(lambda q, i: f'FILTER(l=QU("{q} more"), filter=lambda attr: True)'), max_depth=8)
    assert list(deeper.candidates("q")) == []
    assert deeper.stats.too_deep == 1 and deeper.stats.llm_calls == 9  # levels 0..8 asked, 9th dropped

    def wide(q: str, i: int) -> str:
        return ('JOIN(l1=QU("a"), l2=QU("b"), condition="i1.start_date == i2.start_date")' if q == "root"
                else f'RETRIEVE(query="{q}{i}")')

    capped = Plain(Scripted(wide), n_options=5, max_trees=7)
    assert len(list(capped.candidates("root"))) == 7
    assert capped.stats.capped == 1 and capped.stats.trees == 7


def test_a_step_that_only_repeats_its_chain_is_resampled() -> None:
    loop = 'FILTER(l=QU("runs"), filter=lambda attr: True)'

    def answer(request: ChatRequest) -> str:
        # greedy: the sub-question is answered with the step that asked it; sampled (seed 3): a RETRIEVE
        if asked(request) == "runs" and request.temperature > 0 and request.seed == 3:
            return 'RETRIEVE(query="I went running")'
        return loop

    class BySeed(Scripted):
        def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
            self.requests += requests
            return [ChatResponse(text=answer(r), finish_reason="stop") for r in requests]

    plain = Plain(BySeed(answer), resample=0)
    assert list(plain.candidates("runs")) == [] and plain.stats.resampled == 0
    backend = BySeed(answer)
    dec = Plain(backend, resample=3, seed=0)
    assert list(dec.candidates("runs")) == ['FILTER(l=RETRIEVE(query="I went running"), filter=lambda attr: True)']
    # the root's greedy step is fine; its child repeated it, so the child was re-asked with seeds 1, 2, 3
    assert dec.stats.resampled == 3 and [r.seed for r in backend.requests[2:]] == [1, 2, 3]
    assert all(r.temperature == 0.7 for r in backend.requests[2:]) and dec.describe()["resample"] == 3
    # a step with no valid option at all is not re-asked (its options were rejected, not repeated)
    broken = Plain(Scripted(lambda q, i: "not an operator"), resample=3)
    assert list(broken.candidates("runs")) == [] and broken.stats.resampled == 0
    # a step that never runs out of repeats stops after ``resample`` re-asks
    stuck = Plain(Scripted(lambda q, i: loop), resample=2)
    assert list(stuck.candidates("runs")) == [] and stuck.stats.resampled == 2


def test_no_model_call_is_started_that_would_end_past_the_deadline() -> None:
    """A step's batched call cannot be interrupted: once the calls before it say the next one would end past
    the question's deadline, the decomposer raises instead of starting it (the pipeline's budget holds)."""
    import time
    from functools import partial

    from convohub.reqap.engine.errors import BudgetExceeded
    from convohub.reqap.engine.executor import REFERENCE_DATE
    from convohub.reqap.engine.pace import refuse_past

    def answer(q: str, i: int) -> str:
        return 'APPLY(l=QU("my runs"), fct=len)' if q == "how many runs?" else 'RETRIEVE(query="I went running")'

    class Slow(Scripted):
        def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
            time.sleep(0.2)
            return super().chat(requests)

    backend = Slow(answer)
    dec = Plain(backend)
    started = time.monotonic()
    # the first call takes 0.2 s or more (more on a loaded machine), so its pace says a second would not fit
    with pytest.raises(BudgetExceeded, match=r"decoding the QUD step of 'my runs' \(1 requests\) would take about "
                                             r"\d+\.\d s, 0\.[01] s are left"):
        list(dec.candidates("how many runs?", check_time=partial(refuse_past, started + 0.3)))
    assert len(backend.requests) == 1 and dec.stats.timed_out == 1
    # no time check: both steps are asked; the memo keeps the root step, so a later call asks only the child
    assert list(dec.candidates("how many runs?")) == ['APPLY(l=RETRIEVE(query="I went running"), fct=len)']
    assert len(backend.requests) == 2
    # a deadline already past stops even the first call of a fresh decomposer
    fresh = Plain(Slow(answer))
    with pytest.raises(BudgetExceeded):
        list(fresh.candidates("how many runs?", check_time=partial(refuse_past, time.monotonic() - 1)))
    assert fresh.backend.requests == []

    # the pipeline hands its time check over and reports the stop as its own time-out
    from convohub.reqap.components.pipeline import ReQAP

    store = EventStore([])  # never reached: decoding stops first
    slow = ReQAP(Plain(Slow(answer)), budget_s=0.3)
    result = slow.answer("how many runs?", store, REFERENCE_DATE)
    assert result.error.startswith("TimeoutError: time budget of 0.3 s exceeded (decoding the QUD step of 'my runs'")
    assert result.tried == [] and result.seconds < 0.3


def test_rejected_outputs_are_counted_and_never_executed() -> None:
    outputs = ['__import__("os").system("touch /tmp/pwned")', 'RETRIEVE(query="x"); import os',
               'APPLY(l=RETRIEVE(query="nested"), fct=len)', 'APPLY(l=QU("runs"), fct=lambda l: open("f"))',
               'QU("only a placeholder")', 'APPLY(l=QU("runs"), fct=len)']

    def answer(q: str, i: int) -> str:
        return outputs[i] if q == "how many runs?" else 'RETRIEVE(query="I went running")'

    dec = Plain(Scripted(answer), n_options=len(outputs))
    trees = list(dec.candidates("how many runs?"))
    assert trees == ['APPLY(l=RETRIEVE(query="I went running"), fct=len)']
    assert dec.stats.rejected == 5 and dec.stats.outputs == len(outputs) + len(outputs)
    assert sum(dec.stats.rejected_reasons.values()) == 5
    retriever = OracleRetriever({"I went running": ["1"]})
    store = EventStore.from_records([{"id": "1", "start_date": "2024-11-01", "event_type": "workout",
                                      "event_data": {"workout_type": "running"}}])
    assert Executor(store, retriever).execute(trees[0]).answer == 1
    assert retriever.calls == ["I went running"]  # only the accepted tree reached the engine
    with pytest.raises(TreeSyntaxError):
        parse_step(outputs[0])


def test_icl_prompt_structure(examples) -> None:
    backend = Scripted(lambda q, i: 'RETRIEVE(query="I did a workout")')
    dec = ICLDecomposer(backend, examples, n_options=1)
    messages = dec.messages((), "How many times did I go swimming in 2022?")
    assert messages[0] == {"role": "system", "content": INSTRUCTION}
    starts = [m for m in messages if m["role"] == "user" and m["content"].startswith("Starting with new question")]
    assert len(starts) == 9  # 8 example dialogues + the question
    chosen = dec.select((), "How many times did I go swimming in 2022?")
    assert len(chosen) == 8 and "swimming" in chosen[-1].question  # most similar closest to the question
    assert messages[-1]["content"].endswith('{{ QU(question="How many times did I go swimming in 2022?") }}')


def test_sft_decomposer_drops_oldest_turns() -> None:
    backend = Scripted(lambda q, i: 'RETRIEVE(query="x")')
    dec = SFTDecomposer(backend, max_input_tokens=60)
    chain = tuple((f"question number {i} " * 3, f'RETRIEVE(query="q{i}")') for i in range(6))
    messages = dec.messages(chain, "current sub-question")
    assert 1 < len(messages) < 2 * len(chain) + 1
    assert messages[-1]["content"] == 'Input: {{ QU(question="current sub-question") }}'
    assert messages[-2]["content"] == 'RETRIEVE(query="q5")'  # newest turns kept
    assert dec.max_new_tokens == 200 and [r.temperature for r in dec.requests(messages)] == [0.0]


# -- data ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory) -> Path:
    data = generate_perqa(PerQAConfig(n_personas=4, start_date=date(2024, 6, 1)))
    return build_perqa(HubTarget(tmp_path_factory.mktemp("hub")), ROOT, data=data)


def test_offline_pairs_are_gold_steps_deduplicated_and_deterministic(dataset_dir, tmp_path) -> None:
    pairs, stats = offline_pairs(dataset_dir)
    again, _ = offline_pairs(dataset_dir)
    assert pairs == again and stats["source"] == OFFLINE_SOURCE
    assert len({p.key() for p in pairs}) == len(pairs) < stats["steps_before_dedupe"]
    assert {p.source.split(":")[0] for p in pairs} == {"gold", "example"}
    for p in pairs:
        parse_step(p.output)
        if p.chain:
            assert p.input in placeholders(parse_tree(p.chain[-1][1]))
        assert p.prompt()[0]["content"].startswith("Starting with new question")
    path = write_pairs(pairs, tmp_path / "pairs.jsonl", stats)
    assert read_pairs(path) == pairs


def test_distillation_keeps_the_best_trees_and_counts_failures(dataset_dir) -> None:
    from convohub.reqap.data.gold import decompose, gold_tree

    questions = [q for q in load_questions(dataset_dir, "train") if gold_tree(q)][:4]
    gold_steps = {}
    for q in questions:
        gold_steps.update(decompose(gold_tree(q), q))

    def answer(q: str, i: int) -> str:  # option 0: a wrong tree shape; option 1: the gold step
        return 'RETRIEVE(query="I listened to a song")' if i == 0 else gold_steps.get(q, "garbage(")

    dec = ICLDecomposer(Scripted(answer), load_examples(), n_options=2)
    pairs, stats = distill_pairs(dec, dataset_dir, ("train",), max_questions=4, max_trees_per_question=5)
    kept = {k: v for k, v in stats.items() if k.startswith("kept_")}
    assert stats["questions"] == 4 and sum(kept.values()) + stats.get("no_tree", 0) + stats.get(
        "no_tree_ran", 0) == 4
    assert pairs and all(p.source.startswith("icl:") for p in pairs)
    assert stats["decomposer_stats"]["rejected"] == 0

    garbage = ICLDecomposer(Scripted(lambda q, i: "I am not an operator"), load_examples(), n_options=1)
    pairs, stats = distill_pairs(garbage, dataset_dir, ("dev",), max_questions=3)
    assert pairs == [] and stats["no_tree"] == 3 and stats["decomposer_stats"]["rejected"] == 3


def test_distill_cli_writes_pairs_from_the_teacher(dataset_dir, tmp_path, monkeypatch, capsys) -> None:
    import convohub.llm
    from convohub.cli import main
    from convohub.reqap.data.gold import decompose, gold_tree

    steps = {}
    for q in [q for q in load_questions(dataset_dir, "train") if gold_tree(q)][:3]:
        steps.update(decompose(gold_tree(q), q))
    teacher = Scripted(lambda q, i: steps.get(q, "garbage("))
    monkeypatch.setattr(convohub.llm, "make_backend", lambda spec, **kw: teacher)
    out = tmp_path / "pairs.jsonl"
    assert main(["reqap", "distill", "--dataset", str(dataset_dir), "--out", str(out), "--splits", "train",
                 "--llm", "scripted", "--options", "1", "--max-questions", "3", "--retrieve-out",
                 str(tmp_path / "retrieve")]) == 0
    printed = capsys.readouterr().out
    # RETRIEVE examples from the kept trees' calls, gold events from the questions' SQL (no gold-tree oracle)
    events = [json.loads(line) for line in (tmp_path / "retrieve" / "events.jsonl").read_text().splitlines()]
    retrieve_stats = json.loads((tmp_path / "retrieve" / "stats.json").read_text())
    assert retrieve_stats["questions"] == 3 and retrieve_stats.get("calls_used", 0) >= 1, retrieve_stats
    assert {e["label"] for e in events} == {0, 1} and "RETRIEVE examples:" in printed
    assert "3 questions: kept {'kept_hit': 3}" in printed and teacher.requests
    pairs = read_pairs(out)
    assert pairs and all(p.source == "icl:hit" for p in pairs)
    assert json.loads(out.with_name("pairs.jsonl.stats.json").read_text())["kept_hit"] == 3
    monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
    assert main(["reqap", "distill", "--dataset", str(dataset_dir), "--out", str(out)]) == 2
    assert "--llm smollm2" in capsys.readouterr().err


def test_retrieval_sql_keeps_the_table_and_its_non_temporal_conditions() -> None:
    import duckdb

    from convohub.reqap.data.sql import retrieval_sql

    con = duckdb.connect()
    assert retrieval_sql(con, "SELECT COUNT(*) FROM workout WHERE workout_type = 'running' AND "
                              "YEAR(start_date) = 2023 ORDER BY 1 LIMIT 1") == \
        "SELECT id FROM workout WHERE (workout_type = 'running')"
    assert retrieval_sql(con, "SELECT movie_title, COUNT(*) c FROM movie_stream GROUP BY movie_title "
                              "ORDER BY c DESC LIMIT 1") == "SELECT id FROM movie_stream"
    assert retrieval_sql(con, "SELECT COUNT(*) FROM workout w JOIN trip t ON w.start_date >= t.start_date") is None
    assert retrieval_sql(con, "SELECT COUNT(*) FROM workout WHERE id IN (SELECT id FROM workout)") is None


# -- a real served model --------------------------------------------------------------------------------------
@pytest.mark.server
def test_icl_decomposer_against_transformers_serve(served: tuple[str, str], examples) -> None:
    from convohub.llm import EndpointBackend

    url, model = served
    endpoint = EndpointBackend(url, model, max_retries=1, timeout=60, backoff=(0.1, 0.5))
    shortest = sorted(examples, key=lambda e: len(e.search_text))[:1]
    dec = ICLDecomposer(endpoint, shortest, n_options=2, k_examples=1, max_new_tokens=24,
                        instruction="Answer with one operator call.")
    trees = list(dec.candidates("How many workouts did I do?"))  # the tiny random model writes garbage
    s = dec.stats
    assert s.llm_calls == 2 and s.outputs + s.failed_calls == s.llm_calls and s.outputs >= 1
    assert s.parsed + s.rejected == s.outputs and s.trees == len(trees)
    assert all(not placeholders(parse_tree(t)) for t in trees)


# -- tiny SFT end to end ----------------------------------------------------------------------------------------
#: The tiny recipe starts from SmolLM2; plumbing tests override it with the random data-built tiny Llama.
PLUMBING = ("--model_name_or_path", "convohub-tiny:causal", "--use_peft", "false", "--train_tokenizer_on_data",
            "true", "--grammar_tokens", "true", "--max_train_pairs", "48", "--max_steps", "-1",
            "--num_train_epochs", "1", "--tokenizer_vocab_size", "512", "--max_input_tokens", "200",
            "--max_length", "256", "--max_new_tokens", "40", "--tiny_hidden_size", "64", "--tiny_layers", "2",
            "--learning_rate", "2e-3")


@pytest.fixture(scope="module")
def sft_model(dataset_dir, tmp_path_factory) -> Path:
    """Trained the way the release trains it: the script launched under accelerate (release.SPEC.train)."""
    from convohub.reqap.release import qud as release

    out = tmp_path_factory.mktemp("qud-sft") / "model"
    return release.SPEC.train(ROOT, "tiny", dataset_dir, out, 0, extra=PLUMBING)


def test_sft_prompts_are_tokenized_alike_in_training_and_inference(sft_model) -> None:
    """The grammar's pieces are single tokens, and the chat prompt trl trains on (apply_chat_template,
    tokenized) is token for token the one TransformersBackend generates from (rendered text, re-encoded)."""
    from transformers import AutoTokenizer

    from convohub.cli import load_script

    tok = AutoTokenizer.from_pretrained(sft_model)
    units = load_script(SCRIPT).grammar_units()
    assert '{{ QU(question="' in units and "FILTER(l=" in units
    for unit in units:
        assert len(tok(unit, add_special_tokens=False)["input_ids"]) == 1, unit
    step = 'FILTER(l={{ QU(question="Which runs did I do?") }}, filter=lambda attr: attr[\'distance\'] > 5)'
    assert tok.decode(tok(step, add_special_tokens=False)["input_ids"]) == step
    messages = history_messages((("How many long runs did I do?", f"APPLY(l={Placeholder('x').text}, fct=len)"),),
                                "Which long runs did I do?")
    trained = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    trained = trained["input_ids"] if hasattr(trained, "keys") else trained
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert list(trained) == tok(text, add_special_tokens=False)["input_ids"]


def test_tiny_sft_model_drives_the_same_recursion(sft_model) -> None:
    from convohub.training.runs import saved_arguments

    results = json.loads((sft_model / "eval_results.json").read_text())
    assert results["train_pairs"] == 48 and results["data"]["source"] == OFFLINE_SOURCE
    assert results["peft"] is None and results["optimizer_steps"] == 6  # 48 pairs / batch 8, 1 epoch
    saved = saved_arguments(sft_model)  # the run's resolved arguments: recipe + the CLI overrides
    assert saved["script"]["max_input_tokens"] == 200 and saved["model"]["model_name_or_path"] == "convohub-tiny:causal"
    assert saved["training"]["seed"] == 0 and saved["training"]["output_dir"] == str(sft_model)
    assert (sft_model.parent / "model.log").is_file()  # run_recipe keeps the launch log beside the folder
    assert json.loads((sft_model / "qud_config.json").read_text()) == {"max_input_tokens": 200,
                                                                      "max_new_tokens": 40}
    dec = SFTDecomposer(sft_model, device="cpu", max_trees=3)
    assert dec.max_input_tokens == 200 and dec.max_new_tokens == 40
    trees = list(dec.candidates("How many workouts did I do in 2023?"))
    s = dec.stats
    assert s.llm_calls >= 1 and s.outputs == s.parsed + s.rejected and len(trees) <= 3
    assert all(not placeholders(parse_tree(t)) for t in trees)


def test_evaluate_and_card_report_measured_numbers(sft_model, dataset_dir, tmp_path) -> None:
    from convohub.reqap.data.qud import gold_steps
    from convohub.reqap.release import qud as release

    results = release.evaluate_with_base(sft_model, dataset_dir, "test", max_questions=4, max_trees=2)
    assert {"hit@1", "rlx_hit@1", "rlx_hit@1_20", "tree_exact_match", "step_exact_match", "first_step_exact_match",
            "parse_rate", "tree_rate", "questions", "questions_with_gold_tree", "gold_steps",
            "decomposer_stats", "generation_seconds"} <= set(results)
    assert results["questions"] == 4 and 0 <= results["parse_rate"] <= 1
    assert results["before"] is None  # the data-built random base is not kept: nothing to compare with
    assert results["training"]["train_pairs"] == 48

    # the measurement can score: a recursion answering with the gold steps reproduces every gold step and
    # tree, and batched prefetching leaves nothing for the per-question answers to generate
    questions = load_questions(dataset_dir, "test")
    step_of = {inp: out for q in questions for _, inp, out in gold_steps(q) or ()}
    backend = Scripted(lambda q, i: step_of.get(q, "no step"))
    oracle = release.evaluate(None, dataset_dir, "test", max_questions=None, decomposer=Plain(backend))
    assert oracle["questions_with_gold_tree"] > 0 and oracle["tree_exact_match"] == 1.0
    assert oracle["step_exact_match"] == oracle["first_step_exact_match"] == 1.0 and oracle["hit@1"] > 0
    assert oracle["decomposer_stats"]["llm_calls"] == len(backend.requests)
    rows = oracle["predictions"]  # per question: the Space picks its examples from these
    assert len(rows) == oracle["questions"] and {"persona_id", "question", "template_id", "tree"} <= set(rows[0])
    assert sum(r["hit"] for r in rows) == round(oracle["hit@1"] * len(rows))
    assert all(r["tree"] for r in rows if r["hit"])

    results["before"] = {**results, "hit@1": 0.0, "generation_seconds": 1.0}  # the card's before column
    folder = release.SPEC.publish(HubTarget(tmp_path / "hub"), ROOT, "tiny", sft_model, results)
    meta, body = read_card(folder / "README.md")
    metrics = {m["name"]: m["value"] for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert metrics["Hit@1"] == results["hit@1"] and metrics["Tree exact match"] == results["tree_exact_match"]
    assert metrics["Rlx-Hit@1"] == results["rlx_hit@1"] and metrics["Step exact match"] == results["step_exact_match"]
    assert OFFLINE_SOURCE in body and meta["license"] == "mit" and "base_model" not in meta
    assert "| base model (no training) | trained |" in body and "6 optimiser steps" in body
    assert not (folder / "training_args.json").exists()  # local paths of the run stay out of the repo
    assert release.SPEC.repo_name("paper").startswith("Llama") and release.SPEC.repo_name("paper_l").startswith("Llama")


def test_prefetch_generates_level_by_level_in_batches(examples) -> None:
    ex = next(e for e in examples if "JOIN" in e.tree)
    calls: list[int] = []

    class Counting(Scripted):
        def chat(self, requests):
            calls.append(len(requests))
            return super().chat(requests)

    dec = Plain(Counting(lambda q, i: ex.step_map.get(q, "no step")))
    other = "How many naps did I take?"
    generated = dec.prefetch([ex.question, other, ex.question])
    depth = max(len(chain) for chain, _, _ in ex.chains) + 1
    assert len(calls) == depth and calls[0] == 2  # one batched call per level; the root level holds both
    assert generated == sum(calls) == len(ex.step_map) + 1
    assert list(dec.candidates(ex.question)) == [ex.tree] and list(dec.candidates(other)) == []
    assert len(calls) == depth  # answering afterwards only reads the memo
    assert dec.proposed((), ex.question) == [ex.step_map[ex.question]] and dec.proposed((), "never asked") is None


@pytest.mark.slow
def test_qud_trains_from_smollm2_and_publishes_merged_weights(dataset_dir, tmp_path) -> None:
    """The real recipe (SmolLM2 + LoRA), cut to 1 step on 2 pairs, launched like the release launches it;
    the folder loads as a plain causal LM whose weights moved away from the base."""
    import torch
    from transformers import AutoModelForCausalLM

    from convohub.models import smollm2_path
    from convohub.reqap.release import qud as release

    out = release.SPEC.train(ROOT, "tiny", dataset_dir, tmp_path / "qud", 0,
                               extra=("--max_train_pairs", "2", "--max_steps", "1", "--per_device_train_batch_size",
                                      "2", "--warmup_steps", "0"))
    assert not (out / "adapter_config.json").exists()  # merged, not an adapter
    results = json.loads((out / "eval_results.json").read_text())
    assert results["optimizer_steps"] == 1 and results["peft"]["lora_r"] == 16 and results["base_model"] == "smollm2"
    assert release.base_model_path(out) == str(smollm2_path())
    trained = AutoModelForCausalLM.from_pretrained(out)
    base = AutoModelForCausalLM.from_pretrained(smollm2_path())
    name = "model.layers.0.self_attn.q_proj.weight"
    assert trained.state_dict()[name].shape == base.state_dict()[name].shape
    assert not torch.equal(trained.state_dict()[name], base.state_dict()[name])
    assert trained.generation_config.do_sample is False and trained.generation_config.max_new_tokens == 80


def test_qud_script_refuses_a_quantised_base(tmp_path: Path) -> None:
    """QUD's base may be built from the data and resized, so a QLoRA adapter could not be merged into it
    unquantised: the script says so before reading any data."""
    from convohub.cli import load_script

    recipe = ROOT / "training" / "reqap_qud" / "tiny.yaml"
    with pytest.raises(ValueError, match="QUD trains full or LoRA: --load_in_4bit"):
        load_script(SCRIPT).main(["--config", str(recipe), "--load_in_4bit", "true",
                                  "--output_dir", str(tmp_path / "out")])


def test_qud_script_refuses_fp16_on_float16_weights(tmp_path: Path) -> None:
    """The third script that loads causal LMs for training applies the same precision check as the other two."""
    from convohub.cli import load_script

    recipe = ROOT / "training" / "reqap_qud" / "tiny.yaml"
    with pytest.raises(ValueError, match="needs float32 master weights"):
        load_script(SCRIPT).main(["--config", str(recipe), "--dtype", "float16", "--fp16", "true",
                                  "--use_peft", "false", "--output_dir", str(tmp_path / "out")])


def test_resample_reaches_the_decomposer_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.cli import main
    from convohub.reqap.components.build import make_decomposer

    assert make_decomposer("icl", Scripted(lambda q, i: "x"), resample=2).resample == 2
    assert make_decomposer("icl", Scripted(lambda q, i: "x")).resample == 0  # the paper's guard alone
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make_decomposer("sft:/no/such/model", resample=1)
    with pytest.raises(ValueError, match="--resample must be >= 0"):
        make_decomposer("icl", Scripted(lambda q, i: "x"), resample=-1)
    with pytest.raises(SystemExit):
        main(["reqap", "evaluate", "--help"])
    assert "--resample N" in capsys.readouterr().out


def test_a_failed_backend_call_leaves_its_steps_to_be_asked_again() -> None:
    calls = {"n": 0}

    class FailsOnce(Scripted):
        def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
            calls["n"] += 1
            if calls["n"] == 1:
                raise KeyboardInterrupt("killed mid-call")
            return super().chat(requests)

    dec = Plain(FailsOnce(lambda q, i: 'RETRIEVE(query="I went running")'))
    with pytest.raises(KeyboardInterrupt):
        dec.options((), "runs")
    assert dec.proposed((), "runs") is None  # not memoised as "no options"
    assert [o.text for o in dec.options((), "runs")] == ['RETRIEVE(query="I went running")']
