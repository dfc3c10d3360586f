"""CRyCHIc's three models: save/load round trips through the Auto classes, the code and ``auto_map`` written
for ``trust_remote_code`` loading (checked in a fresh interpreter that never imports convohub), the heads'
pooling (first token, separators), the judge's cached embeddings, sentence packing and splitting, and the
model-backed pipeline components.

All models here are tiny and randomly initialised (``tests/_crychic_tiny.py``): these tests check plumbing,
not what a trained model predicts."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from _crychic_tiny import KINDS, one_thread, save_gte_like_encoder, save_tiny, tiny_model, tokenizer
from transformers import AutoConfig, AutoModel

from convohub.crychic.components import (
    ModelFollowUpClassifier,
    ModelParentJudge,
    ModelSentenceLabeller,
    StoredTurn,
    pad_rows,
    truncate_text,
)
from convohub.crychic.models import (
    CrychicFollowUpJudgeConfig,
    CrychicFollowUpJudgeModel,
    CrychicIFQCConfig,
    CrychicIFQCModel,
    CrychicSimplifierModel,
    pack_sentences,
)
from convohub.crychic.sentences import split_sentences
from convohub.models import minilm_path


@pytest.fixture(autouse=True, scope="module")
def _torch_on_one_thread() -> Iterator[None]:
    yield from one_thread()


PROMPTS = ["Continue.", "Thanks a lot! Now translate the poem into French."]
HISTORY = ["Write a poem about the sea.", "Here is a short poem about waves."]


def _inputs(kind: str) -> dict[str, torch.Tensor]:
    tok = tokenizer()
    if kind == "simplifier":
        return pad_rows([pack_sentences(tok, split_sentences(p), 48)[0][0] for p in PROMPTS], tok.pad_token_id)
    if kind == "judge-cross":
        return dict(tok(HISTORY, PROMPTS, padding=True, return_tensors="pt"))
    batch = dict(tok(PROMPTS, padding=True, return_tensors="pt"))
    if kind == "judge-bi":
        history = tok(HISTORY, padding=True, return_tensors="pt")
        batch |= {"history_input_ids": history["input_ids"], "history_attention_mask": history["attention_mask"]}
    return batch


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("crychic-models")
    return {kind: save_tiny(kind, root / kind) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_through_automodel_keeps_class_config_and_logits(kind: str, saved: dict[str, Path]) -> None:
    original = tiny_model(kind)
    reloaded = AutoModel.from_pretrained(saved[kind]).eval()
    assert type(reloaded) is type(original)
    assert reloaded.config.head_hidden_sizes == [8, 4]
    assert reloaded.config.encoder_config.hidden_size == 16
    assert reloaded.config.to_dict()["model_type"] == original.config.model_type
    with torch.no_grad():
        before, after = original(**_inputs(kind)).logits, reloaded(**_inputs(kind)).logits
    assert torch.allclose(before, after, atol=1e-6)
    other = tiny_model(kind, seed=1)  # a different initialisation must give different logits
    with torch.no_grad():
        assert not torch.allclose(before, other(**_inputs(kind)).logits)


def test_autoconfig_resolves_the_registered_model_types(saved: dict[str, Path]) -> None:
    assert type(AutoConfig.from_pretrained(saved["ifqc"])) is CrychicIFQCConfig
    judge = AutoConfig.from_pretrained(saved["judge-cross"])
    assert type(judge) is CrychicFollowUpJudgeConfig and judge.architecture == "cross"
    assert AutoConfig.for_model("crychic-simplifier").head_hidden_sizes == [768, 512, 256]  # the paper's


@pytest.mark.parametrize("kind", KINDS)
def test_saved_folder_carries_code_and_auto_map(kind: str, saved: dict[str, Path]) -> None:
    folder = saved[kind]
    assert (folder / "configuration_crychic.py").is_file() and (folder / "modeling_crychic.py").is_file()
    config = json.loads((folder / "config.json").read_text())
    model_class = type(tiny_model(kind)).__name__
    assert config["auto_map"] == {"AutoConfig": f"configuration_crychic.{type(tiny_model(kind).config).__name__}",
                                  "AutoModel": f"modeling_crychic.{model_class}"}
    imported = set()
    for code in ("configuration_crychic.py", "modeling_crychic.py"):
        for node in ast.walk(ast.parse((folder / code).read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    # the copied code needs only what a Hub user has: no convohub, no spaCy
    assert imported <= {"__future__", "collections", "copy", "dataclasses", "typing", "torch", "transformers"}


_REMOTE = """
import json, sys
import torch
from transformers import AutoModel
out = {}
for kind, folder, inputs in json.loads(sys.argv[1]):
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        logits = model(**{k: torch.tensor(v) for k, v in inputs.items()}).logits
    out[kind] = [type(model).__module__, type(model).__name__, logits.tolist()]
out["convohub_imported"] = any(name.startswith("convohub") for name in sys.modules)
print(json.dumps(out))
"""


def test_trust_remote_code_loads_in_a_fresh_interpreter_without_convohub(saved: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    jobs = [[kind, str(saved[kind]), {k: v.tolist() for k, v in _inputs(kind).items()}] for kind in KINDS]
    env = {**os.environ, "PYTHONPATH": "", "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    result = subprocess.run([sys.executable, "-c", _REMOTE, json.dumps(jobs)], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out.pop("convohub_imported") is False
    for kind in KINDS:
        module, name, logits = out[kind]
        assert module.startswith("transformers_modules.") and module.endswith("modeling_crychic")
        assert name == type(tiny_model(kind)).__name__
        with torch.no_grad():
            expected = tiny_model(kind)(**_inputs(kind)).logits
        assert torch.allclose(torch.tensor(logits), expected, atol=1e-5)


def test_custom_code_encoder_saves_its_code_and_reloads_without_its_origin(tmp_path: Path) -> None:
    """The paper recipes' gte encoders are custom code (model type ``new``): a CRyCHIc model built on one
    carries that code in its saved folder and reloads from the folder alone, with convohub's registered
    classes and with trust_remote_code in an interpreter without convohub, giving the same logits."""
    import shutil

    encoder_dir = save_gte_like_encoder(tmp_path / "gte-like")
    torch.manual_seed(0)
    judge = CrychicFollowUpJudgeModel.from_encoder(str(encoder_dir), trust_remote_code=True,
                                                   head_hidden_sizes=[8], turn_max_tokens=24, max_length=64).eval()
    encoder = AutoModel.from_pretrained(encoder_dir, trust_remote_code=True)
    assert torch.equal(judge.encoder.state_dict()["embeddings.weight"], encoder.state_dict()["embeddings.weight"])
    folder = tmp_path / "judge"
    judge.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    shutil.rmtree(encoder_dir)  # the encoder's origin is gone: the folder must carry everything
    assert {"configuration.py", "modeling.py", "configuration_crychic.py"} <= {p.name for p in folder.iterdir()}
    nested = json.loads((folder / "config.json").read_text())["encoder_config"]
    assert nested["model_type"] == "new"
    assert nested["auto_map"] == {"AutoConfig": "configuration.NewConfig", "AutoModel": "modeling.NewModel"}
    inputs = _inputs("judge-bi")
    with torch.no_grad():
        expected = judge(**inputs).logits
        registered = AutoModel.from_pretrained(folder).eval()
        assert type(registered) is CrychicFollowUpJudgeModel
        assert type(registered.encoder).__name__ == "NewModel"
        assert torch.allclose(registered(**inputs).logits, expected, atol=1e-6)
    jobs = [["judge", str(folder), {k: v.tolist() for k, v in inputs.items()}]]
    env = {**os.environ, "PYTHONPATH": "", "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    result = subprocess.run([sys.executable, "-c", _REMOTE, json.dumps(jobs)], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["convohub_imported"] is False and out["judge"][1] == "CrychicFollowUpJudgeModel"
    assert torch.allclose(torch.tensor(out["judge"][2]), expected, atol=1e-5)
    # saving a reloaded model again keeps it self-contained
    registered.save_pretrained(tmp_path / "again")
    assert (tmp_path / "again" / "modeling.py").is_file()


def test_from_encoder_starts_from_the_pretrained_weights() -> None:
    encoder = AutoModel.from_pretrained(str(minilm_path()))
    model = CrychicSimplifierModel.from_encoder(str(minilm_path()), head_hidden_sizes=[32])
    assert model.config.encoder_name_or_path == str(minilm_path())
    assert (model.config.sep_token_id, model.config.cls_token_id) == (102, 101)  # BERT's [SEP] and [CLS]
    name = "embeddings.word_embeddings.weight"
    assert torch.equal(model.encoder.state_dict()[name], encoder.state_dict()[name])


def test_ifqc_reads_the_first_token_only() -> None:
    model = tiny_model("ifqc")
    batch = _inputs("ifqc")
    with torch.no_grad():
        hidden = model.encode(batch["input_ids"], batch["attention_mask"])
        assert torch.allclose(model(**batch).logits, model.head(hidden[:, 0]))
    assert model.config.max_length == 64 and model.config.id2label == {0: "explicit", 1: "implicit"}


def test_simplifier_reads_one_state_per_separator() -> None:
    model = tiny_model("simplifier")
    batch = _inputs("simplifier")
    with torch.no_grad():
        out = model(**batch)
        hidden = model.encode(batch["input_ids"], batch["attention_mask"])
    assert out.sentence_mask.sum(1).tolist() == [1, 2]  # "Continue." ; "Thanks a lot!" + "Now translate ..."
    seps = (batch["input_ids"][1] == 102).nonzero().flatten()
    assert torch.allclose(out.logits[1], model.head(hidden[1, seps]), atol=1e-6)
    labels = torch.tensor([[2, -100], [0, 2]])
    assert torch.isfinite(model(**batch, labels=labels).loss)


def test_pack_sentences_fits_every_sentence_once_with_its_separator() -> None:
    tok = tokenizer()
    sentences = ["Hello there.", "word " * 40, "Please summarise the text above.", "Thanks."]
    rows = pack_sentences(tok, sentences, max_length=24)
    assert [i for _, members in rows for i in members] == [0, 1, 2, 3]
    for ids, members in rows:
        assert len(ids) <= 24 and ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
        assert ids.count(tok.sep_token_id) == len(members)
    assert len(rows) > 1  # the long sentence cannot share a row


def test_judge_bi_scores_cached_embeddings_like_text_and_cross_refuses() -> None:
    model = tiny_model("judge-bi")
    batch = _inputs("judge-bi")
    with torch.no_grad():
        cached = model.embed(batch["history_input_ids"], batch["history_attention_mask"])
        from_text = model(**batch)
        from_cache = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           history_embeds=cached, labels=torch.tensor([1.0, 0.0]))
    assert torch.allclose(from_text.logits, from_cache.logits, atol=1e-6)
    assert torch.allclose(from_cache.probabilities, torch.sigmoid(from_cache.logits))
    assert model.head.layers[0].in_features == 3 * 16  # [history; prompt; history - prompt]
    cross = tiny_model("judge-cross")
    assert cross.head.layers[0].in_features == 16
    with pytest.raises(ValueError, match="architecture='bi'"):
        cross.score_embeddings(cached, cached)
    with pytest.raises(ValueError, match="architecture"):
        CrychicFollowUpJudgeConfig(architecture="tri")


def test_mean_pooling_averages_the_kept_tokens_only_and_survives_a_round_trip(tmp_path: Path) -> None:
    """``pooling="mean"`` (how all-MiniLM-L6-v2 was trained): a prompt's vector is the mean of its own
    tokens, so padding it to a longer batch changes nothing; the choice is saved with the model."""
    model = tiny_model("judge-bi")
    model.config.pooling = "mean"
    tok = tokenizer()
    short = dict(tok(PROMPTS[:1], return_tensors="pt"))
    padded = dict(tok(PROMPTS, padding=True, return_tensors="pt"))
    assert padded["attention_mask"][0].sum() < padded["attention_mask"].shape[1]  # the first row is padded
    with torch.no_grad():
        alone = model.embed(short["input_ids"], short["attention_mask"])[0]
        in_batch = model.embed(padded["input_ids"], padded["attention_mask"])[0]
        hidden = model.encode(short["input_ids"], short["attention_mask"])[0]
    assert torch.allclose(alone, in_batch, atol=1e-5)
    assert torch.allclose(alone, hidden.mean(0), atol=1e-6) and not torch.allclose(alone, hidden[0])
    model.save_pretrained(tmp_path / "judge")
    assert AutoConfig.from_pretrained(tmp_path / "judge").pooling == "mean"
    assert CrychicFollowUpJudgeConfig().pooling == "cls"  # the paper's encoders read the first token
    with pytest.raises(ValueError, match="pooling must be one of"):
        CrychicFollowUpJudgeConfig(pooling="max")


def _residual_judge(scale: float = 3.0, shift: float = -1.0) -> CrychicFollowUpJudgeModel:
    torch.manual_seed(0)
    config = CrychicFollowUpJudgeConfig(encoder_config=tiny_model("judge-bi").config.encoder_config.to_dict(),
                                        head_hidden_sizes=[8, 4], cosine_residual=True, cosine_scale=scale,
                                        cosine_shift=shift, turn_max_tokens=24, max_length=64)
    return CrychicFollowUpJudgeModel(config).eval()


def test_cosine_residual_judge_starts_as_the_scaled_cosine_and_keeps_its_weights(tmp_path: Path) -> None:
    """Untrained, the residual judge's logit is exactly ``scale * cos + shift`` (the MLP's output layer starts
    at zero), so it ranks turns as the encoder's similarity does; the head still changes the logit once its
    output layer is not zero, and scale, shift and head survive a save/load round trip."""
    model = _residual_judge()
    history, prompt = torch.randn(5, 16), torch.randn(1, 16)
    cosine = torch.nn.functional.cosine_similarity(history, prompt, dim=-1)
    with torch.no_grad():
        logits = model.score_embeddings(history, prompt)
    assert torch.allclose(logits, 3.0 * cosine - 1.0, atol=1e-6)
    assert logits.argsort().tolist() == cosine.argsort().tolist()
    plain = tiny_model("judge-bi")
    with torch.no_grad():
        plain_logits = plain.score_embeddings(history, prompt)
        assert not torch.allclose(plain_logits, 3.0 * cosine - 1.0, atol=1e-3)  # the paper's head: no cosine
        model.head.layers[-1].weight.fill_(0.5)
        model.cosine_scale.fill_(7.0)
        moved = model.score_embeddings(history, prompt)
    assert not torch.allclose(moved, 7.0 * cosine - 1.0, atol=1e-3)
    model.save_pretrained(tmp_path / "residual")
    reloaded = AutoModel.from_pretrained(tmp_path / "residual").eval()
    assert reloaded.config.cosine_residual is True
    with torch.no_grad():
        assert float(reloaded.cosine_scale) == 7.0
        assert torch.allclose(reloaded.score_embeddings(history, prompt), moved, atol=1e-6)


def test_cosine_residual_needs_a_bi_encoder() -> None:
    with pytest.raises(ValueError, match="cosine_residual needs architecture='bi'"):
        CrychicFollowUpJudgeConfig(architecture="cross", cosine_residual=True)


def test_ifqc_loss_reaches_encoder_and_head_and_a_few_steps_lower_it() -> None:
    """Plumbing of training: the loss is attached to every layer (a tiny random encoder barely tells two
    prompts apart at its first token, so the steps learn a shared label, not the task)."""
    model = tiny_model("ifqc")
    batch, labels = _inputs("ifqc"), torch.tensor([1, 1])

    def eval_loss() -> float:
        model.eval()
        with torch.no_grad():
            return float(model(**batch, labels=labels).loss)

    before = eval_loss()
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(8):
        model(**batch, labels=labels).loss.backward()
        if step == 0:
            assert model.encoder.embeddings.word_embeddings.weight.grad.abs().sum() > 0
            assert model.head.layers[0].weight.grad.abs().sum() > 0
        optimiser.step()
        optimiser.zero_grad()
    assert eval_loss() < before - 0.05


def test_split_sentences_uses_punctuation_not_line_breaks() -> None:
    assert split_sentences("Thanks a lot! Now, can you translate this? The text is about cats.") == [
        "Thanks a lot!", "Now, can you translate this?", "The text is about cats."]
    assert split_sentences("Dr. Smith said e.g. this.") == ["Dr. Smith said e.g. this."]
    assert split_sentences("  \n ") == []


def test_truncate_text_keeps_the_first_tokens() -> None:
    tok = tokenizer()
    text = "one two three four five six"
    assert truncate_text(tok, text, 3) == "one two three"
    assert truncate_text(tok, text, 50) == text


def test_model_components_answer_the_pipeline_protocols(saved: dict[str, Path]) -> None:
    ifqc = ModelFollowUpClassifier(saved["ifqc"])
    assert 0.0 <= ifqc.implicit_probability("Continue.") <= 1.0
    labeller = ModelSentenceLabeller(saved["simplifier"])
    labelled = labeller.label("Thanks a lot! Now translate the poem. It is about cats.")
    assert [s for s, _ in labelled] == ["Thanks a lot!", "Now translate the poem.", "It is about cats."]
    assert {label for _, label in labelled} <= {"polite", "information", "instruction"}
    assert labeller.label("") == []
    for kind in ("judge-bi", "judge-cross"):
        judge = ModelParentJudge(saved[kind])
        turns: list[Any] = []
        for i, (prompt, response) in enumerate(zip(HISTORY, reversed(HISTORY), strict=True)):
            turns.append(StoredTurn(i, prompt, response, -1, judge.embed_turn(prompt, response)))
        assert turns[0].embedding.shape == (16,)
        scores = judge.scores("Make it rhyme.", turns)
        assert len(scores) == 2 and all(0.0 < s < 1.0 for s in scores)
    with pytest.raises(ValueError, match="not a CrychicFollowUpJudgeModel"):
        ModelParentJudge(saved["ifqc"])


def test_judge_embedding_truncates_each_side_of_a_turn(saved: dict[str, Path]) -> None:
    judge = ModelParentJudge(saved["judge-bi"])  # turn_max_tokens=24
    long = " ".join(f"word{i}" for i in range(200))
    first, second = judge._turn_texts(long, "short reply")
    assert len(tokenizer()(first, add_special_tokens=False)["input_ids"]) == 24 and second == "short reply"
    assert torch.allclose(judge.embed_turn(long, "short reply"), judge.embed_turn(first, "short reply"))
    assert not torch.allclose(judge.embed_turn(long, "short reply"), judge.embed_turn("word0", "short reply"))


def test_ifqc_model_is_registered_for_automodel() -> None:
    config = CrychicIFQCConfig(encoder_config=tiny_model("ifqc").config.encoder_config, head_hidden_sizes=[4])
    assert type(AutoModel.from_config(config)) is CrychicIFQCModel
    assert isinstance(AutoModel.from_config(CrychicFollowUpJudgeConfig(
        encoder_config=config.encoder_config, head_hidden_sizes=[4])), CrychicFollowUpJudgeModel)
