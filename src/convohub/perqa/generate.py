"""End-to-end PerQA generation: personas -> canonical events -> observable events -> questions.

Everything is a pure function of :class:`PerQAConfig` (seeded private generators, no clock), so two
builds with the same config give identical tables. Personas are split 60/10/30 into train/dev/test
(the authors' 12/2/6 for 20 personas) and templates are split the same way, independently: a persona only
gets questions from its own split's templates, so splits are disjoint by persona and by template.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from convohub.perqa.canonical import DEFAULT_START, generate_canonical
from convohub.perqa.db import connect
from convohub.perqa.expand import GeneratedTemplate
from convohub.perqa.observable import observe
from convohub.perqa.persona import REFERENCE_DATE, make_persona
from convohub.perqa.questions import REFERENCE_DATE as REFERENCE_DATE_ISO
from convohub.perqa.questions import SPLITS, make_questions, split_counts, split_templates
from convohub.perqa.templates import TEMPLATES, QuestionTemplate
from convohub.perqa.vocab import derive_rng, make_catalogue

if TYPE_CHECKING:  # pragma: no cover
    from convohub.llm import ChatBackend


@dataclass(frozen=True)
class PerQAConfig:
    """Sizes of a generated PerQA. The defaults are the release size (20 personas, ~6 years of events)."""

    n_personas: int = 20
    start_date: date = DEFAULT_START
    seed: int = 0
    max_instances: int = 3  # bindings per template and persona
    templates: tuple[QuestionTemplate, ...] = TEMPLATES
    #: LLM-written templates (:mod:`convohub.perqa.expand`), each in the split of the seeds it came from
    generated: tuple[GeneratedTemplate, ...] = ()

    def __post_init__(self) -> None:
        if self.n_personas < 1:
            raise ValueError(f"n_personas must be >= 1, got {self.n_personas}")
        if not self.start_date < REFERENCE_DATE:
            raise ValueError(f"start_date {self.start_date} must be before the reference date {REFERENCE_DATE}")


@dataclass
class PersonaData:
    """One persona and everything generated (or read) for it; events and questions are plain dicts."""

    persona_id: str
    split: str
    persona: dict[str, Any]
    canonical: list[dict[str, Any]] = field(default_factory=list)
    observable: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PerQAData:
    """A whole PerQA: personas in split order, plus where it came from (for the card)."""

    personas: list[PersonaData]
    provenance: str = ""

    def persona(self, persona_id: str) -> PersonaData:
        for p in self.personas:
            if p.persona_id == persona_id:
                return p
        raise KeyError(f"no persona {persona_id!r}; known: {', '.join(p.persona_id for p in self.personas)}")

    def split(self, split: str) -> list[PersonaData]:
        return [p for p in self.personas if p.split == split]

    def questions(self, split: str | None = None) -> list[dict[str, Any]]:
        return [q for p in self.personas if split in (None, p.split) for q in p.questions]


def persona_ids(n: int) -> list[tuple[str, str]]:
    """(persona_id, split) in the authors' naming: train_persona_0, ..., dev_persona_0, ..., test_persona_0."""
    out = []
    for split, count in zip(SPLITS, split_counts(n), strict=True):
        out += [(f"{split}_persona_{i}", split) for i in range(count)]
    return out


def _persona_events(config: PerQAConfig, catalogue: Any, index: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``index``-th persona of a build and its canonical events (seeded by the build's seed and index)."""
    persona = make_persona(derive_rng(config.seed, index, "persona"), catalogue)
    return persona, generate_canonical(persona, catalogue, (config.seed, index), config.start_date)


def generate_perqa(config: PerQAConfig | None = None, llm: ChatBackend | None = None) -> PerQAData:
    """Generate a PerQA offline (``llm`` optionally writes the calendar/mail/social-media texts)."""
    config = config or PerQAConfig()
    catalogue = make_catalogue(config.seed)
    template_split = split_templates(config.templates, config.seed)
    clash = sorted({g.template.template_id for g in config.generated} & set(template_split))
    if clash:
        raise ValueError(f"generated template ids {clash} repeat seed template ids")
    template_split.update({g.template.template_id: g.split for g in config.generated})
    all_templates = (*config.templates, *(g.template for g in config.generated))
    out = []
    for index, (pid, split) in enumerate(persona_ids(config.n_personas)):
        persona, canonical = _persona_events(config, catalogue, index)
        observable = observe(canonical, persona, config.seed, index, llm=llm)
        con = connect(canonical)
        try:
            templates = [t for t in all_templates if template_split[t.template_id] == split]
            questions = make_questions(pid, con, templates, config.seed, config.max_instances, REFERENCE_DATE_ISO)
        finally:
            con.close()
        out.append(PersonaData(pid, split, persona, canonical, observable, questions))
    how = f"templates verbalised by {llm.name}" if llm is not None else "template verbalisations"
    provenance = (f"Generated offline by `convohub.perqa.generate_perqa(PerQAConfig(n_personas={config.n_personas}, "
                  f"start_date={config.start_date.isoformat()}, seed={config.seed}, "
                  f"max_instances={config.max_instances}))` ({how}).")
    if config.generated:
        made_by = ", ".join(sorted({g.made_by for g in config.generated}))
        per_split = ", ".join(f"{s} {sum(g.split == s for g in config.generated)}" for s in SPLITS)
        provenance += (f" Beside the {len(config.templates)} seed templates, {len(config.generated)} templates "
                       f"written by {made_by} from them (`convohub reqap expand`; {per_split}), each kept after "
                       "its SQL passed the whitelist and answered on its split's personas.")
    return PerQAData(out, provenance)


def persona_databases(config: PerQAConfig, splits: tuple[str, ...], per_split: int | None = None
                      ) -> dict[str, list[tuple[str, Any]]]:
    """DuckDB databases of the canonical tables of (the first ``per_split``) personas of each split, exactly
    as :func:`generate_perqa` builds them with ``config``: what new templates are checked on."""
    catalogue = make_catalogue(config.seed)
    out: dict[str, list[tuple[str, Any]]] = {s: [] for s in splits}
    for index, (pid, split) in enumerate(persona_ids(config.n_personas)):
        if split not in out or (per_split is not None and len(out[split]) >= per_split):
            continue
        out[split].append((pid, connect(_persona_events(config, catalogue, index)[1])))
    return out
