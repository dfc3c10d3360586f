"""WildFeedback alignment: SFT on the chosen responses, then DPO on the pairs (reference = the SFT model).

The paper fine-tunes an instruct model for one epoch of SFT on the chosen responses (global batch 128, LR
5e-6, warmup 0.1, cosine) and then one epoch of DPO on all pairs (batch 32, LR 5e-7, beta 0.1, sigmoid loss,
no NLL term). It leaves open the reference model (here: the SFT model, as the SFT+DPO recipe implies), the
maximum length (Phi-3-mini has a 4k context while prompts average ~1k tokens) and what a "LR grid search"
selected on. This module holds what both stage scripts (``training/wildfeedback_sft/`` and
``training/wildfeedback_dpo/``) share, so neither is a near-copy of the other:

* reading preference rows (a built dataset folder or a Parquet file) and converting them to trl's
  conversational formats (prompt/completion for SFT, prompt/chosen/rejected for DPO);
* the prompt truncation policy (:func:`truncate_prompt`): a long conversation loses its *oldest* turns
  first, never the system message and the user query the responses answer, so the pair stays meaningful;
* the collapse check (:class:`CollapseCheck`): the paper saw instruct models collapse at a too-high LR, so
  a run stops as soon as the loss is non-finite or grows past a multiple of its start, or DPO's chosen-
  rejected reward margin goes persistently negative, and the reason is written to a report JSON;
* the learning-rate grid (:func:`run_lr_grid`): one run per LR on a held-out slice of the training users,
  collapsed runs excluded, best by held-out loss;
* ``train()`` (SFT then DPO) and :data:`SPEC`, the published model's declaration, whose card
  (``model_cards/wildfeedback_dpo.md``, :func:`card_values`) carries the measured judge results.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.hub import atomic_write_text, dump_json

#: Columns a preference row must carry for training (the full schema is D1's dataset; see the card).
TRAINING_COLUMNS = ("prompt", "chosen", "rejected")
SFT_DIR, DPO_DIR = "training/wildfeedback_sft", "training/wildfeedback_dpo"
DATASET_REPO = "wildfeedback"
COLLAPSE_REPORT = "collapse_report.json"
RESULTS_FILE = "eval_results.json"
#: Configs of the dataset that do not hold training pairs.
NON_PAIR_CONFIGS = frozenset({"test", "sat_dsat_annotation", "user_preference"})


class TrainingCollapsed(RuntimeError):
    """Raised after a run stopped on the collapse check; the report JSON says why."""


# ------------------------------------------------------------------------------------------- arguments
@dataclass
class AlignmentArguments:
    """Data, truncation, collapse-check and LR-grid arguments shared by the SFT and DPO scripts."""

    dataset_path: str = field(default="convohub/wildfeedback", metadata={
        "help": "built WildFeedback dataset folder, a Parquet file of preference rows, or a Hub dataset id"})
    dataset_config: str | None = field(default=None, metadata={
        "help": "config holding the training pairs (default: the first config with the train split that is "
                "not 'test')"})
    train_split: str = field(default="train")
    variant: str | None = field(default=None, metadata={
        "help": "train only on rows of this preference variant (the `variant` column: `expert`, "
                "`on_policy:<policy model>`; `on_policy` selects every policy; the paper's Table 6 trains one model "
                "per variant); default: every row"})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "cap on training pairs (taken after shuffling with the seed)"})
    max_prompt_length: int = field(default=3072, metadata={
        "help": "prompt budget in tokens; longer prompts lose their oldest turns (system message and last user "
                "turn are kept; a last user turn longer than the budget keeps its end)"})
    validation_fraction: float = field(default=0.0, metadata={
        "help": "share of training users held out for a validation loss (needed by the LR grid)"})
    learning_rate_grid: list[float] | None = field(default=None, metadata={
        "help": "train once per LR (e.g. 5e-7 2e-7 1e-7), keep the non-collapsed run with the lowest held-out "
                "loss in output_dir; the runs stay in output_dir/lr_grid/"})
    collapse_loss_factor: float = field(default=4.0, metadata={
        "help": "stop when a logged loss exceeds this multiple of the first logged loss (<= 0: off)"})
    collapse_margin_window: int = field(default=5, metadata={
        "help": "DPO: number of consecutive logged reward margins inspected (<= 0: off)"})
    collapse_margin_threshold: float = field(default=1.0, metadata={
        "help": "DPO: stop when every margin of the window is negative, the last is below minus this value "
                "and the margins fell over the window"})


def make_alignment_parser(stage_config: type) -> Any:
    """``TrlParser((AlignmentArguments, SFTConfig|DPOConfig, ModelConfig))``; recipes parse strictly."""
    from trl import ModelConfig, TrlParser

    return TrlParser((AlignmentArguments, stage_config, ModelConfig))


# ------------------------------------------------------------------------------------------------ data
def _configs_in_card(folder: Path) -> list[dict[str, Any]]:
    from convohub.hub import read_card

    meta, _ = read_card(folder / "README.md")
    return list(meta.get("configs", []))


def training_config(folder: Path, split: str = "train") -> str:
    """The config holding the training pairs: ``wildfeedback`` (the released name) when the folder has it,
    else the first config with ``split`` that is not one of the non-pair configs."""
    configs = _configs_in_card(folder)
    with_split = [str(c["config_name"]) for c in configs
                  if split in {item["split"] for item in c.get("data_files", [])}]
    if "wildfeedback" in with_split:
        return "wildfeedback"
    for name in with_split:
        if name not in NON_PAIR_CONFIGS:
            return name
    raise KeyError(f"{folder}: no preference-pair config has a {split!r} split (configs: "
                   f"{[c['config_name'] for c in configs]}); pass --dataset_config")


def load_preference_rows(source: str | Path, config: str | None = None, split: str | None = "train") -> Any:
    """Preference rows as a ``datasets.Dataset`` from a Parquet file, a built folder or a Hub id."""
    from convohub.hub import load_split

    if Path(source).is_dir():
        config = config or training_config(Path(source), split or "train")
    ds = load_split(source, config, split)
    missing = [c for c in TRAINING_COLUMNS if c not in ds.column_names]
    if missing:
        raise ValueError(f"{source} (config {config!r}): preference rows lack column(s) {missing}; expected the "
                         f"WildFeedback schema with {list(TRAINING_COLUMNS)}")
    return ds


def _validate_prompt(row_id: str, prompt: Any) -> list[dict[str, str]]:
    if not isinstance(prompt, Sequence) or not prompt:
        raise ValueError(f"row {row_id}: 'prompt' must be a non-empty list of {{role, content}} messages")
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
    if messages[-1]["role"] != "user":
        raise ValueError(f"row {row_id}: the prompt must end with the user query the responses answer, "
                         f"got a final {messages[-1]['role']!r} turn")
    return messages


# --------------------------------------------------------------------------------------------- truncation
@dataclass(frozen=True)
class TruncatedPrompt:
    """The messages that fit and what the policy removed to get there."""

    messages: list[dict[str, str]] | None  # None: not even system + a cut query fits (row dropped)
    tokens: int
    dropped_turns: int = 0
    cut_query: bool = False

    @property
    def truncated(self) -> bool:
        return self.dropped_turns > 0 or self.cut_query


def chat_token_counter(tokenizer: Any) -> Callable[[list[dict[str, str]]], int]:
    """Token count of messages rendered by the model's chat template with the generation prompt."""
    def count(messages: list[dict[str, str]]) -> int:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def truncate_prompt(messages: Sequence[Mapping[str, str]], count: Callable[[list[dict[str, str]]], int],
                    max_tokens: int, *, tokenizer: Any = None) -> TruncatedPrompt:
    """Fit a prompt into ``max_tokens`` by dropping its oldest turns.

    Leading system messages and the final user turn (the query both responses answer) are always kept.
    Earlier turns are removed oldest first, a whole user->assistant exchange at a time so the history
    still opens with a user turn. If system + query alone are too long, the query keeps its *end* (in
    WildChat follow-ups the instruction usually follows pasted material) - only with ``tokenizer`` given;
    if even that cannot fit, ``messages`` is None and the caller drops the row.
    """
    msgs = [dict(m) for m in messages]
    n = count(msgs)
    if n <= max_tokens:
        return TruncatedPrompt(msgs, n)
    n_system = next((i for i, m in enumerate(msgs) if m["role"] != "system"), len(msgs))
    system, history, query = msgs[:n_system], msgs[n_system:-1], msgs[-1]
    dropped = 0
    while history:
        cut = 1
        while cut < len(history) and history[cut]["role"] != "user":  # drop up to the next user turn
            cut += 1
        history, dropped = history[cut:], dropped + cut
        n = count([*system, *history, query])
        if n <= max_tokens:
            return TruncatedPrompt([*system, *history, query], n, dropped)
    if tokenizer is None:
        return TruncatedPrompt(None, n, dropped)
    ids = tokenizer(query["content"], add_special_tokens=False)["input_ids"]
    overhead = count([*system, {"role": "user", "content": ""}])
    keep = max_tokens - overhead
    while keep > 0:
        cut_query = {"role": "user", "content": tokenizer.decode(ids[-keep:], skip_special_tokens=True)}
        n = count([*system, cut_query])
        if n <= max_tokens:
            return TruncatedPrompt([*system, cut_query], n, dropped, cut_query=True)
        keep -= max(1, n - max_tokens)  # re-tokenising the decoded text can shift a few tokens
    return TruncatedPrompt(None, overhead, dropped, cut_query=True)


@dataclass
class ConversionStats:
    """What the conversion did to the rows (recorded in the results JSON and on the card)."""

    rows: int = 0
    kept: int = 0
    truncated_prompts: int = 0
    dropped_turns: int = 0
    cut_queries: int = 0
    dropped_too_long: int = 0
    dropped_identical: int = 0
    variants: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def convert_rows(rows: Any, tokenizer: Any, stage: str, max_prompt_length: int) -> tuple[Any, ConversionStats]:
    """Preference rows -> trl conversational examples (``stage`` "sft": prompt/completion with the chosen
    response; "dpo": prompt/chosen/rejected), prompts truncated by :func:`truncate_prompt`.

    Pairs whose chosen and rejected texts are identical are dropped for DPO (no preference signal; the
    paper drops them when building the data) and kept for SFT (the chosen response is still a target).
    """
    import datasets

    if stage not in ("sft", "dpo"):
        raise ValueError(f"stage must be 'sft' or 'dpo', got {stage!r}")
    count = chat_token_counter(tokenizer)
    stats, out = ConversionStats(), []
    for i, row in enumerate(rows):
        row_id = str(row.get("id") or i)
        stats.rows += 1
        variant = str(row.get("variant") or "unknown")
        chosen, rejected = str(row["chosen"]), str(row["rejected"])
        if stage == "dpo" and chosen.strip() == rejected.strip():
            stats.dropped_identical += 1
            continue
        fitted = truncate_prompt(_validate_prompt(row_id, row["prompt"]), count, max_prompt_length,
                                 tokenizer=tokenizer)
        if fitted.messages is None:
            stats.dropped_too_long += 1
            continue
        stats.truncated_prompts += fitted.truncated
        stats.dropped_turns += fitted.dropped_turns
        stats.cut_queries += fitted.cut_query
        stats.kept += 1
        stats.variants[variant] = stats.variants.get(variant, 0) + 1
        answer = [{"role": "assistant", "content": chosen}]
        if stage == "sft":
            out.append({"prompt": fitted.messages, "completion": answer})
        else:
            out.append({"prompt": fitted.messages, "chosen": answer,
                        "rejected": [{"role": "assistant", "content": rejected}]})
    if not out:
        raise ValueError(f"no usable {stage} examples among {stats.rows} rows: {stats.as_dict()}")
    return datasets.Dataset.from_list(out), stats


def split_by_user(ds: Any, fraction: float, seed: int) -> tuple[Any, Any | None]:
    """Hold out ``fraction`` of the *users* (rows without ``user_id`` count as their own user)."""
    import random

    if fraction <= 0:
        return ds, None
    if not 0 < fraction < 1:
        raise ValueError(f"validation_fraction must be in [0, 1), got {fraction}")
    keys = [str(u) if u else f"row-{i}" for i, u in enumerate(ds["user_id"] if "user_id" in ds.column_names
                                                                   else [None] * len(ds))]
    users = sorted(set(keys))
    random.Random(seed).shuffle(users)
    held = set(users[:max(1, round(fraction * len(users)))])
    train_idx = [i for i, k in enumerate(keys) if k not in held]
    val_idx = [i for i, k in enumerate(keys) if k in held]
    if not train_idx:
        raise ValueError(f"validation_fraction {fraction} leaves no training users ({len(users)} users)")
    return ds.select(train_idx), ds.select(val_idx)


# ----------------------------------------------------------------------------------------- model loading
def lora_config(model_args: Any) -> Any:
    """peft's LoraConfig when ``use_peft`` (LoRA / QLoRA), else None (full fine-tune)."""
    if not model_args.use_peft:
        return None
    from trl import get_peft_config

    return get_peft_config(model_args)


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{path}: the tokenizer has no chat template; WildFeedback trains chat models")
    return tokenizer


# -------------------------------------------------------------------------------------- collapse check
def _collapse_callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


class CollapseCheck(_collapse_callback_base()):  # type: ignore[misc]
    """Stop training when it diverges, and write why to ``report_path`` (JSON).

    Triggers: a logged ``loss`` that is NaN/inf, or above ``loss_factor`` x the first logged loss; for DPO,
    the last ``margin_window`` logged ``rewards/margins`` all negative, falling over the window and ending
    below ``-margin_threshold`` (the policy prefers the rejected responses more and more).
    """

    def __init__(self, report_path: Path | None = None, *, loss_factor: float = 4.0, margin_window: int = 5,
                 margin_threshold: float = 1.0) -> None:
        self.report_path = Path(report_path) if report_path is not None else None
        self.loss_factor, self.margin_window, self.margin_threshold = loss_factor, margin_window, margin_threshold
        self.first_loss: float | None = None
        self.margins: list[float] = []
        self.report: dict[str, Any] | None = None

    @property
    def collapsed(self) -> bool:
        return self.report is not None

    def check(self, logs: Mapping[str, Any], step: int) -> str | None:
        """The reason to stop after these logs, or None (pure: also used on recorded log histories)."""
        loss = logs.get("loss")
        if loss is not None:
            loss = float(loss)
            if not math.isfinite(loss):
                return f"loss is {loss} at step {step}"
            if self.first_loss is None:
                self.first_loss = loss
            elif self.loss_factor > 0 and self.first_loss > 0 and loss > self.loss_factor * self.first_loss:
                return (f"loss {loss:.4g} at step {step} exceeds {self.loss_factor} x the first logged loss "
                        f"{self.first_loss:.4g}")
        margin = logs.get("rewards/margins")
        if margin is not None and self.margin_window > 0:
            margin = float(margin)
            if not math.isfinite(margin):
                return f"rewards/margins is {margin} at step {step}"
            self.margins = [*self.margins, margin][-self.margin_window:]
            window = self.margins
            if (len(window) == self.margin_window and all(m < 0 for m in window) and window[-1] < window[0]
                    and window[-1] < -self.margin_threshold):
                return (f"rewards/margins diverged: the last {len(window)} logged margins are negative and "
                        f"fell from {window[0]:.4g} to {window[-1]:.4g} (threshold -{self.margin_threshold}) "
                        f"at step {step}")
        return None

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None,
               **kwargs: Any) -> Any:
        if self.report is not None or not logs:
            return control
        reason = self.check(logs, state.global_step)
        if reason is not None:
            self.report = {"status": "collapsed", "reason": reason, "step": state.global_step,
                           "learning_rate": getattr(args, "learning_rate", None), "last_logs": dict(logs),
                           "advice": "lower the learning rate (the paper's instruct models collapsed at 2e-5) "
                                     "or run a learning_rate_grid"}
            control.should_training_stop = True
            if self.report_path is not None:
                from convohub.hub import atomic_write_text, dump_json

                self.report_path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(self.report_path, dump_json(self.report))
        return control


def collapse_check(script_args: AlignmentArguments, output_dir: str | Path) -> CollapseCheck:
    return CollapseCheck(Path(output_dir) / COLLAPSE_REPORT, loss_factor=script_args.collapse_loss_factor,
                         margin_window=script_args.collapse_margin_window,
                         margin_threshold=script_args.collapse_margin_threshold)


def log_summary(log_history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """First/last logged loss and DPO reward statistics of a finished run (rounded for the card)."""
    def series(key: str) -> list[float]:
        return [float(e[key]) for e in log_history if key in e and "train_runtime" not in e]

    out: dict[str, Any] = {}
    for key, name in (("loss", "loss"), ("rewards/margins", "reward_margin"),
                      ("rewards/accuracies", "reward_accuracy"), ("rewards/chosen", "reward_chosen"),
                      ("rewards/rejected", "reward_rejected")):
        values = series(key)
        if values:
            out[f"{name}_first"], out[f"{name}_last"] = round(values[0], 4), round(values[-1], 4)
            out[f"{name}_mean"] = round(sum(values) / len(values), 4)
    return out


# --------------------------------------------------------------------------------------------- LR grid
def check_lr_grid(grid: Sequence[float]) -> list[float]:
    """Validated, de-duplicated grid, highest LR first (a collapse at the top is the informative one)."""
    values = sorted({float(v) for v in grid}, reverse=True)
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise ValueError(f"learning_rate_grid must hold positive learning rates, got {list(grid)}")
    return values


def select_lr(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The non-collapsed run with the lowest ``eval_loss`` (ties: the higher LR, which learned more)."""
    ok = [r for r in records if r.get("status") == "ok" and r.get("eval_loss") is not None
          and math.isfinite(float(r["eval_loss"]))]
    if not ok:
        raise TrainingCollapsed(f"every learning rate of the grid collapsed or had no held-out loss: "
                                f"{[(r['learning_rate'], r.get('status')) for r in records]}")
    return min(ok, key=lambda r: (float(r["eval_loss"]), -float(r["learning_rate"])))


def run_lr_grid(script_args: AlignmentArguments, training_args: Any,
                run_once: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Run ``run_once(training_args)`` per LR into ``output_dir/lr_grid/lr-<lr>``, copy the selected run
    to ``output_dir`` and write ``lr_grid.json``. Needs ``validation_fraction`` > 0 (selection is on
    held-out training users, never on the test split)."""
    if script_args.validation_fraction <= 0:
        raise ValueError("learning_rate_grid needs validation_fraction > 0 to select on held-out users")
    out = Path(training_args.output_dir)
    records = []
    for lr in check_lr_grid(script_args.learning_rate_grid or []):
        args = copy.deepcopy(training_args)
        args.learning_rate, args.output_dir = lr, str(out / "lr_grid" / f"lr-{lr:g}")
        try:
            result = run_once(args)
            records.append({"learning_rate": lr, "status": "ok", "eval_loss": result.get("eval_loss"),
                            "output_dir": args.output_dir})
        except TrainingCollapsed as exc:
            records.append({"learning_rate": lr, "status": "collapsed", "reason": str(exc),
                            "output_dir": args.output_dir})
    best = select_lr(records)
    for item in Path(best["output_dir"]).iterdir():
        dst = out / item.name
        shutil.copytree(item, dst, dirs_exist_ok=True) if item.is_dir() else shutil.copy2(item, dst)
    summary = {"selected_learning_rate": best["learning_rate"], "runs": records}
    atomic_write_text(out / "lr_grid.json", dump_json(summary))
    results = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
    results["lr_grid"] = summary
    atomic_write_text(out / RESULTS_FILE, dump_json(results))
    return results


# ------------------------------------------------------------------------------------------ stage runs
def _variant_matches(value: str, variant: str) -> bool:
    """``on_policy`` selects every on-policy variant (``on_policy:<policy model>``); a full name selects one."""
    return value == variant or value.startswith(variant + ":")


def select_variant(rows: Any, variant: str | None, source: str) -> Any:
    """Only the rows of preference ``variant`` (None: all rows); an unknown variant names the ones present."""
    if not variant:
        return rows
    present = sorted(set(rows["variant"])) if "variant" in rows.column_names else []
    if not any(_variant_matches(v, variant) for v in present):
        raise ValueError(f"{source}: no training rows of variant {variant!r}; variants present: {present}")
    return rows.filter(lambda v: _variant_matches(v, variant), input_columns="variant")


def _load_split(script_args: AlignmentArguments, tokenizer: Any, stage: str, seed: int) -> tuple[Any, Any, dict]:
    rows = load_preference_rows(script_args.dataset_path, script_args.dataset_config, script_args.train_split)
    rows = select_variant(rows, script_args.variant, script_args.dataset_path)
    rows = rows.shuffle(seed=seed)
    if script_args.max_train_samples:
        rows = rows.select(range(min(script_args.max_train_samples, len(rows))))
    train_rows, val_rows = split_by_user(rows, script_args.validation_fraction, seed)
    train, stats = convert_rows(train_rows, tokenizer, stage, script_args.max_prompt_length)
    val = convert_rows(val_rows, tokenizer, stage, script_args.max_prompt_length)[0] if val_rows else None
    return train, val, stats.as_dict()


def _train_seconds(log_history: Sequence[Mapping[str, Any]]) -> float | None:
    runtimes = [float(e["train_runtime"]) for e in log_history if "train_runtime" in e]
    return round(runtimes[-1], 1) if runtimes else None


@dataclass(frozen=True)
class StageTrainer:
    """A stage's trainer with what :func:`_finish` needs after training: the collapse check, the facts the
    results JSON records, and the folder the weights were loaded from (a LoRA run merges into it)."""

    trainer: Any
    check: CollapseCheck
    extra: dict[str, Any]
    base_path: str


def _finish(run: StageTrainer, stage: str, out: Path, model_args: Any) -> dict[str, Any]:
    """Raise on collapse; else save the model + tokenizer and write the results JSON (main process only).

    A full fine-tune is saved with ``trainer.save_model``. A LoRA/QLoRA run is published as *merged*
    weights (:func:`convohub.training.merge.merged_for_publishing`, which merges a QLoRA adapter into the base
    loaded again unquantised, then ``save_pretrained``): the next stage, the evaluation and a user's
    ``AutoModelForCausalLM.from_pretrained`` then load a plain model, and the card names the base model.
    """
    trainer, check = run.trainer, run.check
    if check.collapsed:
        raise TrainingCollapsed(f"{stage} stopped: {check.report['reason']} (report: {out / COLLAPSE_REPORT})")
    results = {"stage": stage, **run.extra, **log_summary(trainer.state.log_history),
               "steps": trainer.state.global_step, "train_seconds": _train_seconds(trainer.state.log_history),
               "collapse_check": "ok"}
    if trainer.eval_dataset is not None:
        results["eval_loss"] = round(float(trainer.evaluate()["eval_loss"]), 4)
    model = trainer.model
    if not hasattr(model, "merge_and_unload"):
        trainer.save_model(str(out))
    elif trainer.accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        from convohub.training.merge import merged_for_publishing

        merged_for_publishing(trainer.accelerator.unwrap_model(model), run.base_path, model_args).save_pretrained(out)
        trainer.processing_class.save_pretrained(out)
    if trainer.accelerator.is_main_process:
        atomic_write_text(out / RESULTS_FILE, dump_json(results))
        print(json.dumps(results, indent=2, sort_keys=True))
    return results


def _lora_facts(model_args: Any) -> dict[str, Any]:
    """What the card says about the adapter (None when the run is a full fine-tune)."""
    if not model_args.use_peft:
        return {"lora": None}
    modules = model_args.lora_target_modules
    return {"lora": {"r": model_args.lora_r, "alpha": model_args.lora_alpha, "dropout": model_args.lora_dropout,
                     "target_modules": modules if isinstance(modules, str) else list(modules or []),
                     "quantised": "4-bit" if model_args.load_in_4bit else "8-bit" if model_args.load_in_8bit
                     else None, "published": "merged"}}


def _global_batch(training_args: Any) -> int:
    return int(training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
               * max(1, training_args.world_size))


def build_sft_trainer(script_args: AlignmentArguments, training_args: Any, model_args: Any) -> StageTrainer:
    """The SFTTrainer on the chosen responses (prompt/completion: loss on the response tokens only)."""
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    from convohub.training.lm_head import score_label_positions_only
    from convohub.training.models import model_init_kwargs, resolve_model

    path = resolve_model(model_args.model_name_or_path)
    tokenizer = load_tokenizer(path)
    train, val, stats = _load_split(script_args, tokenizer, "sft", training_args.seed)
    model = AutoModelForCausalLM.from_pretrained(path, **model_init_kwargs(model_args))
    check = collapse_check(script_args, training_args.output_dir)
    score_label_positions_only()  # trl's fused head then projects only the response positions on CPU too
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train, eval_dataset=val,
                         processing_class=tokenizer, peft_config=lora_config(model_args), callbacks=[check])
    extra = {"base_model": model_args.model_name_or_path, "data": stats, "train_examples": len(train),
             "learning_rate": training_args.learning_rate, "max_prompt_length": script_args.max_prompt_length,
             "max_length": training_args.max_length, "variant": script_args.variant,
             "max_train_samples": script_args.max_train_samples, "batch_size": _global_batch(training_args),
             **_lora_facts(model_args)}
    return StageTrainer(trainer, check, extra, path)


def build_dpo_trainer(script_args: AlignmentArguments, training_args: Any, model_args: Any) -> StageTrainer:
    """The DPOTrainer whose policy *and reference* are loaded from ``model_name_or_path`` (the SFT model).

    With LoRA/QLoRA the reference is the same weights with the adapter disabled (no second copy); for a
    full fine-tune a second, frozen copy is loaded from the same folder.
    """
    from transformers import AutoModelForCausalLM
    from trl import DPOTrainer

    from convohub.training.lm_head import score_label_positions_only
    from convohub.training.models import model_init_kwargs, resolve_model

    path = resolve_model(model_args.model_name_or_path)
    tokenizer = load_tokenizer(path)
    train, val, stats = _load_split(script_args, tokenizer, "dpo", training_args.seed)
    kwargs = model_init_kwargs(model_args)
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    peft = lora_config(model_args)
    ref_model = None
    if peft is None:  # frozen copy of the SFT model (trl would also build one; explicit is checkable)
        ref_model = AutoModelForCausalLM.from_pretrained(path, **kwargs).eval().requires_grad_(False)
    check = collapse_check(script_args, training_args.output_dir)
    score_label_positions_only()  # policy and reference project only the response positions on CPU too
    trainer = DPOTrainer(model=model, ref_model=ref_model, args=training_args, train_dataset=train,
                         eval_dataset=val, processing_class=tokenizer, peft_config=peft, callbacks=[check])
    extra = {"reference_model": model_args.model_name_or_path, "data": stats, "train_pairs": len(train),
             "learning_rate": training_args.learning_rate, "beta": training_args.beta,
             "max_prompt_length": script_args.max_prompt_length, "max_length": training_args.max_length,
             "loss_type": list(training_args.loss_type), "variant": script_args.variant,
             "max_train_samples": script_args.max_train_samples, "batch_size": _global_batch(training_args),
             "reference": "the SFT model: the same weights with the LoRA adapter disabled" if peft is not None
             else "the SFT model: a frozen copy loaded from model_name_or_path",
             **_lora_facts(model_args)}
    return StageTrainer(trainer, check, extra, path)


def run_stage(stage: str, script_args: AlignmentArguments, training_args: Any, model_args: Any) -> dict[str, Any]:
    """One SFT or DPO run (or an LR grid of them) -> the results dict written to ``eval_results.json``."""
    import torch

    build = {"sft": build_sft_trainer, "dpo": build_dpo_trainer}[stage]

    def once(args: Any) -> dict[str, Any]:
        from convohub.training.models import check_mixed_precision

        check_mixed_precision(model_args, args)
        torch.manual_seed(args.seed)
        run = build(script_args, args, model_args)
        run.trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
        return _finish(run, stage, Path(args.output_dir), model_args)

    if script_args.learning_rate_grid:
        return run_lr_grid(script_args, training_args, once)
    return once(training_args)


def parse_stage_args(parser: Any, argv: Sequence[str] | None) -> tuple[Any, Any, Any]:
    return parser.parse_args_and_config(list(argv) if argv is not None else None, fail_with_unknown_args=True)


# ------------------------------------------------------------------------------------- release helpers
def recipe_paths(repo: Path, profile: str) -> tuple[Path, Path]:
    """(SFT recipe, DPO recipe) of a profile: ``tiny`` or ``paper`` (or any recipe stem, e.g. paper_llama3)."""
    return repo / SFT_DIR / f"{profile}.yaml", repo / DPO_DIR / f"{profile}.yaml"


def model_name(profile: str) -> str:
    return "wildfeedback-tiny-dpo" if profile == "tiny" else f"wildfeedback-{profile.replace('_', '-')}-dpo"


def launch_profile(profile: str) -> str:
    """The launch profile (accelerate config) of a recipe profile: ``tiny`` on CPU, every paper recipe on GPUs."""
    return "tiny" if profile == "tiny" else "paper"


def train(repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int, *, variant: str | None = None,
          sft_args: Sequence[str] = (), dpo_args: Sequence[str] = ()) -> Path:
    """SFT on the chosen responses, then DPO from the merged SFT model with the SFT model as reference.

    Each stage runs as its own ``accelerate launch`` subprocess (:func:`convohub.training.launch.run_script`)
    with the profile's recipe; ``variant`` selects the preference variant to train on; ``sft_args`` /
    ``dpo_args`` are further CLI overrides (tests swap in the random tiny model). Returns the DPO model
    folder (``output_dir/dpo``); the SFT model stays in ``output_dir/sft``; each stage's log is kept next to
    it (``sft.log``, ``dpo.log``).
    """
    from convohub.training.launch import run_script

    sft_recipe, dpo_recipe = recipe_paths(repo, profile)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    common = ["--dataset_path", str(dataset_dir), "--seed", str(seed), "--data_seed", str(seed)]
    if variant:
        common += ["--variant", variant]
    sft_out, dpo_out = out / "sft", out / "dpo"
    run_script(repo / SFT_DIR / "train_wildfeedback_sft.py", sft_recipe,
               ["--output_dir", str(sft_out), *common, *sft_args], profile=launch_profile(profile),
               log_file=out / "sft.log")
    run_script(repo / DPO_DIR / "train_wildfeedback_dpo.py", dpo_recipe,
               ["--output_dir", str(dpo_out), "--model_name_or_path", str(sft_out), *common, *dpo_args],
               profile=launch_profile(profile), log_file=out / "dpo.log")
    return dpo_out


def read_results(model_dir: Path) -> dict[str, Any]:
    from convohub.hub import read_json

    return read_json(Path(model_dir) / RESULTS_FILE)


def _pct(value: float) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}"


def _nan(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


#: Labels of the evaluation's comparisons, as the card names the baselines.
BASELINE_LABELS = {"sft": "SFT model (stage 1)", "base": "base model", "baseline": "baseline"}


def agreement_line(agreement: Mapping[str, Mapping[str, Any]]) -> str:
    """"judge: X, agreement a/n on the hand-labelled set (t ties, w wrong); lexical: b/n" for the card."""
    parts = []
    for key, item in agreement.items():
        name = "lexical (word overlap)" if key == "lexical" else f"`{item['judge']}`"
        parts.append(f"{name}: {item['agree']}/{item['n']} ({item['ties']} ties, {item['wrong']} wrong, "
                     f"{item['parse_failures']} unparsed; {item['prompt_style']} prompt)")
    return "; ".join(parts)


def _verdicts(results: Mapping[str, Any]) -> list[str]:
    """Whether after beats before, read from the measured numbers (never asserted by the card)."""
    verdicts = []
    for label, comparison in results.get("comparisons", {}).items():
        for key, setting in (("with_checklist", "with"), ("without_checklist", "without")):
            r = comparison.get(key) or {}
            if _nan(r.get("win")):
                verdicts.append(f"vs the {BASELINE_LABELS.get(label, label)} {setting} the checklist: nothing judged")
                continue
            word = "beats" if r["win"] > r["lose"] else "ties" if r["win"] == r["lose"] else "does not beat"
            verdicts.append(f"{word} the {BASELINE_LABELS.get(label, label)} {setting} the checklist "
                            f"({_pct(r['win'])}% win / {_pct(r['lose'])}% lose)")
    return verdicts


def _comparison_table(results: Mapping[str, Any]) -> str:
    from convohub.hub import markdown_table
    from convohub.training.models import hub_id

    rows = []
    for label, comparison in results.get("comparisons", {}).items():
        for key, setting in (("with_checklist", "with checklist"), ("without_checklist", "without checklist")):
            r = comparison.get(key)
            if r:
                shown = hub_id(str(comparison["baseline"])) or Path(str(comparison["baseline"])).name
                rows.append([f"{BASELINE_LABELS.get(label, label)} (`{shown}`)", setting,
                             _pct(r["win"]), _pct(r["tie"]), _pct(r["lose"]),
                             "n/a" if _nan(r["mean_reward"]) else f"{r['mean_reward']:.1f}", r["n_judged"],
                             r["parse_failures"]])
    return markdown_table(["against", "setting", "win %", "tie %", "lose %", "mean reward", "judged",
                           "parse failures"], rows)


def _training_table(sft: Mapping[str, Any], dpo: Mapping[str, Any]) -> str:
    from convohub.hub import markdown_table

    def stage_row(name: str, r: Mapping[str, Any], examples: Any, margin: bool) -> list[Any]:
        return [name, examples, r.get("steps", "?"), r.get("batch_size", "?"), r.get("learning_rate", "?"),
                f"{r.get('loss_first', 'n/a')} -> {r.get('loss_last', 'n/a')}",
                f"{r.get('reward_margin_first', 'n/a')} -> {r.get('reward_margin_last', 'n/a')}" if margin else "-",
                r.get("reward_accuracy_last", "n/a") if margin else "-",
                f"{r['train_seconds']:.0f} s" if r.get("train_seconds") is not None else "n/a"]

    return markdown_table(["stage", "examples", "steps", "batch", "LR", "loss first -> last",
                           "reward margin first -> last", "reward accuracy last", "train time"],
                          [stage_row("SFT", sft, sft.get("train_examples", "?"), False),
                           stage_row("DPO", dpo, dpo.get("train_pairs", "?"), True)])


def _win_rates(results: Mapping[str, Any], dataset_id: str, judge: str) -> list[Any]:
    """The model-index entries: each comparison's measured win rate, the judge in the metric's name."""
    from huggingface_hub import EvalResult

    metrics = []
    for label, comparison in results.get("comparisons", {}).items():
        for key, name in (("with_checklist", "checklist"), ("without_checklist", "no_checklist")):
            r = comparison.get(key)
            if r and not _nan(r["win"]):
                metrics.append(EvalResult(
                    task_type="text-generation", dataset_name=DATASET_REPO, dataset_type=dataset_id,
                    dataset_config="test", dataset_split="test", metric_type=f"win_rate_vs_{label}_{name}",
                    metric_name=f"Win rate vs {BASELINE_LABELS.get(label, label)} ({name.replace('_', ' ')}, "
                                f"judge: {judge})", metric_value=round(float(r["win"]), 4)))
    return metrics


def card_values(card: Any) -> Any:
    """The aligned model's card: the base model, the data variant, both stage recipes, what training used
    (pairs, steps, LoRA, LR, time), the measured checklist-judge results against each baseline and the judge's
    measured agreement with the hand-labelled set. ``card.results`` is the output of
    :func:`convohub.wildfeedback.evaluation.evaluate` plus ``sft``/``dpo`` (each stage's :func:`read_results`)
    and ``judge_agreement`` ({name: :func:`convohub.metrics.checklist_judge.judge_agreement` output})."""
    from convohub.hub import ModelCardInfo
    from convohub.model_spec import Block, block
    from convohub.training.models import TINY_PREFIX, hub_id

    results, recipe = card.results, Path(card.recipe)
    dpo, sft = results.get("dpo", {}), results.get("sft", {})
    base_name = str(sft.get("base_model") or "")
    base_id = hub_id(base_name) if base_name else None
    random_base = base_name.startswith(TINY_PREFIX)
    judge = str(results.get("judge", "unknown"))
    lexical = judge.startswith("convohub-lexical")
    lora, data = dpo.get("lora") or {}, dpo.get("data", {})
    variants = data.get("variants", {})
    agreement = results.get("judge_agreement") or {}
    verdicts = _verdicts(results)
    caps = [f"{stage} capped at {r['max_train_samples']} pairs (`max_train_samples`)"
            for stage, r in (("SFT", sft), ("DPO", dpo)) if r.get("max_train_samples")]
    sft_recipe = recipe.parent.parent / Path(SFT_DIR).name / recipe.name
    recipes = "".join(f"`{p.relative_to(p.parent.parent.parent) if len(p.parts) > 2 else p}`:\n\n```yaml\n"
                      f"{p.read_text(encoding='utf-8')}```\n\n" for p in (sft_recipe, recipe) if p.is_file())
    info = ModelCardInfo(
        license="apache-2.0" if base_id == "HuggingFaceTB/SmolLM2-135M-Instruct" else "mit" if random_base else "other",
        pipeline_tag="text-generation",
        base_model=base_id,
        datasets=(card.dataset_id,),
        tags=("convohub", "wildfeedback", "dpo", "sft", "trl", "alignment", *(("lora", "peft") if lora else ())),
        results=tuple(_win_rates(results, card.dataset_id, judge)),
    )
    values: dict[str, Any] = {
        "beta": dpo.get("beta", 0.1), "reference": dpo.get("reference", "the SFT model"),
        "base_note": block(random_base, "random_base", "hub_base"), "base": base_id or base_name,
        "method": block(bool(lora), "lora", "full"),
        **{f"lora_{k}": lora.get(k) for k in ("r", "alpha", "target_modules")},
        "variants": ", ".join(f"`{k}` ({v} pairs)" for k, v in sorted(variants.items())) or "unknown",
        "selected": block(bool(dpo.get("variant")), "selected"),
        "sft_script": f"{SFT_DIR}/train_wildfeedback_sft.py",
        "prompt_style": results.get("prompt_style", "wb-reward"), "n": results.get("n", 0),
        "max_new_tokens": results.get("max_new_tokens", "?"), "judge": judge,
        "comparison_table": _comparison_table(results),
        "outcome": block(bool(verdicts), "outcome"), "verdicts": "; ".join(verdicts),
        "agreement": block(bool(agreement), "agreement"),
        "small_scale": block(card.tiny or lexical, "small_scale"),
        "small_model": Block("random_model" if random_base else "small_model"),
        "sft_steps": sft.get("steps", "?"), "dpo_steps": dpo.get("steps", "?"),
        "lexical_note": block(lexical, "lexical_note"),
        "training_table": _training_table(sft, dpo),
        "caps": block(bool(caps), "caps"), "capped": "; ".join(caps),
        "max_prompt_length": dpo.get("max_prompt_length", "n/a"), "max_length": dpo.get("max_length", "n/a"),
        **{k: data.get(k, 0) for k in ("truncated_prompts", "dropped_too_long", "dropped_identical")},
        "sft_collapse_check": sft.get("collapse_check", "not run"),
        "dpo_collapse_check": dpo.get("collapse_check", "not run"),
        "recipes": recipes.strip(),
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
    }
    if agreement:
        n = next(iter(agreement.values()))["n"]
        values |= {"agreement_n": n, "agreement_line": agreement_line(agreement), "chance": n // 2}
    return info, values


def _spec() -> Any:
    from convohub.model_spec import ModelSpec

    profiles = ("tiny", "paper", "paper_llama3", "paper_mistral", "paper_phi3_qlora")
    return ModelSpec(
        name="wildfeedback_dpo",
        # the published (DPO) stage; :func:`train` runs the SFT stage before it, and the card names both
        script=f"{DPO_DIR}/train_wildfeedback_dpo.py",
        recipes={p: recipe_paths(Path("."), p)[1].as_posix() for p in profiles},
        repos={p: model_name(p) for p in profiles},
        dataset=DATASET_REPO,
        template="wildfeedback_dpo",
        card_values=card_values,
        # measured by the system's own step: the checklist judge is the release's named judge
        evaluate=None,
    )


#: The aligned model (SFT then DPO), as the release publishes it.
SPEC = _spec()
