"""The release's WildChat-AQA evaluation: every method side by side, in the layout of the paper's Table 3.

:func:`evaluate_release` runs random, BM25 and cosine ranking, then the LLM with no context, with RAG's, with
PROBE's and with the gold supports' context (ORACLE) on the built folder's questions, adds the fine-tuned
model's row when the release trained it (its evaluation step's JSON, ``aqa_causal_lm_eval_path``), writes
``results.json`` and the card section ``results.md`` into the work folder, and puts the section into the
dataset card (between markers, replaced on a re-run; the folder is pushed again when the release pushes).

The LLM is the release's (``ctx.chat_llm()``): a configured endpoint, else SmolLM2-135M-Instruct. A local
model answers with the ``likelihood`` answerer and writes PROBE's requests with the small prompt; an
endpoint answers with the paper's prompt and writes requests with the paper's prompt
(:mod:`convohub.aqa.methods`). With the offline model the release also measures how the two generating
answerers fare on the same no-context questions (parse rates), since SmolLM2 does not follow them.

Offline sizes (chosen for the release budget: this evaluation with the fine-tune at most ~2.5 minutes on
two CPU cores): the first :data:`TINY_QUESTIONS` questions, summaries only, k 20, a 192-token prompt; the
paper profile evaluates every question on raw conversations and summaries with the paper's k and budgets.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convohub.aqa.evaluation import AQARunner, Setting
from convohub.aqa.methods import default_answerer
from convohub.llm.choices import local_model
from convohub.metrics.ndcg import DEFAULT_NDCG_K

TINY_QUESTIONS = 32
#: Questions of the offline check of the generating answerers, and the paper prompt's new tokens (it writes
#: an explanation first).
PROMPT_CHECK_QUESTIONS = 8
PAPER_PROMPT_TOKENS = 64
SECTION_START = "<!-- convohub:wildchat-aqa-results -->"
SECTION_END = "<!-- /convohub:wildchat-aqa-results -->"
RESULTS_FILE = "results.json"
SECTION_FILE = "results.md"


def settings(*, contexts: Sequence[str], answerer: str, probe_prompt: str) -> list[Setting]:
    """The rows of the table, in the paper's order."""
    rows = [Setting("random"), Setting("bm25"), Setting("cosine"), Setting("no-context", answerer=answerer)]
    for context in contexts:
        rows += [Setting("rag", context=context, answerer=answerer),
                 Setting("probe", context=context, answerer=answerer, probe_prompt=probe_prompt)]
    rows += [Setting("oracle", context=context, answerer=answerer) for context in contexts]
    return rows


def run_all(runner: AQARunner, rows: Sequence[Setting], log: Any = print) -> list[dict[str, Any]]:
    out = []
    for setting in rows:
        results, _ = runner.evaluate(setting)
        log(f"{setting.label}: NDCG@10 {results['ndcg@10']:.4f} ({results['seconds']} s)")
        out.append(results)
    return out


def prompt_checks(runner: AQARunner, log: Any = print) -> list[dict[str, Any]]:
    """The offline model with the generating answerers on no-context questions: their parse rates."""
    head = AQARunner(runner.dataset_dir, backend=runner.backend, questions=runner.questions[:PROMPT_CHECK_QUESTIONS],
                     seed=runner.seed)
    small, _ = head.evaluate(Setting("no-context", answerer="small"))
    paper, _ = head.evaluate(Setting("no-context", answerer="paper", max_new_tokens=PAPER_PROMPT_TOKENS))
    paper["max_new_tokens"] = PAPER_PROMPT_TOKENS
    out = [small, paper]
    for r in out:
        log(f"{r['label']}: parse rate {r['parse_rate']:.2%} on {r['questions']} questions")
    return out


def _fine_tuned_row(path: Path | None) -> dict[str, Any] | None:
    from convohub.hub import read_json

    if path is None or not Path(path).is_file():
        return None
    results = read_json(Path(path))
    main = results["answerers"][0]
    after = results["after"][main]
    return {"method": "fine-tuned", "label": f"fine-tuned ({results['context']}) / no-context / {main}",
            "context": results["context"], "answerer": main, "questions": results["questions"],
            "model": "this release's fine-tuned model", "base_model": results["base_model"],
            "beats_base": results["beats_base"], **{f"ndcg@{k}": after[f"ndcg@{k}"] for k in DEFAULT_NDCG_K},
            **({"input_tokens": after["input_tokens"]} if "input_tokens" in after else {})}


# ------------------------------------------------------------------------------------------------ card
_NAMES = {"random": "Random", "bm25": "BM25", "cosine": "Cosine Sim", "no-context": "no context",
          "fine-tuned": "Finetune", "rag": "RAG", "probe": "PROBE", "oracle": "Oracle (ORACLE: gold supports)"}


def _cell(value: Any) -> str:
    return "-" if value is None else (f"{value:.4f}" if isinstance(value, float) else str(value))


def card_section(results: Mapping[str, Any]) -> str:
    """The dataset card's results section: Table 3's layout, then the answerers' parse rates and PROBE's
    request statistics, then what produced the numbers."""
    from convohub.hub import markdown_table

    header = ["model", "context", "method", *[f"NDCG@{k}" for k in DEFAULT_NDCG_K], "input tokens (M)",
              "parse rate", "Recall@k"]
    rows = []
    for r in results["rows"]:
        text = r["method"] in ("random", "bm25", "cosine")
        recall = [k for k in r if k.startswith("recall@")]
        rows.append([_NAMES[r["method"]] if text else results["model"], "-" if text else (r.get("context") or "-"),
                     "-" if text else _NAMES[r["method"]], *[r[f"ndcg@{k}"] for k in DEFAULT_NDCG_K],
                     f"{r['input_tokens'] / 1e6:.4f}" if r.get("input_tokens") else "-",
                     _cell(r.get("parse_rate")), f"{r[recall[-1]]:.4f} (k={recall[-1].split('@')[1]})" if recall
                     else "-"])
    lines = ["## Results (measured by `convohub release`)", "",
             f"{results['questions']} questions of `questions/test`, answered by `{results['model']}` with the "
             f"`{results['answerer']}` answerer (prompt budget {results['budget']} tokens counted with "
             f"{results['tokenizer']}; RAG and PROBE retrieve k={results['k']} conversations; PROBE's requests "
             f"written with the {results['probe_prompt']} prompt, {results['pooling']} pooling). Layout of the "
             "paper's Table 3; Recall@k of the retrieved conversations against the gold supports.", "",
             markdown_table(header, rows), ""]
    if results.get("prompt_checks"):
        checks = [[c["answerer"], c["questions"], _cell(c["parse_rate"]), _cell(c["complete_rate"]),
                   c["ndcg@10"]] for c in results["prompt_checks"]]
        lines += ["The same model with the generating answerers, no context (how often its answer could be read):",
                  "", markdown_table(["answerer", "questions", "parse rate", "complete rankings", "NDCG@10"], checks),
                  ""]
    for r in results["rows"]:
        if "probe" in r:
            s = r["probe"]
            lines.append(f"PROBE ({r['context']}): {s['json_valid']}/{s['requests']} requests were JSON; "
                         f"{s['request_fallbacks']} searched with the question alone, {s['query_fallbacks']} queries "
                         f"replaced by the question, {s['date_fallbacks']} dates replaced by the default, "
                         f"{s['unknown_filter_values']} filter values unknown to the corpus "
                         f"({'dropped' if r['probe_prompt'] == 'small' else 'matching nothing'}), {s['empty_results']} "
                         "requests retrieved nothing.")
    lines += ["", "Reproduce a row with `convohub aqa evaluate --method METHOD --context CONTEXT`; score a submission "
              "with `convohub evaluate wildchat-aqa SUBMISSION.jsonl`."]
    return "\n".join(lines).rstrip() + "\n"


def insert_section(card: Path, section: str) -> None:
    """Put ``section`` into a card between the convohub markers, replacing an earlier one."""
    from convohub.hub import atomic_write_text

    text = Path(card).read_text(encoding="utf-8")
    block = f"{SECTION_START}\n{section.rstrip()}\n{SECTION_END}"
    pattern = re.compile(re.escape(SECTION_START) + r".*?" + re.escape(SECTION_END), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    atomic_write_text(Path(card), text)


# ------------------------------------------------------------------------------------------------ release
def evaluate_release(ctx: Any, dataset_dir: Path) -> dict[str, Any]:
    """Run the methods the release reports on ``dataset_dir`` and write the results JSON and the card section
    (module doc). Returns the release artifacts: ``aqa_results_path``, ``aqa_results_section_path`` and the
    headline NDCG@10 of each LLM method."""
    from convohub.aqa.model_specs import SPEC
    from convohub.hub import atomic_write_text, dump_json, push_folder

    started = time.perf_counter()
    tiny = ctx.profile == "tiny"
    backend = ctx.chat_llm()
    local = local_model(backend) is not None
    answerer = default_answerer(backend)
    probe_prompt = "small" if local else "paper"
    contexts = ("summary",) if tiny else ("raw", "summary")
    runner = AQARunner(dataset_dir, backend=backend, limit=TINY_QUESTIONS if tiny else None, seed=ctx.seed)
    rows = run_all(runner, settings(contexts=contexts, answerer=answerer, probe_prompt=probe_prompt), ctx.log)
    checks = prompt_checks(runner, ctx.log) if local else []
    fine_tuned = _fine_tuned_row(ctx.artifacts.get(SPEC.artifact("eval_path")))
    if fine_tuned is not None:
        rows.insert(4, fine_tuned)
    llm_row = next(r for r in rows if r["method"] == "rag")
    results: dict[str, Any] = {
        "dataset": str(dataset_dir), "profile": ctx.profile, "questions": len(runner.questions),
        "model": backend.model_id, "answerer": answerer, "probe_prompt": probe_prompt, "pooling": "max",
        "budget": llm_row["budget"], "k": llm_row["k"], "tokenizer": llm_row["tokenizer"], "rows": rows,
        "prompt_checks": checks,
    }
    results["seconds"] = round(time.perf_counter() - started, 1)
    folder = ctx.scratch("aqa")
    path, section_path = folder / RESULTS_FILE, folder / SECTION_FILE
    atomic_write_text(path, dump_json(results))
    section = card_section(results)
    atomic_write_text(section_path, section)
    insert_section(Path(dataset_dir) / "README.md", section)
    if ctx.target.push:
        push_folder(Path(dataset_dir), ctx.target, "dataset", Path(dataset_dir).name)
    headline = {f"aqa_ndcg@10_{r['method']}_{r.get('context') or 'none'}": r["ndcg@10"] for r in rows
                if r["method"] in ("no-context", "rag", "probe", "oracle")}
    return {"aqa_results_path": path, "aqa_results_section_path": section_path, **headline}
