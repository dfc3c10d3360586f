"""Registers WildFeedback (issue 6) as a release system: dataset -> SFT+DPO -> checklist-judge W/T/L ->
card -> Space, plus ``convohub wildfeedback label|build|evaluate``.

``convohub datasets build wildfeedback [--source DIR]``: with a source, the released files are normalised;
without, the pipeline runs on the sample corpus with the LLM from ``CONVOHUB_LLM_*`` (labelling,
summaries and expert responses) or the offline stand-ins. The feedback labeller is chosen, never silently:
``--llm rules`` -> the rules; a configured LLM -> that model; otherwise whichever of the rules and the local
SmolLM2 (split prompts answered by likelihood) agreed better with the hand-labelled set (measured in the build, cached under the
work dir; the card reports both). The on-policy variant additionally needs
``CONVOHUB_WILDFEEDBACK_POLICY`` (a model spec for :func:`convohub.llm.make_backend`, e.g. the folder of the
chat LM trained by ``convohub.corpus``) and a judge in ``CONVOHUB_WILDFEEDBACK_JUDGE`` (or the LLM).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from convohub.hub import read_json
from convohub.model_spec import ARTIFACT_KINDS, artifact_name
from convohub.registry import DatasetBuilder, Step, System, positive_int_setting
from convohub.scoring import Benchmark

POLICY_ENV = "CONVOHUB_WILDFEEDBACK_POLICY"
JUDGE_ENV = "CONVOHUB_WILDFEEDBACK_JUDGE"
USERS_ENV = "CONVOHUB_WILDFEEDBACK_USERS"
#: Overrides TINY_ON_POLICY_EPISODES (tests: a handful of episodes keep the on-policy path short).
ON_POLICY_EPISODES_ENV = "CONVOHUB_WILDFEEDBACK_ON_POLICY_EPISODES"
#: Tiny profile: test instances judged and answer length, sized so train + evaluate fit ~7 min on 2 cores.
TINY_EVAL_ITEMS, TINY_EVAL_NEW_TOKENS = 16, 48
#: Overrides the number of test instances judged (TINY_EVAL_ITEMS, or all of them in the paper profile).
EVAL_ITEMS_ENV = "CONVOHUB_WILDFEEDBACK_EVAL_ITEMS"
#: Tiny profile: training users' episodes the policy (SmolLM2) answers with and without the preferences, and
#: the length of those answers (~42 tokens/s batched on 2 cores: 2 x 96 x 64 tokens took ~5 min; 48 tokens keep
#: the main job within 45 minutes; 64 episodes gave 21 pairs and a DPO model barely above its base).
TINY_ON_POLICY_EPISODES, TINY_RESPONSE_NEW_TOKENS = 96, 48


def _backends(llm: Any, policy: Any = None, judge: Any = None, *, labeller: Any = "llm",
              labeller_style: str | None = None, summariser: Any = "llm", summariser_style: str = "full",
              moderator: Any = None) -> Any:
    """Which model does what; ``labeller`` and ``summariser`` default to ``llm`` (pass None for the rules, or
    another backend: the measured offline defaults may differ from the expert). ``policy`` and ``judge`` are
    model specs or backends (default: ``$CONVOHUB_WILDFEEDBACK_POLICY`` / ``_JUDGE``, the judge else the LLM);
    ``moderator`` defaults to the LLM, else the judge's model."""
    from convohub.llm import make_backend
    from convohub.wildfeedback.pipeline import Backends

    policy = policy or os.environ.get(POLICY_ENV) or None
    judge = judge or os.environ.get(JUDGE_ENV) or None
    judge_backend = (make_backend(judge) if isinstance(judge, str) else judge) if judge else llm
    if moderator is None:
        moderator = llm if llm is not None else judge_backend
    return Backends(labeller=llm if labeller == "llm" else labeller,
                    summariser=llm if summariser == "llm" else summariser, expert=llm,
                    policy=make_backend(policy) if isinstance(policy, str) else policy, judge=judge_backend,
                    moderator=moderator, labeller_style=labeller_style, summariser_style=summariser_style)


def offline_labeller(local_llm: Any, cache_dir: Path, log: Any = print) -> tuple[Any, str | None, dict[str, Any]]:
    """The offline default feedback labeller, measured: the rules and ``local_llm`` with the split prompts
    on the hand-labelled set (cached in ``cache_dir``); returns (backend or None for the rules, prompt style,
    the comparison for the card)."""
    from convohub.wildfeedback.agreement import compare_on_gold

    comparison = compare_on_gold(local_llm, cache_dir, prompt_style="split", log=log)
    if comparison["chosen"] == comparison["rules"]:
        return None, None, comparison
    return local_llm, "split", comparison


def _labelling(ctx: Any) -> tuple[Any, str | None, dict[str, Any]]:
    """``--llm rules`` -> the rules; a configured LLM -> that model (its default prompt style); otherwise the
    labeller that agreed better on the hand-labelled set. The agreement is measured in every case."""
    from convohub.wildfeedback.agreement import compare_on_gold

    cache = _label_cache()  # machine-wide, keyed on gold file, model weights and labelling code
    if ctx.use_rules:
        return None, None, compare_on_gold(None, cache, log=ctx.log)
    if ctx.llm is not None:
        return ctx.llm, None, compare_on_gold(ctx.llm, cache, log=ctx.log)
    return offline_labeller(ctx.local_llm(), cache, ctx.log)


def _summarising(ctx: Any) -> tuple[Any, str, dict[str, Any]]:
    """The preference summariser, as :func:`_labelling` chooses the labeller: ``--llm rules`` -> the rules; a
    configured LLM -> that model with the paper's single prompt; otherwise whichever of the rules and the
    local SmolLM2 (episode prompts) agreed better with the hand-written summaries. Measured in every case
    (figures cached machine-wide) and reported in the card."""
    from convohub.wildfeedback.summary_agreement import offline_summariser

    if ctx.use_rules:
        _, comparison = offline_summariser(None, _label_cache(), ctx.log, prompt_styles=())
        return None, "full", comparison
    if ctx.llm is not None:
        _, comparison = offline_summariser(ctx.llm, _label_cache(), ctx.log, prompt_styles=("full",))
        return ctx.llm, "full", comparison
    backend, comparison = offline_summariser(ctx.local_llm(), _label_cache(), ctx.log)
    return backend, comparison["prompt_style"] or "full", comparison


def _build_dataset(ctx: Any, source: Path | None) -> Path:
    from convohub.wildfeedback.dataset import DEFAULT_USERS, build_from_pipeline, build_from_source
    from convohub.wildfeedback.pipeline import Settings

    if source is not None:
        if not Path(source).is_dir():
            raise FileNotFoundError(f"WildFeedback source {source} must be a folder with wildfeedback.json, "
                                    "sat_dsat_annotation.json and/or user_preference.json")
        return build_from_source(ctx.target, ctx.repo, Path(source))
    tiny = ctx.profile == "tiny"
    episodes = positive_int_setting(ON_POLICY_EPISODES_ENV, TINY_ON_POLICY_EPISODES)
    settings = (Settings(seed=ctx.seed, on_policy_max_episodes=episodes,
                         response_max_new_tokens=TINY_RESPONSE_NEW_TOKENS) if tiny
                else Settings(seed=ctx.seed, test_clusters=70, test_per_cluster=10))
    users = positive_int_setting(USERS_ENV, DEFAULT_USERS)
    labeller, style, comparison = _labelling(ctx)
    from convohub.wildfeedback.identify import labeller_label

    how = "named by --llm" if ctx.use_rules or ctx.llm is not None else "agreed better on the hand-labelled set"
    ctx.log(f"feedback labeller: {labeller_label(labeller, style)} ({how})")
    from convohub.wildfeedback.preferences import summariser_name

    summariser, summariser_style, summary_comparison = _summarising(ctx)
    how = "named by --llm" if ctx.use_rules or ctx.llm is not None else "agreed better with the hand-written summaries"
    ctx.log(f"preference summariser: {summariser_name(summariser, summariser_style)} ({how})")
    backends = _backends(ctx.llm, labeller=labeller, labeller_style=style, summariser=summariser,
                         summariser_style=summariser_style)
    moderation = None
    if tiny and not ctx.use_rules and backends.policy is None:
        # on-policy pairs from the model the tiny recipes train (SmolLM2), judged by the release's judge
        backends.policy, backends.judge = ctx.local_llm(), backends.judge or ctx.local_llm()
    if backends.moderator is None and backends.policy is not None:
        from convohub.wildfeedback.moderation import offline_moderator

        backends.moderator, moderation = offline_moderator(ctx.local_llm(), _label_cache(), ctx.log)
    return build_from_pipeline(ctx.target, ctx.repo, ctx.scratch("wildfeedback", f"pipeline-{ctx.profile}"),
                               backends=backends, settings=settings, n_users=users, gold_comparison=comparison,
                               moderation_comparison=moderation, summary_comparison=summary_comparison)


def _step_build(ctx: Any) -> dict[str, Any]:
    return {"wildfeedback_dir": _build_dataset(ctx, None)}


#: the artifacts :func:`_dataset_dir` looks up
DATASET_READS = ("wildfeedback_dir",)
#: The artifacts of the SFT+DPO steps. The aligned model's are ``alignment.SPEC.artifact(kind)``, named from its
#: model name here because importing ``alignment`` (trl, peft) at start-up would slow every CLI call; a test
#: checks they agree.
SFT_DIR_ARTIFACT = "wildfeedback_sft_dir"
DPO_MODEL = "wildfeedback_dpo"
DPO_ARTIFACTS = {kind: artifact_name(DPO_MODEL, kind) for kind in ARTIFACT_KINDS}


def _dataset_dir(ctx: Any) -> Path:
    """This run's dataset folder, or one an earlier run wrote into the same root (resume)."""
    if "wildfeedback_dir" in ctx.artifacts:
        return Path(ctx.artifacts["wildfeedback_dir"])
    folder = ctx.target.repo_dir("datasets", "wildfeedback")
    return folder if (folder / "README.md").is_file() else _build_dataset(ctx, None)


def training_variant(dataset_dir: Path) -> str | None:
    """``on_policy`` when the built dataset has on-policy pairs (offline: SmolLM2's own answers with vs
    without the preferences, judge-filtered -- pairs that teach the model the tiny recipes train), else
    None (every variant: the expert rows)."""
    from convohub.wildfeedback.alignment import load_preference_rows
    from convohub.wildfeedback.pipeline import VARIANT_ON_POLICY

    variants = set(load_preference_rows(dataset_dir)["variant"])
    return VARIANT_ON_POLICY if any(v.startswith(VARIANT_ON_POLICY) for v in variants) else None


def _step_train(ctx: Any) -> dict[str, Any]:
    """SFT on the chosen responses, then DPO with the SFT model as the reference: each stage's script
    (training/wildfeedback_*) launched with ``accelerate launch`` and the profile's recipe."""
    from convohub.wildfeedback import alignment

    out = ctx.scratch("wildfeedback", f"align-{ctx.profile}")
    dataset_dir = _dataset_dir(ctx)
    variant = training_variant(dataset_dir)
    ctx.log(f"training on preference variant: {variant or 'every variant'}")
    dpo_dir = alignment.train(ctx.repo, ctx.profile, dataset_dir, out, ctx.seed, variant=variant,
                              sft_args=ctx.train_overrides(), dpo_args=ctx.train_overrides())
    return {SFT_DIR_ARTIFACT: out / "sft", DPO_ARTIFACTS["dir"]: dpo_dir}




def _train_inputs(ctx: Any) -> list[Path]:
    """The SFT and DPO recipes of the profile and their scripts: an edited one retrains."""
    from convohub.wildfeedback.alignment import DPO_DIR, SFT_DIR, recipe_paths

    repo = Path(ctx.repo)
    return [*recipe_paths(repo, ctx.profile), repo / SFT_DIR / "train_wildfeedback_sft.py",
            repo / DPO_DIR / "train_wildfeedback_dpo.py"]


def _card_inputs(ctx: Any) -> list[Path]:
    from convohub.model_spec import CARDS_DIR
    from convohub.wildfeedback.alignment import SPEC

    return [Path(ctx.repo) / CARDS_DIR / f"{SPEC.template}.md"]


def _release_judge(ctx: Any) -> Any:
    """The named judge of the release: the lexical stand-in with ``--llm rules``, else the configured LLM or
    the offline SmolLM2 model (answers cached in the work dir)."""
    from convohub.metrics.checklist_judge import LexicalChecklistJudge

    return LexicalChecklistJudge() if ctx.use_rules else ctx.chat_llm()


def _step_evaluate(ctx: Any) -> dict[str, Any]:
    """Table 2 of the paper for this release: the DPO model against the SFT model and against the base model,
    judged with and without the checklist by the named judge, plus the judge's agreement with the
    hand-labelled judge set (and the lexical stand-in's, for comparison)."""
    from convohub.hub import atomic_write_text, dump_json
    from convohub.metrics.checklist_judge import LexicalChecklistJudge, judge_agreement
    from convohub.models import cache_root
    from convohub.wildfeedback import alignment, evaluation

    judge = _release_judge(ctx)
    # measured once per machine and judge revision (the figures, not the verdicts, are cached)
    agreement = {"judge": judge_agreement(judge, cache_dir=cache_root() / "judge-agreement")}
    if not isinstance(judge, LexicalChecklistJudge):
        agreement["lexical"] = judge_agreement(LexicalChecklistJudge())
    ctx.log("judge agreement on the hand-labelled set: " + alignment.agreement_line(agreement))
    dpo_dir, sft_dir = Path(ctx.artifacts[DPO_ARTIFACTS["dir"]]), Path(ctx.artifacts[SFT_DIR_ARTIFACT])
    # what each stage's run saved (its resolved arguments, overrides included), never the recipes
    sft, dpo = alignment.read_results(sft_dir), alignment.read_results(dpo_dir)
    tiny = ctx.profile == "tiny"
    results = evaluation.evaluate(
        str(dpo_dir), {"sft": str(sft_dir), "base": str(sft["base_model"])},
        _dataset_dir(ctx), judge=judge,
        limit=positive_int_setting(EVAL_ITEMS_ENV) or (TINY_EVAL_ITEMS if tiny else None),
        max_new_tokens=TINY_EVAL_NEW_TOKENS if tiny else 512, max_prompt_length=dpo["max_prompt_length"])
    results |= {"judge_agreement": agreement, "sft": sft, "dpo": dpo}  # everything the card reports
    ctx.log(evaluation.format_table(results))
    path = ctx.scratch("wildfeedback") / "alignment_eval.json"
    atomic_write_text(path, dump_json(results))
    return {DPO_ARTIFACTS["eval_path"]: path}


def _step_card(ctx: Any) -> dict[str, Any]:
    """The aligned model's repo, published by its spec (``alignment.SPEC``, ``model_cards/wildfeedback_dpo.md``)
    with the evaluation step's results."""
    from convohub.wildfeedback.alignment import SPEC

    results = read_json(Path(ctx.artifacts[DPO_ARTIFACTS["eval_path"]]))
    path = SPEC.publish(ctx.target, ctx.repo, ctx.profile, Path(ctx.artifacts[DPO_ARTIFACTS["dir"]]), results)
    return {DPO_ARTIFACTS["card_dir"]: path}


def _step_space(ctx: Any) -> dict[str, Any]:
    from convohub.wildfeedback.space import export_space

    return {"wildfeedback_space_dir": export_space(ctx.target, ctx.profile, ctx.repo)}


def _label_cache() -> Path:
    """Where agreement figures on the hand-labelled sets are kept, machine-wide (each file is keyed on the
    gold data, the model's weights and the code that asks it)."""
    from convohub.models import cache_root

    return cache_root() / "wildfeedback" / "gold-agreement"


def _offline_defaults(local: Any) -> tuple[Any, str | None, dict[str, Any], Any, str, dict[str, Any]]:
    """The label command's offline defaults, each measured against the rules on its hand-labelled set with the
    one local model: (labeller, its prompt style, how it was chosen, summariser, its prompt style, how it was
    chosen). The choices carry each candidate's agreement so the output says which won and by how much."""
    def log(message: str) -> None:
        print(message, file=sys.stderr)

    labeller, style, comparison = offline_labeller(local, _label_cache(), log=log)
    choice = {"chosen": comparison["chosen"], "choice_rule": comparison["choice_rule"],
              "agreement": {n: {"SAT_f1": round(a["SAT"]["f1"], 4), "DSAT_f1": round(a["DSAT"]["f1"], 4),
                                "mean_kappa": round(a["mean_kappa"], 4)} for n, a in comparison["labellers"].items()}}
    log(f"offline default: {comparison['chosen']} ({comparison['choice_rule']}: "
        + ", ".join(f"{n} {v['mean_kappa']:.3f}" for n, v in choice["agreement"].items()) + ")")
    from convohub.wildfeedback.summary_agreement import offline_summariser

    summariser, summary = offline_summariser(local, _label_cache(), log=log)
    summary_choice = {"chosen": summary["chosen"], "choice_rule": summary["choice_rule"],
                      "agreement": {f["summariser"]: {k: f[k] for k in ("query_accuracy", "faithful_similarity",
                                                                         "misread_rate")}
                                    for f in summary["measured"]}}
    return labeller, style, choice, summariser, summary["prompt_style"] or "full", summary_choice


def run_label(args: argparse.Namespace) -> int:
    """``convohub wildfeedback label``: SPUR labels (+ preference summary) of one conversation as JSON.

    Labeller: ``--llm rules`` (or ``--offline``) -> the rules; ``--llm SPEC`` or ``CONVOHUB_LLM_*`` -> that
    model; otherwise the offline default measured on the hand-labelled set (measured once, cached under
    the convohub cache) -- the output's ``labeller`` names it and ``labeller_choice`` says how well each did.
    """
    from convohub.llm import OFFLINE_SPEC, backend_from_env, make_backend
    from convohub.wildfeedback.identify import IdentificationError, default_prompt_style, identify
    from convohub.wildfeedback.preferences import PreferenceError, summarise, summariser_name

    raw = json.loads(Path(args.conversation).read_text(encoding="utf-8") if args.conversation != "-"
                     else sys.stdin.read())
    turns = raw["turns"] if isinstance(raw, dict) else raw
    turns = [{"role": t["role"], "content": t["content"]} for t in turns]
    choice: dict[str, Any] | None = None
    summary_choice: dict[str, Any] | None = None
    summariser_style = "full"
    if args.offline or args.llm == "rules":
        backend = None
    elif args.llm:
        backend = make_backend(args.llm)
    else:
        backend = backend_from_env()
        if backend is None:
            print("no LLM configured: measuring the offline labeller and summariser on the hand-labelled sets "
                  f"(once; cached under {_label_cache()})", file=sys.stderr)
            backend, args.prompt_style, choice, summariser, summariser_style, summary_choice = _offline_defaults(
                make_backend(OFFLINE_SPEC, cache_dir=_label_cache() / "llm-cache"))
    style = args.prompt_style or (default_prompt_style(backend) if backend is not None else None)
    if summary_choice is None:
        # a named model summarises with the paper's single prompt; one that needs the split labelling prompts
        # cannot follow it, so the rules write the summaries then (named in the output)
        summariser = backend if style == "full" else None
    try:
        result = identify(turns, backend, prompt_style=style, max_attempts=args.max_attempts)
        summary = summarise(turns, result, summariser, prompt_style=summariser_style) if result.dsat else []
    except (IdentificationError, PreferenceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    out = {**result.to_dict(), "preferences": summary,
           "preference_summariser": summariser_name(summariser, summariser_style)}
    if choice is not None:
        out["labeller_choice"] = choice
    if summary_choice is not None:
        out["summariser_choice"] = summary_choice
    print(json.dumps(out, ensure_ascii=False, indent=2))
    return 0


def run_build(args: argparse.Namespace) -> int:
    """``convohub wildfeedback build``: the pipeline with explicit model choices and sizes."""
    from convohub.hub import DEFAULT_NAMESPACE, HubTarget
    from convohub.llm import backend_from_env, make_backend
    from convohub.paths import repo_root
    from convohub.wildfeedback.dataset import build_from_pipeline, build_from_source
    from convohub.wildfeedback.pipeline import Settings

    target = HubTarget(root=args.out.resolve(), namespace=args.namespace or DEFAULT_NAMESPACE, push=False, token=None)
    if args.source is not None:
        print(f"wrote {build_from_source(target, repo_root(), args.source)}")
        return 0
    llm = None if args.offline else (make_backend(args.llm) if args.llm else backend_from_env())
    backends = _backends(llm, args.policy, args.judge)
    settings = Settings(test_clusters=args.test_clusters, test_per_cluster=args.test_per_cluster, seed=args.seed)
    work = args.work or args.out / ".convohub-work" / "wildfeedback"
    print(f"wrote {build_from_pipeline(target, repo_root(), work, backends=backends, settings=settings, n_users=args.users)}")
    return 0


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("wildfeedback", help="WildFeedback feedback labelling and dataset pipeline")
    sub = parser.add_subparsers(dest="wildfeedback_command", metavar="ACTION")
    label = sub.add_parser("label", help="label one conversation (JSON list of {role, content}, or '-')")
    label.add_argument("conversation", help="JSON file with [{role, content}, ...] or {'turns': [...]}; '-' = stdin")
    label.add_argument("--llm", default=None,
                       help="'rules' (the rule labeller) or a model spec (default: CONVOHUB_LLM_*, else the offline "
                            "labeller that agreed better with the hand-labelled set)")
    label.add_argument("--offline", action="store_true", help="same as --llm rules")
    label.add_argument("--prompt-style", choices=("split", "full"), default=None,
                       help="'split': one turn and one field per call (small models); 'full': the paper's single "
                            "prompt (default: split for local models and SmolLM2, full for other endpoints)")
    label.add_argument("--max-attempts", type=int, default=3, help="calls per question before giving up")
    label.set_defaults(handler=run_label)
    build = sub.add_parser("build", help="run the pipeline and write the dataset folder")
    build.add_argument("--out", type=Path, default=Path("hub_release"), help="local hub root (default: %(default)s)")
    build.add_argument("--namespace", default=None)
    build.add_argument("--source", type=Path, default=None, help="folder with the released files instead")
    build.add_argument("--users", type=int, default=200, help="users of the sample corpus (default: %(default)s)")
    build.add_argument("--llm", default=None, help="labeller/summariser/expert model spec (default: CONVOHUB_LLM_*)")
    build.add_argument("--offline", action="store_true", help="ignore any configured LLM (rule stand-ins)")
    build.add_argument("--policy", default=None, help=f"on-policy model spec (default: ${POLICY_ENV})")
    build.add_argument("--judge", default=None, help=f"checklist judge spec (default: ${JUDGE_ENV} or the LLM)")
    build.add_argument("--test-clusters", type=int, default=8, help="k-means clusters (paper: 70)")
    build.add_argument("--test-per-cluster", type=int, default=3, help="items per cluster (paper: 10)")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--work", type=Path, default=None, help="resumable work folder (stage files, LLM cache)")
    build.set_defaults(handler=run_build)
    from convohub.wildfeedback.eval_cli import add_evaluate_cli

    add_evaluate_cli(sub)
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    return parser


def _benchmark_reference(row: Any) -> dict[str, Any]:
    return {"prompt": row["prompt"], "preferences": row["preferences"], "chosen": row["chosen"]}


def _score_checklist(predictions: list[Any], references: list[Any], judge: Any) -> dict[str, Any]:
    """Win/tie/lose of the submitted responses against the test set's expert (preference-guided) responses,
    with and without the checklist, by the named ``judge`` (``convohub evaluate wildfeedback ... --judge``;
    its name is returned as ``judge`` and goes into the model-index metric names: compare only scores made
    with the same judge)."""
    from convohub.metrics.checklist_judge import default_prompt_style, judge_pairs, summarise_judgements

    histories = [[{"role": str(m["role"]), "content": str(m["content"])} for m in r["prompt"][:-1]]
                 for r in references]
    queries = [str(r["prompt"][-1]["content"]) for r in references]
    checklists = [[str(x) for x in (r["preferences"] or [])] for r in references]
    style = default_prompt_style(judge)
    scores: dict[str, Any] = {}
    for name, with_checklist in (("checklist", True), ("no_checklist", False)):
        summary = summarise_judgements(judge_pairs([p or "" for p in predictions], [r["chosen"] for r in references],
                                                   histories, queries, checklists, judge,
                                                   with_checklist=with_checklist, prompt_style=style))
        scores.update({f"{name}_{k}": v for k, v in summary.items()})
    scores["judge"] = judge.model_id
    scores["prompt_style"] = style
    return scores


def _judge_from_spec(spec: str | None) -> Any:
    """``--judge`` of ``convohub evaluate wildfeedback``: lexical / smollm2 / endpoint / folder, or refuse."""
    from convohub.metrics.checklist_judge import judge_from_spec

    return judge_from_spec(spec)


#: ``convohub evaluate wildfeedback SUBMISSION.jsonl``: one {"id": test row id, "prediction": the model's
#: response to the row's prompt} per test row; judged against the row's expert response (``chosen``).
BENCHMARK = Benchmark(
    name="wildfeedback", description="WildFeedback test set, checklist-judge win/tie/lose vs the expert responses",
    dataset="wildfeedback", config="test", split="test", id_field="id", task_type="text-generation",
    prediction_type=(str, type(None)), reference=_benchmark_reference, score=_score_checklist,
    judge=_judge_from_spec,
)


SYSTEM = System(
    name="wildfeedback",
    title="WildFeedback: preference data from in-situ user feedback, SFT+DPO alignment, checklist judge",
    steps=(
        Step("build", "wildfeedback", _step_build,
             settings=(POLICY_ENV, JUDGE_ENV, USERS_ENV, ON_POLICY_EPISODES_ENV)),
        Step("train", "wildfeedback-sft-dpo", _step_train, inputs=_train_inputs, reads=DATASET_READS),
        Step("evaluate", "wildfeedback-checklist-judge", _step_evaluate, settings=(EVAL_ITEMS_ENV,),
             reads=(SFT_DIR_ARTIFACT, DPO_ARTIFACTS["dir"], *DATASET_READS)),
        Step("card", "wildfeedback-card", _step_card, inputs=_card_inputs,
             reads=(DPO_ARTIFACTS["eval_path"], DPO_ARTIFACTS["dir"])),
        Step("space", "wildfeedback-space", _step_space),
    ),
    datasets=(DatasetBuilder("wildfeedback", "WildFeedback preference pairs, SAT/DSAT annotations, user "
                             "preferences and the held-out test set", _build_dataset),),
    space="wildfeedback",
    benchmarks=(BENCHMARK,),
    add_cli=add_cli,
    cost=16.5,
)
