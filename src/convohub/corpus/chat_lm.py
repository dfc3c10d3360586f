"""Train, evaluate and publish the causal LM fine-tuned on the WildChat-format corpus.

Training runs the script in training/chat_lm/ with the profile's recipe (``tiny.yaml`` offline,
``paper.yaml`` at paper scale); evaluation measures held-out perplexity of the base model and of the
trained model on the test split with :func:`convohub.training.perplexity.perplexity`; the card reports
exactly those measured numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.hub import HubTarget, MetricResult, ModelCardInfo, write_model

DATASET_REPO = "wildchat-sample"


def model_name(profile: str) -> str:
    return "wildchat-chat-lm-tiny" if profile == "tiny" else "wildchat-chat-lm-qwen3-8b"


def recipe_path(repo: Path, profile: str) -> Path:
    return repo / "training" / "chat_lm" / f"{profile}.yaml"


def train(repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int) -> Path:
    """Run the training script on the built dataset; returns the trained model folder."""
    from convohub.cli import load_script

    script = load_script(repo / "training" / "chat_lm" / "train_chat_lm.py")
    script.main(["--config", str(recipe_path(repo, profile)), "--dataset_path", str(dataset_dir),
                 "--output_dir", str(output_dir), "--seed", str(seed), "--data_seed", str(seed)])
    return output_dir


def evaluate(model_dir: Path, base_model: str, dataset_dir: Path, *, split: str = "test",
             max_length: int = 256) -> dict[str, Any]:
    """Held-out perplexity of the base and the trained model on ``split`` (all conversations)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from convohub.cli import load_script
    from convohub.hub import load_local
    from convohub.paths import repo_root
    from convohub.training.models import resolve_model
    from convohub.training.perplexity import perplexity

    rows = load_local(dataset_dir, "conversations", split)
    to_messages = load_script(repo_root() / "training" / "chat_lm" / "train_chat_lm.py").conversation_to_messages
    results: dict[str, Any] = {"split": split, "conversations": len(rows)}
    for key, path in (("base", resolve_model(base_model)), ("trained", str(model_dir))):
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
        texts = [tokenizer.apply_chat_template(to_messages(r), tokenize=False) for r in rows]
        results[f"perplexity_{key}"] = round(perplexity(model, tokenizer, texts, max_length=max_length), 4)
    return results


def publish(target: HubTarget, profile: str, model_dir: Path, base_model: str, results: dict[str, Any],
            recipe: Path) -> Path:
    """Write the model repo with a card carrying the measured perplexities."""
    name = model_name(profile)
    dataset_id = target.repo_id(DATASET_REPO)
    base_note = ("a tiny Llama-style model (2 layers, hidden size 64) randomly initialised by "
                 "`convohub.tiny` with a BPE tokenizer trained locally" if profile == "tiny" else f"`{base_model}`")
    description = (
        f"A causal language model fine-tuned on the conversations of [`{dataset_id}`]"
        f"(https://huggingface.co/datasets/{dataset_id}) (train split): the corpus fine-tuning baseline (method "
        "(c)) of *From Chat Logs to Collective Insights: Aggregative Question Answering*. Each conversation "
        "is one chat whose system line gives the date, the user and the country. Base model: "
        f"{base_note}. Trained by `training/chat_lm/train_chat_lm.py` with the `{recipe.name}` recipe."
    )
    usage = (
        "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
        f'tok = AutoTokenizer.from_pretrained("{target.repo_id(name)}")\n'
        f'model = AutoModelForCausalLM.from_pretrained("{target.repo_id(name)}")\n'
        'messages = [{"role": "system", "content": "Time: 2023-05-01, user u1 is from France."},\n'
        '            {"role": "user", "content": "How do I reverse a list in Python?"}]\n'
        "inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors=\"pt\",\n"
        "                                 return_dict=True)\n"
        "out = model.generate(**inputs, max_new_tokens=40, do_sample=False)\n"
        "print(tok.decode(out[0, inputs[\"input_ids\"].shape[1]:], skip_special_tokens=True))\n```"
    )
    evaluation = (
        f"Token-level perplexity on all {results['conversations']} conversations of the `{results['split']}` "
        f"split (users unseen in training), measured by `convohub.training.perplexity`:\n\n"
        f"| model | perplexity |\n|---|---|\n| base (before fine-tuning) | {results['perplexity_base']} |\n"
        f"| this model | {results['perplexity_trained']} |"
    )
    limitations = ("The tiny profile demonstrates the pipeline on synthetic conversations: the model "
                   "produces corpus-like text, not useful answers." if profile == "tiny" else
                   "Trained on real user conversations; it can reproduce their content, including toxic text.")
    card = ModelCardInfo(
        license="apache-2.0",
        description=description,
        pipeline_tag="text-generation",
        base_model=None if profile == "tiny" else base_model,
        datasets=(dataset_id,),
        tags=("convohub", "wildchat", "trl", "sft"),
        results=(MetricResult(task_type="text-generation", dataset_name="wildchat-sample",
                              dataset_type=dataset_id, dataset_config="conversations",
                              dataset_split=results["split"], metric_type="perplexity",
                              metric_name="Perplexity", value=results["perplexity_trained"]),),
        citation=AQA_CITATION,
        sections={"Usage": usage, "Evaluation": evaluation, "Training recipe": f"```yaml\n{recipe.read_text()}```",
                  "Limitations": limitations},
    )
    return write_model(target, name, model_dir, card)


AQA_CITATION = """@inproceedings{zhang2025aqa,
  title     = {From Chat Logs to Collective Insights: Aggregative Question Answering},
  author    = {Wentao Zhang and Woojeong Kim and Yuntian Deng},
  booktitle = {Proceedings of the 2025 Conference on Empirical Methods in Natural Language Processing},
  year      = {2025}
}"""
