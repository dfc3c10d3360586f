"""WildChat-format corpus explorer: browse the `wildchat-sample` conversations by country and language,
try the PII scrubber convohub applies before publishing, and sample from the chat LM fine-tuned on the
corpus.

Set CONVOHUB_DATASET / CONVOHUB_MODEL to a Hub id or a local folder (the release's hub root works
offline). `demo` is built at import; it launches only when run as a script.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import gradio as gr

from convohub.charts import ZERO_BASED

DATASET = os.environ.get("CONVOHUB_DATASET", "convohub/wildchat-sample")
MODEL = os.environ.get("CONVOHUB_MODEL", "convohub/wildchat-chat-lm-tiny")
ALL = "(all)"


@lru_cache(maxsize=1)
def _conversations() -> Any:
    import datasets

    return datasets.load_dataset(DATASET, "conversations", split="test")


@lru_cache(maxsize=1)
def _model() -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL), AutoModelForCausalLM.from_pretrained(MODEL)


def facets() -> tuple[list[str], list[str]]:
    """Countries and languages present in the split, for the dropdowns."""
    ds = _conversations()
    return [ALL, *sorted(set(ds["country"]))], [ALL, *sorted(set(ds["language"]))]


def facet_choices() -> tuple[Any, Any]:
    """The country and language dropdowns filled with what the split holds, when the page loads (building
    them at import would read the dataset before the Space has even started)."""
    countries, languages = facets()
    return gr.Dropdown(choices=countries), gr.Dropdown(choices=languages)


def _matching(country: str, language: str) -> list[dict[str, Any]]:
    return [rec for rec in _conversations()
            if (country in (ALL, None, "") or rec["country"] == country)
            and (language in (ALL, None, "") or rec["language"] == language)]


def browse(country: str, language: str, limit: int = 50) -> tuple[list[list[Any]], Any, Any]:
    """Rows (id, user, time, turns, first prompt) of the first ``limit`` conversations matching the filters,
    and how many of all matching conversations come from each country and each language (as bar charts)."""
    from convohub.charts import count_frame

    matching = _matching(country, language)
    rows = []
    for rec in matching[:limit]:
        first = next((t["content"] for t in rec["turns"] if t["role"] == "user"), "")
        rows.append([rec["conversation_id"], rec["user_id"], str(rec["timestamp"])[:16], len(rec["turns"]),
                     first[:120]])
    return (rows, count_frame((r["country"] for r in matching), "country"),
            count_frame((r["language"] for r in matching), "language"))


def show(conversation_id: str) -> list[dict[str, str]]:
    """The turns of one conversation as chat messages."""
    for rec in _conversations():
        if rec["conversation_id"] == conversation_id.strip():
            return [{"role": t["role"], "content": t["content"]} for t in rec["turns"]]
    raise gr.Error(f"no conversation {conversation_id!r} in the test split")


def scrub(text: str) -> tuple[str, dict[str, int], list[tuple[str, str | None]]]:
    """The PII scrubber convohub runs before publishing any user text, with what it replaced and the
    original text with each replaced span marked by its type (for ``gr.HighlightedText``)."""
    from convohub.conversations import scrub_pii_with_counts
    from convohub.conversations.pii import pii_spans

    marked: list[tuple[str, str | None]] = []
    cursor = 0
    for start, end, kind in pii_spans(text):
        marked += [(text[cursor:start], None), (text[start:end], kind)]
        cursor = end
    marked.append((text[cursor:], None))
    return (*scrub_pii_with_counts(text), [(piece, kind) for piece, kind in marked if piece])


def generate(prompt: str, max_new_tokens: int = 40) -> str:
    """Greedy continuation of a user prompt by the fine-tuned chat LM."""
    tokenizer, model = _model()
    messages = [{"role": "user", "content": prompt}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)
    out = model.generate(**ids, max_new_tokens=int(max_new_tokens), do_sample=False,
                         pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


with gr.Blocks(title="WildChat-format corpus explorer") as demo:
    gr.Markdown("# WildChat-format corpus explorer\nConversations of the test split of "
                f"`{DATASET}`, the PII scrubber, and the chat LM `{MODEL}`.")
    with gr.Tab("Browse"):
        with gr.Row():
            country_in = gr.Dropdown([ALL], value=ALL, label="country", allow_custom_value=True)
            language_in = gr.Dropdown([ALL], value=ALL, label="language", allow_custom_value=True)
        table = gr.Dataframe(headers=["conversation_id", "user_id", "time", "turns", "first prompt"],
                             interactive=False)
        with gr.Row():
            by_country = gr.BarPlot(x="country", y="count", sort="-y", y_lim=ZERO_BASED,
                                    label="conversations per country", elem_id="country-chart")
            by_language = gr.BarPlot(x="language", y="count", sort="-y", y_lim=ZERO_BASED,
                                     label="conversations per language", elem_id="language-chart")
        conv_id = gr.Textbox(label="conversation_id to open")
        chat = gr.Chatbot(label="conversation")
        gr.Button("Filter").click(browse, [country_in, language_in], [table, by_country, by_language],
                                  api_name="browse")
        gr.Button("Open").click(show, conv_id, chat, api_name="show")
        demo.load(facet_choices, None, [country_in, language_in], api_visibility="private")
    with gr.Tab("PII scrubber"):
        from convohub.conversations.pii import NOT_SCRUBBED

        gr.Markdown(NOT_SCRUBBED)
        raw = gr.Textbox(label="text", value="Mail me at ana.lopez@example.com or call +1 415-555-0100; "
                                             "IBAN DE89 3704 0044 0532 0130 00.")
        found = gr.HighlightedText(label="what was found", combine_adjacent=False, show_legend=True)
        scrubbed, counts = gr.Textbox(label="scrubbed"), gr.JSON(label="replacements")
        gr.Button("Scrub").click(scrub, raw, [scrubbed, counts, found], api_name="scrub")
    with gr.Tab("Chat LM"):
        prompt = gr.Textbox(label="prompt", value="How do I reverse a list in Python?")
        n_tokens = gr.Slider(8, 128, value=40, step=8, label="max new tokens")
        answer = gr.Textbox(label="model output")
        gr.Button("Generate").click(generate, [prompt, n_tokens], answer, api_name="generate")

# One request at a time per event (generation shares one model and a CPU Space has few cores); up to 128
# visitors wait in the queue instead of being refused. benchmarks/bench_spaces.py checks that 50 concurrent
# clients all get answers.
demo.queue(default_concurrency_limit=1, max_size=128)

if __name__ == "__main__":
    demo.launch()
