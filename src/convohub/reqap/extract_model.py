"""Train, evaluate and publish ReQAP's EXTRACT model (release helpers; the release steps wire them).

Training launches training/reqap_extract/train_reqap_extract.py under ``accelerate launch`` with the profile's
recipe (``tiny.yaml`` offline, ``paper.yaml`` at paper scale) on a built PerQA dataset folder
(:func:`convohub.training.runs.run_recipe`). Evaluation derives the held-out pairs of one split (the test
personas for the card) with the pair settings the run itself used -- read from the ``training_args.json`` the
script saved next to the model, so CLI overrides count -- and measures greedy exact match with
:func:`convohub.reqap.extract_training.exact_match`; the card reports those measured numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.hub import HubTarget, MetricResult, ModelCardInfo, write_model
from convohub.perqa.dataset import REQAP_CITATION

DATASET_REPO = "perqa"
SCRIPT = Path("training") / "reqap_extract" / "train_reqap_extract.py"


def model_name(profile: str) -> str:
    return "reqap-extract-tiny" if profile == "tiny" else "reqap-extract-bart-base"


def recipe_path(repo: Path, profile: str) -> Path:
    return Path(repo) / "training" / "reqap_extract" / f"{profile}.yaml"


def train(repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int, *,
          extra: tuple[str, ...] = ()) -> Path:
    """Launch the training script with the profile's recipe on the built PerQA folder (``extra``: more CLI
    overrides); returns the trained model folder."""
    from convohub.training.runs import run_recipe

    return run_recipe(Path(repo) / SCRIPT, recipe_path(repo, profile), Path(dataset_dir), Path(output_dir), seed,
                      profile=profile, extra=extra)


def evaluate(model_dir: Path, dataset_dir: Path, split: str = "test", *, max_pairs: int | None = 1000,
             seed: int | None = None) -> dict[str, Any]:
    """Greedy exact match of the trained model on held-out pairs of ``split`` (personas unseen in training).

    Pairs are derived like the training run's (its saved pair settings and seed; ``seed`` overrides the
    seed), then a seeded sample of ``max_pairs`` is scored; per-kind exact match and the effect of the saved
    ``no_repeat_ngram_size`` (how many references it blocks, exact match without it) are included.
    """
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from convohub.reqap.extract_pairs import PairConfig, pairs_from_dataset
    from convohub.reqap.extract_training import exact_match, select_eval_pairs
    from convohub.training.runs import saved_arguments

    arguments = saved_arguments(model_dir)
    settings = arguments["script"]
    seed = int(arguments["training"]["seed"]) if seed is None else seed
    config = PairConfig(seed=seed, alias_weight=float(settings["alias_weight"]),
                        with_persona_names=bool(settings["with_persona_names"]),
                        max_events_per_source=settings["max_events_per_source"])
    pairs = select_eval_pairs(pairs_from_dataset(dataset_dir, split, config), max_pairs, seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    kw = {"max_source_length": int(settings["max_source_length"]),
          "max_new_tokens": int(settings["max_target_length"])}
    results: dict[str, Any] = {"split": split, **exact_match(model, tokenizer, pairs, **kw),
                               "pair_settings": {"alias_weight": config.alias_weight,
                                                 "with_persona_names": config.with_persona_names,
                                                 "max_events_per_source": config.max_events_per_source,
                                                 "seed": seed}}
    if results["no_repeat_ngram_size"] > 0:
        without = exact_match(model, tokenizer, pairs, no_repeat_ngram_size=0, **kw)
        results["exact_match_without_no_repeat"] = without["exact_match"]
    return results


def publish(target: HubTarget, profile: str, model_dir: Path, results: dict[str, Any], recipe: Path) -> Path:
    """Write the model repo with a card carrying the measured exact match."""
    name = model_name(profile)
    dataset_id = target.repo_id(DATASET_REPO)
    from convohub.training.runs import saved_arguments

    settings = saved_arguments(model_dir)["script"]
    base_model = str(settings["model_name_or_path"])
    layers, width = settings.get("tiny_layers"), settings.get("tiny_d_model")
    tiny_note = (f"a BART of {layers}+{layers} layers (d_model {width}) randomly initialised by "
                 "`convohub.tiny.build_tiny_seq2seq`, whose BPE tokenizer was trained on the generated training pairs")
    base_note = tiny_note if settings.get("train_tokenizer_on_data") else f"`{base_model}`"
    description = (
        "The EXTRACT model of ReQAP (*Recursive Question Understanding for Complex Question Answering over "
        "Heterogeneous Personal Data*): given an attribute name and a personal event (calendar entry, mail, "
        "post, stream, purchase, workout) it writes the attribute's value, or `null` when the event does not "
        "carry it. Trained on attribute-extraction pairs derived from the observable/canonical event pairs "
        "of "
        f"[`{dataset_id}`](https://huggingface.co/datasets/{dataset_id}) (train personas) by "
        "`convohub.reqap.extract_pairs`: the 4 temporal keys, the canonical keys an event mentions and the "
        "native keys of calendar/mail/social-media events as positives; unmentioned keys, a key of another "
        "source and 3 absent keys as `null` negatives; key aliases with loss weight 0.2. Base model: "
        f"{base_note}. Trained by `{SCRIPT.as_posix()}` with the `{recipe.name}` recipe."
    )
    usage = (
        "```python\nfrom transformers import AutoModelForSeq2SeqLM, AutoTokenizer\n"
        "from convohub.reqap.extract_pairs import convert_value, extraction_input\n\n"
        f'tok = AutoTokenizer.from_pretrained("{target.repo_id(name)}")\n'
        f'model = AutoModelForSeq2SeqLM.from_pretrained("{target.repo_id(name)}")\n'
        'event = {"start_date": "2024-03-13", "start_time": "08:00:00", "event": "played a song",\n'
        '         "song_name": "Fire Song", "song_artist": ["Hollow Summer"]}\n'
        'inputs = tok(extraction_input("start_date", event), return_tensors="pt")\n'
        "out = model.generate(**inputs, max_new_tokens=32, do_sample=False)\n"
        'print(convert_value(tok.decode(out[0], skip_special_tokens=True), "date"))\n```'
    )
    kinds = sorted(k.removeprefix("exact_match_") for k in results
                   if k.startswith("exact_match_") and k not in ("exact_match_without_no_repeat",))
    rows = "\n".join(f"| {k} | {results[f'exact_match_{k}']} |" for k in kinds)
    evaluation = (
        f"Greedy exact match on {results['pairs']} attribute-extraction pairs of the `{results['split']}` "
        f"personas (unseen in training), measured by `convohub.reqap.extract_model.evaluate`: "
        f"**{results['exact_match']}** with the saved "
        f"`no_repeat_ngram_size={results['no_repeat_ngram_size']}` "
        f"(it makes {results['references_blocked_by_no_repeat']} references impossible to generate)"
        + (f"; {results['exact_match_without_no_repeat']} without it" if "exact_match_without_no_repeat"
           in results else "") + ".\n\n| pair kind | exact match |\n|---|---|\n" + rows
    )
    limitations = (
        "The tiny profile demonstrates the pipeline: a model of about a million parameters trained for about "
        "a minute on CPU learns the `null` decisions but copies few values." if profile == "tiny" else
        "Trained on synthetic personas; values of real personal data may be phrased differently.")
    card = ModelCardInfo(
        license="mit",
        description=description,
        pipeline_tag="text2text-generation",
        base_model=None if settings.get("train_tokenizer_on_data") else base_model,
        datasets=(dataset_id,),
        tags=("convohub", "reqap", "perqa", "attribute-extraction", "seq2seq"),
        results=(MetricResult(task_type="text2text-generation", dataset_name="perqa", dataset_type=dataset_id,
                              dataset_config="observable_events", dataset_split=results["split"],
                              metric_type="exact_match", metric_name="Exact match",
                              value=results["exact_match"]),),
        citation=REQAP_CITATION,
        sections={"Usage": usage, "Evaluation": evaluation,
                  "Training recipe": f"```yaml\n{recipe.read_text(encoding='utf-8')}```",
                  "Data licence": f"The training data, [`{dataset_id}`](https://huggingface.co/datasets/"
                                  f"{dataset_id}), is CC BY 4.0; the code that trained this model is MIT.",
                  "Limitations": limitations},
    )
    return write_model(target, name, Path(model_dir), card)
