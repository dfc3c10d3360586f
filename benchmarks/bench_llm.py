"""Throughput of convohub's two LLM backends, each against its own baseline, run side by side.

1. Local backend (:class:`~convohub.llm.TransformersBackend` on SmolLM2-135M-Instruct): the same prompts
   generated in batches (``batch_size``, the backend's default path) vs one request at a time
   (``batch_size=1``). Goal: batching is faster (ratio > 1).
2. Local backend on prompts that share a system message and worked examples (as most pipeline steps do):
   the shared prefix run once per batch (the backend's path) vs the plain left-padded batch
   (``convohub.llm.local.MIN_SHARED_PREFIX`` raised out of reach). Goals: faster (ratio > 1), same answers.
3. Local backend on few-shot prompts of two kinds (two sets of worked examples, alternating, as ProMISe's
   suggestion slots are): batches cut by shared leading messages (``convohub.llm.local.plan_batches``, the
   backend's path) vs cut by length alone (``MIN_PREFIX_GROUP`` raised out of reach). Goal: faster (ratio > 1).
4. Endpoint client (:class:`~convohub.llm.EndpointBackend`) against `transformers serve` on the same
   model vs the server's own throughput, measured with a plain OpenAI client sending the same requests
   with the same concurrency. Goal: convohub's client keeps >= 0.9 of what the server delivers.

Tokens are counted with the model's tokenizer on the returned texts for every side, so the figures are
comparable; each side runs ``--repeats`` times and the best run counts (first runs warm caches up).

Run: ``python benchmarks/bench_llm.py [--prompts 16] [--max-new-tokens 32] [--concurrency 8]``
(a few minutes on two CPU cores). Prints one table and exits non-zero when a goal is missed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from convohub.llm import ChatRequest, EndpointBackend, make_backend
from convohub.llm.serving import serve
from convohub.models import smollm2_path

TOPICS = ("photosynthesis", "the French revolution", "binary search", "sourdough bread", "tides",
          "compound interest", "volcanoes", "the water cycle", "prime numbers", "jet lag", "rainbows",
          "recursion", "vaccines", "black holes", "the stock market", "honey bees")


def prompts(n: int, max_new_tokens: int) -> list[ChatRequest]:
    """``n`` different short questions, so a batch mixes prompt lengths as real steps do."""
    return [ChatRequest.from_prompt(f"Explain {TOPICS[i % len(TOPICS)]} in two sentences.",
                                    max_new_tokens=max_new_tokens) for i in range(n)]


FEW_SHOT_SYSTEM = ("You explain a subject to a curious adult in two plain sentences, without lists, jargon or "
                   "greetings, and you never repeat the question.")
FEW_SHOT = (("Explain magnets in two sentences.", "Magnets pull on iron because the tiny magnetic fields of their "
             "atoms line up. Opposite poles attract and like poles push each other away."),
            ("Explain yeast in two sentences.", "Yeast is a fungus that eats sugar and gives off carbon dioxide. "
             "The gas makes bread dough rise and puts the bubbles in beer."))


def few_shot_prompts(n: int, max_new_tokens: int, kinds: int = 1) -> list[ChatRequest]:
    """``n`` questions behind one system message and worked exchanges (a shared prompt prefix); with ``kinds``
    2, every other prompt shows the two exchanges in the other order (two prefixes, alternating)."""
    def shots(kind: int) -> list[dict[str, str]]:
        pairs = FEW_SHOT if kind == 0 else FEW_SHOT[::-1]
        return [m for q, a in pairs for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]

    return [ChatRequest([{"role": "system", "content": FEW_SHOT_SYSTEM}, *shots(i % kinds),
                         {"role": "user", "content": f"Explain {TOPICS[i % len(TOPICS)]} in two sentences."}],
                        max_new_tokens=max_new_tokens) for i in range(n)]


def best_rate(run: Callable[[], list[str]], count: Callable[[list[str]], int], repeats: int) -> tuple[float, int]:
    """(best tokens/s over ``repeats`` runs, tokens of that run)."""
    best, tokens = 0.0, 0
    for _ in range(repeats):
        start = time.perf_counter()
        texts = run()
        seconds = time.perf_counter() - start
        n = count(texts)
        if n / seconds > best:
            best, tokens = n / seconds, n
    return best, tokens


def raw_openai(url: str, model: str, requests: Sequence[ChatRequest], concurrency: int) -> list[str]:
    """The server's own throughput: the OpenAI client, ``concurrency`` requests in flight, no retries."""
    from openai import OpenAI

    client = OpenAI(base_url=url, api_key="none", max_retries=0, timeout=300)

    def one(request: ChatRequest) -> str:
        reply = client.chat.completions.create(model=model, messages=request.messages,  # type: ignore[arg-type]
                                               max_tokens=request.max_new_tokens, temperature=0.0)
        return reply.choices[0].message.content or ""

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, requests))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8, help="local backend batch size")
    parser.add_argument("--concurrency", type=int, default=8, help="endpoint requests in flight")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300, help="endpoint request timeout (s)")
    parser.add_argument("--skip-endpoint", action="store_true", help="only the local comparison")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    folder = smollm2_path()
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def count(texts: list[str]) -> int:
        return sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)

    requests = prompts(args.prompts, args.max_new_tokens)
    rows: list[tuple[str, float, int]] = []
    batched = make_backend("smollm2", batch_size=args.batch_size)
    single = make_backend("smollm2", batch_size=1)
    rows.append((f"local, batches of {args.batch_size}",
                 *best_rate(lambda: [r.text for r in batched.chat(requests)], count, args.repeats)))
    rows.append(("local, one request at a time",
                 *best_rate(lambda: [r.text for r in single.chat(requests)], count, args.repeats)))
    goals = [("local batched / one at a time", rows[0][1] / rows[1][1], 1.0)]

    import convohub.llm.local as local_module

    few_shot = few_shot_prompts(args.prompts, args.max_new_tokens)
    answers: dict[str, list[str]] = {}

    def side(name: str) -> Callable[[], list[str]]:
        def run() -> list[str]:
            answers[name] = [r.text for r in batched.chat(few_shot)]
            return answers[name]
        return run

    rows.append((f"local, few-shot, shared prefix run once x{args.batch_size}",
                 *best_rate(side("shared"), count, args.repeats)))
    saved, local_module.MIN_SHARED_PREFIX = local_module.MIN_SHARED_PREFIX, 10**9
    try:
        rows.append((f"local, few-shot, plain padded batch x{args.batch_size}",
                     *best_rate(side("plain"), count, args.repeats)))
    finally:
        local_module.MIN_SHARED_PREFIX = saved
    goals.append(("few-shot shared prefix / plain", rows[-2][1] / rows[-1][1], 1.0))
    same = sum(a == b for a, b in zip(answers["shared"], answers["plain"], strict=True))
    goals.append(("few-shot answers equal to the plain path's (share)", same / len(few_shot), 1.0))

    two_kinds = few_shot_prompts(args.prompts, args.max_new_tokens, kinds=2)
    rows.append((f"local, two prefixes, cut by prefix x{args.batch_size}",
                 *best_rate(lambda: [r.text for r in batched.chat(two_kinds)], count, args.repeats)))
    saved, local_module.MIN_PREFIX_GROUP = local_module.MIN_PREFIX_GROUP, 10**9  # no group: longest first
    try:
        rows.append((f"local, two prefixes, cut by length x{args.batch_size}",
                     *best_rate(lambda: [r.text for r in batched.chat(two_kinds)], count, args.repeats)))
    finally:
        local_module.MIN_PREFIX_GROUP = saved
    goals.append(("two prefixes: cut by prefix / by length", rows[-2][1] / rows[-1][1], 1.0))

    if not args.skip_endpoint:
        with tempfile.TemporaryDirectory() as tmp, serve(folder, Path(tmp) / "serve.log") as (url, model):
            client = EndpointBackend(url, model, max_concurrency=args.concurrency, timeout=args.timeout,
                                     max_retries=0)
            raw_openai(url, model, requests[:2], 2)  # warm-up: first requests pay for compilation/caches
            rows.append((f"server, OpenAI client x{args.concurrency}",
                         *best_rate(lambda: raw_openai(url, model, requests, args.concurrency), count,
                                    args.repeats)))
            rows.append((f"convohub EndpointBackend x{args.concurrency}",
                         *best_rate(lambda: [r.text for r in client.chat(requests)], count, args.repeats)))
            if client.stats["failures"]:
                print(f"EndpointBackend failures: {client.stats['failures']} (raise --timeout?)")
        goals.append(("endpoint client / server", rows[-1][1] / rows[-2][1], 0.9))

    print(f"{args.prompts} prompts, max_new_tokens {args.max_new_tokens}, best of {args.repeats} runs")
    print(f"{'side':40s} {'tokens/s':>9s} {'tokens':>7s}")
    for name, rate, tokens in rows:
        print(f"{name:40s} {rate:9.1f} {tokens:7d}")
    missed = 0
    for name, ratio, goal in goals:
        ok = ratio >= goal
        missed += not ok
        print(f"{name}: {ratio:.2f} (goal >= {goal}) {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
