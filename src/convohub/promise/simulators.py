"""User simulators for the user-behaviour benchmark, and how each is scored (the paper's Table 4).

Every simulator predicts integer labels for task items (:func:`convohub.promise.records.task_items`):

* :class:`MajorityBaseline`: the most frequent label of the validation split (Task 1: "not satisfied");
* :class:`EncoderSimulator`: an encoder trained by ``training/promise_task{1,2}_encoder``, with one of two
  heads (:data:`HEADS`): ``sequence``, a classifier over the text pair (intent, dialogue context and the
  candidates), as the paper feeds BERT, RoBERTa and DeBERTa; or, for Task 2, ``multiple-choice``: one score per
  option, read as the pair (intent and asked questions, the option), the four suggestions then
  :data:`NONE_OPTION`, with the weights shared across options (transformers' ``*ForMultipleChoice``);
* :class:`GenerativeSimulator`: a chat model given the user prompt of :mod:`convohub.promise.prompts` (the
  paper's LLM simulator without the explanation), its reply parsed into ``1``-``4``, ``none`` or ``done``:
  zero-shot (SmolLM2, or any endpoint) or the LoRA model of ``training/promise_lora_simulator``. One
  answer per turn serves both tasks, read in one of three ways (:data:`DECODES`): ``generate``, the paper's
  greedy generation, parsed; ``likelihood`` (a local model only), the log-likelihood the model gives each
  of the six replies (``1``-``4``, ``none``, ``done``) right after the prompt
  (:class:`convohub.llm.choices.ChoiceBackend`): Task 1 is ``done`` when it is the most likely of the six,
  Task 2 the most likely of the five others, so no answer is invalid, and every reply keeps a score that
  ranks turns (``training/promise_lora_simulator/README.md`` measures that ranking's AUC); or ``calibrated``,
  the same log-likelihoods minus those of the content-free prompt (:data:`convohub.llm.choices.CONTENT_FREE`
  for the intent, each question asked and each suggestion; one such prompt per number of questions asked),
  which removes the reply a model prefers whatever the turn (SmolLM2 zero-shot: ``1`` to every turn).

Scoring rule for generative simulators (the card states it): a reply that parses to no action is invalid on
both tasks; ``done`` on a Task 2 item (a turn whose gold action is not ``done``) is invalid too. Invalid
predictions are ``-1`` and the user_simulation metric scores them as always wrong: they count against
micro-F1 and the gold class's recall, and form no class of macro-F1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from convohub.promise.prompts import completion_text, parse_action, user_request
from convohub.promise.records import ACTIONS, INVALID, TASK2_LABEL, label_names

#: how a generative simulator's answer is read (module docstring)
GENERATE, LIKELIHOOD, CALIBRATED = DECODES = ("generate", "likelihood", "calibrated")
#: the simulator name's suffix for each reading
_DECODE_SUFFIX = {GENERATE: "", LIKELIHOOD: " (likelihood)", CALIBRATED: " (calibrated likelihood)"}

SPEC_HELP = ("majority, zero-shot (the offline SmolLM2), zero-shot:SPEC (any LLM spec: smollm2, an endpoint "
             "http://host:8000/v1#model, local:/folder), encoder:TASK1_DIR,TASK2_DIR, or generative:FOLDER (a "
             "trained LoRA simulator)")


class Simulator(Protocol):
    name: str

    def predict(self, task: str, items: Sequence[Mapping[str, Any]]) -> list[int]:
        """One label per item of ``task`` (``-1`` where the simulator gave no valid label)."""
        ...


#: the encoders' heads: a classifier over one text pair, or one score per option (Task 2 only)
SEQUENCE, MULTIPLE_CHOICE = HEADS = ("sequence", "multiple-choice")
#: the text of the fifth option of a multiple-choice Task 2 encoder (label 4, "none")
NONE_OPTION = "None of these questions helps."


def head_of(config: Any) -> str:
    """The head a saved encoder was trained with (``promise_head`` in its config; absent: sequence, the paper's)."""
    return str(getattr(config, "promise_head", SEQUENCE))


def encoder_class(head: str) -> Any:
    """The transformers Auto class of an encoder with ``head`` (training, loading and the tests build from it)."""
    from transformers import AutoModelForMultipleChoice, AutoModelForSequenceClassification

    return AutoModelForMultipleChoice if head == MULTIPLE_CHOICE else AutoModelForSequenceClassification


def option_pairs(item: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The text pairs a multiple-choice encoder scores for one Task 2 item, in label order: (intent and the
    questions asked so far, option) for SQ1-SQ4, then :data:`NONE_OPTION`."""
    first = f"{item['intent']} Asked: {' | '.join(item['context_questions'])}"
    return [(first, str(q)) for q in item["candidate_sqs"]] + [(first, NONE_OPTION)]


def encoder_text(item: Mapping[str, Any]) -> tuple[str, str]:
    """The text pair an encoder reads: the intent, and the context questions then the candidate SQs."""
    context = " | ".join(item["context_questions"])
    candidates = " ".join(f"({k}) {q}" for k, q in enumerate(item["candidate_sqs"], start=1))
    return str(item["intent"]), f"Asked: {context} Suggested: {candidates}"


def class_probabilities(model: Any, tokenizer: Any, items: Sequence[Mapping[str, Any]], max_length: int,
                        batch_size: int = 32) -> list[list[float]]:
    """An encoder's class probabilities for task items (the same input in training, evaluation and the Space):
    :func:`encoder_text` pairs for a sequence classifier, :func:`option_pairs` for a multiple-choice head (a
    softmax over the options' scores)."""
    import torch

    choices = head_of(model.config) == MULTIPLE_CHOICE
    out: list[list[float]] = []
    with torch.inference_mode():
        for start in range(0, len(items), batch_size):
            chunk = items[start:start + batch_size]
            pairs = [p for i in chunk for p in option_pairs(i)] if choices else [encoder_text(i) for i in chunk]
            batch = tokenizer([a for a, _ in pairs], [b for _, b in pairs], truncation=True, max_length=max_length,
                              padding=True, return_tensors="pt")
            if choices:  # (items x options, length) -> (items, options, length)
                batch = {k: v.view(len(chunk), len(pairs) // len(chunk), -1) for k, v in batch.items()}
            out += torch.softmax(model(**batch).logits.float(), -1).tolist()
    return out


def argmax(probabilities: Sequence[float]) -> int:
    """The most probable class (the first on a tie)."""
    return max(range(len(probabilities)), key=probabilities.__getitem__)


class MajorityBaseline:
    """Always the most frequent label of the training items (ties: the smaller label)."""

    def __init__(self, train: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        self.labels = {task: min(Counter(int(i["label"]) for i in items).most_common(),
                                 key=lambda kv: (-kv[1], kv[0]))[0] for task, items in train.items()}
        self.name = "majority (validation)"

    def predict(self, task: str, items: Sequence[Mapping[str, Any]]) -> list[int]:
        return [self.labels[task]] * len(items)


class EncoderSimulator:
    """Trained encoders, one folder per task (each with the head its config names: :func:`head_of`)."""

    def __init__(self, folders: Mapping[str, str | Path], batch_size: int = 32) -> None:
        from transformers import AutoConfig, AutoTokenizer

        self.models, self.batch_size = {}, batch_size
        for task, folder in folders.items():
            try:
                config = AutoConfig.from_pretrained(str(folder))
                model = encoder_class(head_of(config)).from_pretrained(str(folder), config=config).eval()
            except OSError as err:
                first = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise OSError(f"the {task} simulator {str(folder)!r} cannot be loaded ({first}); give the folder "
                              "of a trained model (`convohub release --only promise` writes them under "
                              "hub_release/models/convohub/) or a Hub id") from err
            names = tuple(model.config.id2label[i] for i in range(model.config.num_labels))
            if names != label_names(task):
                raise ValueError(f"{folder}: its labels {names} are not {task}'s {label_names(task)}; "
                                 "give the task 1 folder first, then the task 2 folder")
            self.models[task] = (AutoTokenizer.from_pretrained(str(folder)), model)
        self.name = "encoder:" + ",".join(str(Path(f).name) for f in folders.values())

    def probabilities(self, task: str, items: Sequence[Mapping[str, Any]]) -> list[list[float]]:
        """Class probabilities per item (the Space charts them)."""
        tokenizer, model = self.models[task]
        return class_probabilities(model, tokenizer, items, getattr(model.config, "promise_max_length", 256),
                                   self.batch_size)

    def predict(self, task: str, items: Sequence[Mapping[str, Any]]) -> list[int]:
        return [argmax(p) for p in self.probabilities(task, items)]


class GenerativeSimulator:
    """A chat model as the user (module docstring: one answer per turn, generated or read by likelihood)."""

    def __init__(self, backend: Any, name: str | None = None, progress: bool = False, decode: str = GENERATE,
                 replies: dict[str, str] | None = None) -> None:
        """``replies``: the answers of another simulator on the same model and reading of the log-likelihoods
        (``likelihood`` and ``calibrated`` share them), so a second reading asks the model nothing again."""
        if decode not in DECODES:
            raise ValueError(f"unknown decode {decode!r}; use one of {', '.join(DECODES)}")
        if decode != GENERATE:
            from convohub.llm.choices import as_choice_backend

            chooser = as_choice_backend(backend, [completion_text(a) for a in ACTIONS])
            if chooser is None:
                raise ValueError(f"decode {decode} reads a local model's probabilities; {backend.model_id} is "
                                 "served by an endpoint: use decode generate")
            backend = chooser
        self.backend, self.progress, self.decode = backend, progress, decode
        self.name = (name or f"zero-shot:{backend.model_id}") + _DECODE_SUFFIX[decode]
        self.replies: dict[str, str] = {} if replies is None else replies
        #: content-free log-likelihoods per number of questions asked (``calibrated`` only)
        self.content_free: dict[int, dict[str, float]] = {}

    def _answer(self, items: Sequence[Mapping[str, Any]]) -> None:
        """Ask the model about every item not answered yet; replies are kept per item id ("" for a failed call)."""
        from convohub.llm import run_chat

        todo = [i for i in items if i["id"] not in self.replies]
        requests = [user_request(i["intent"], i["context_questions"], i["candidate_sqs"]) for i in todo]
        for item, response in zip(todo, run_chat(self.backend, requests, desc=self.name, progress=self.progress),
                                  strict=True):
            self.replies[item["id"]] = response.text if response.ok else ""

    def actions(self, items: Sequence[Mapping[str, Any]]) -> list[str | None]:
        """The parsed action of each item (None: unparseable)."""
        self._answer(items)
        return [parse_action(self.replies[i["id"]]) for i in items]

    def predict(self, task: str, items: Sequence[Mapping[str, Any]]) -> list[int]:
        if self.decode != GENERATE:
            self._answer(items)
            if self.decode == CALIBRATED:
                self._content_free({len(i["context_questions"]) for i in items})
            return [likelihood_label(task, self.likelihoods(item)) for item in items]
        label = (lambda a: INVALID if a is None else int(a == "done")) if task == "task1" else \
            (lambda a: INVALID if a is None or a == "done" else TASK2_LABEL[a])
        return [label(a) for a in self.actions(items)]

    def likelihoods(self, item: Mapping[str, Any]) -> dict[str, float]:
        """``{action: log-likelihood}`` of an answered item, minus the content-free ones when calibrated
        (likelihood and calibrated decodes only; {} after a failed call)."""
        from convohub.llm.choices import calibrated, choice_logprobs

        numbers = choice_logprobs(self.replies[item["id"]])
        if not numbers:
            return {}
        raw = {a: numbers[completion_text(a)] for a in ACTIONS}
        return calibrated(raw, self._calibration(len(item["context_questions"])))

    def _calibration(self, asked: int) -> dict[str, float] | None:
        """The content-free log-likelihoods a turn with ``asked`` questions is calibrated against (None unless
        the decode is calibrated); :meth:`predict` asks for every count of its items in one call first."""
        if self.decode != CALIBRATED:
            return None
        if asked not in self.content_free:
            self._content_free({asked})
        return self.content_free[asked]

    def _content_free(self, asked_counts: set[int]) -> None:
        """Fill :attr:`content_free`: the six replies' log-likelihoods on the content-free prompt with each
        number of questions asked not asked yet; a failed call is an error (the turns cannot be calibrated
        without it)."""
        from convohub.llm import run_chat
        from convohub.llm.choices import CONTENT_FREE, choice_logprobs

        todo = sorted(asked_counts - set(self.content_free))
        requests = [user_request(CONTENT_FREE, [CONTENT_FREE] * n, [CONTENT_FREE] * 4) for n in todo]
        for n, response in zip(todo, run_chat(self.backend, requests, progress=False), strict=True):
            numbers = choice_logprobs(response.text) if response.ok else {}
            if not numbers:
                raise RuntimeError(f"{self.name}: the content-free prompt with {n} questions asked got no "
                                   f"log-likelihoods ({response.error or response.text[:80]!r})")
            self.content_free[n] = {a: numbers[completion_text(a)] for a in ACTIONS}


def likelihood_label(task: str, likelihoods: Mapping[str, float]) -> int:
    """The Task 1 or Task 2 label of one turn from its six actions' log-likelihoods (module docstring); invalid
    when there are none (the model call failed)."""
    if not likelihoods:
        return INVALID
    if task == "task1":
        return int(max(likelihoods, key=likelihoods.__getitem__) == "done")
    return TASK2_LABEL[max(TASK2_LABEL, key=likelihoods.__getitem__)]


def is_generative(spec: str) -> bool:
    """Whether ``spec`` names a language model as the simulator (``zero-shot[:SPEC]`` or ``generative:FOLDER``)."""
    return spec == "zero-shot" or spec.startswith(("zero-shot:", "generative:"))


def resolve(spec: str, train: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
            progress: bool = False, decode: str = GENERATE) -> Simulator:
    """A simulator from its spec (:data:`SPEC_HELP`); ``train`` (validation items per task) for the baseline;
    ``decode`` (:data:`DECODES`) for the generative ones."""
    if decode != GENERATE and not is_generative(spec):
        raise ValueError(f"decode {decode!r} reads a language model's answer; {spec!r} is not a zero-shot or "
                         "generative simulator")
    if spec == "majority":
        if train is None:
            raise ValueError("the majority baseline needs the validation items")
        return MajorityBaseline(train)
    if spec == "zero-shot" or spec.startswith("zero-shot:"):
        from convohub.llm import make_backend

        llm = spec.partition(":")[2] or "smollm2"
        return GenerativeSimulator(make_backend(llm, **({"batch_size": 32} if llm == "smollm2" else {})),
                                   progress=progress, decode=decode)
    if spec.startswith("generative:"):
        from convohub.llm import make_backend

        folder = spec.partition(":")[2]
        return GenerativeSimulator(make_backend(f"local:{folder}", batch_size=32), name=f"generative:{folder}",
                                   progress=progress, decode=decode)
    if spec.startswith("encoder:"):
        folders = [f for f in spec.partition(":")[2].split(",") if f]
        if len(folders) != 2:
            raise ValueError("encoder:TASK1_DIR,TASK2_DIR names two folders, the Task 1 and the Task 2 classifier")
        return EncoderSimulator({"task1": folders[0], "task2": folders[1]})
    raise ValueError(f"unknown simulator {spec!r}; use {SPEC_HELP}")


def load_items(dataset_dir: str | Path, split: str) -> dict[str, list[dict[str, Any]]]:
    """``{task: items}`` of one split of a built promise folder (or a Hub id)."""
    from convohub.hub import load_split
    from convohub.promise.dataset import TASK_CONFIG

    return {task: [dict(r) for r in load_split(dataset_dir, config, split)] for task, config in TASK_CONFIG.items()}


def score(simulator: Simulator, items: Mapping[str, Sequence[Mapping[str, Any]]],
          tasks: Sequence[str] = ("task1", "task2")) -> dict[str, dict[str, float]]:
    """user_simulation F1 scores of ``simulator`` on each task's items (fractions in [0, 1])."""
    from convohub.metrics import user_simulation_f1

    out = {}
    for task in tasks:
        predictions = simulator.predict(task, items[task])
        out[task] = user_simulation_f1(predictions, [int(i["label"]) for i in items[task]], task=task)
    return out


def score_table(results: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """Table 4's layout (x100): T1 micro / macro / F1 not satisfied / F1 satisfied | T2 micro / macro."""
    from convohub.hub import markdown_table

    rows = []
    for name, r in results.items():
        t1, t2 = r["task1"], r["task2"]
        rows.append([name, *(f"{100 * t1[k]:.2f}" for k in ("micro_f1", "macro_f1", "f1_not_satisfied",
                                                            "f1_satisfied")),
                     *(f"{100 * t2[k]:.2f}" for k in ("micro_f1", "macro_f1")),
                     f"{100 * t1['invalid_rate']:.1f} / {100 * t2['invalid_rate']:.1f}"])
    return markdown_table(["simulator", "T1 micro-F1", "T1 macro-F1", "T1 F1 not sat.", "T1 F1 sat.", "T2 micro-F1",
                           "T2 macro-F1", "invalid % (T1 / T2)"], rows)
