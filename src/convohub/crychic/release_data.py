"""The training data of CRyCHIc's three models as the release builds it (``crychic-training-data`` step).

Why a profile table: the IFQC sentences are synthesised by an LLM, and offline that is SmolLM2 on CPU
(about 0.8 s per call and 5.6 s per *accepted* sentence, because it often misses the requested length), so the
data build is the slow part of CRyCHIc's release. The tiny profile asks for one sentence per synthesis cell
(:data:`TINY_IFQC`); the paper profile keeps the builders' defaults, which are still far below the paper's
~4.5k IFQC sentences and ~15k simplifier prompts (those need an endpoint LLM: ``--llm``).

The build itself is :func:`convohub.crychic.training_data.build_training_data`; its stage files and LLM
response cache live under the folder's ``work/``, so a killed release resumes mid-synthesis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.crychic.ifqc_data import IFQCSettings
from convohub.crychic.judge_data import JudgeSettings
from convohub.crychic.simplifier_data import AUTO, RULES_NAME, SimplifierSettings

#: Polite cells per explicit cell in the tiny profile (``convohub.crychic.ifqc_data``: without them thanks go to
#: the previous turn).
POLITE_SHARE = 1 / 3
#: Tiny profile IFQC: one sentence per (template, ending, length band, domain) cell instead of two, over four
#: of the eight domains, and two tries per cell instead of four: 96 first requests instead of 384. Sentences may
#: miss their length band by 3 words: with exact bands SmolLM2 had 13 of 48 cells accepted after 2 tries (62 of
#: 78 rejections were the length). Measured 2026-11-26 on 2 cores: two domains gave 22 sentences in 38 s and an
#: IFQC at 0.571 accuracy on the 84 hand-written follow-ups (convohub/data/crychic_ifqc_gold.jsonl; 0.5 before
#: training); four domains gave 56 sentences in 69 s and 0.988. Simplifier and judge rows keep their defaults:
#: they are built without a model and take seconds.
TINY_IFQC = IFQCSettings(per_cell=1, domains=("cooking", "travel", "programming", "health"), max_attempts=2,
                         length_slack=3, polite_share=POLITE_SHARE)
#: Tiny profile simplifier labeller: the rule labeller by name (its agreement with the hand-labelled sentences
#: is still measured and recorded). ``auto`` would spend ~130 s of SmolLM2 on the 132 hand-labelled sentences
#: to re-find what stop 18 measured: rules accuracy 0.87 vs SmolLM2 0.34. ``cues-v2``: 0.886 on all 132, 28 of
#: the 30 written after it was frozen (``cues-v1``: 25 of those 30).
TINY_LABELLER = RULES_NAME


def data_settings(profile: str, seed: int) -> tuple[IFQCSettings, SimplifierSettings, JudgeSettings]:
    """The (IFQC, simplifier, judge) settings of ``profile`` with the release's ``seed``."""
    if profile == "tiny":
        ifqc = IFQCSettings(**{**TINY_IFQC.__dict__, "seed": seed})
    elif profile == "paper":
        ifqc = IFQCSettings(seed=seed)
    else:
        raise ValueError(f"unknown profile {profile!r} (tiny, paper)")
    return ifqc, SimplifierSettings(seed=seed), JudgeSettings(seed=seed)


def build_release_training_data(ctx: Any) -> Path:
    """Build the three tasks' rows into the release's scratch folder; returns the folder the training
    scripts' ``--dataset_path`` names.

    The IFQC synthesiser is the configured LLM, else the offline SmolLM2 (there is no rule stand-in for
    writing sentences, so ``--llm rules`` still synthesises with SmolLM2 and says so). The simplifier's
    labeller is the one that agrees better with the hand-labelled sentences (rules vs that LLM) in the paper
    profile, and the rule labeller in the tiny profile (:data:`TINY_LABELLER`) and under ``--llm rules``.
    """
    from convohub.crychic.training_data import build_training_data

    out = ctx.scratch("crychic", f"training-data-{ctx.profile}")
    llm = ctx.chat_llm()
    labeller = RULES_NAME if ctx.use_rules else TINY_LABELLER if ctx.profile == "tiny" else AUTO
    if ctx.use_rules:
        ctx.log(f"IFQC sentences: synthesised by {llm.name} (no rule stand-in writes sentences)")
    ifqc, simplifier, judge = data_settings(ctx.profile, ctx.seed)
    record = build_training_data(out, llm=llm, labeller=labeller, ifqc=ifqc, simplifier=simplifier, judge=judge)
    for task, entry in record.items():
        ctx.log(f"{task}: rows {entry.get('rows')} by {entry.get('produced_by')}")
    return out
