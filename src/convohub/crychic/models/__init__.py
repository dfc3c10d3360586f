"""CRyCHIc's models, registered with the Auto classes on import.

Importing this package registers the three configurations with ``AutoConfig`` (model types
``crychic-ifqc``, ``crychic-simplifier``, ``crychic-followup-judge``) and the models with ``AutoModel``, so
``AutoModel.from_pretrained(folder)`` rebuilds the right class without remote code. Each class is also
registered for its Auto class the way custom Hub models are (``register_for_auto_class``): ``save_pretrained``
then copies ``configuration_crychic.py`` and ``modeling_crychic.py`` into the folder and writes ``auto_map``
into ``config.json``, so ``from_pretrained(repo, trust_remote_code=True)`` works where convohub is not
installed.

It imports torch and transformers, which is why ``convohub.crychic`` never imports it (the CLI would otherwise
pay for torch on every start): import the classes from here.
"""

from __future__ import annotations

from transformers import AutoConfig, AutoModel

from convohub.crychic.models.configuration_crychic import (
    IFQC_LABELS,
    JUDGE_ARCHITECTURES,
    SIMPLIFIER_LABELS,
    CrychicEncoderConfig,
    CrychicFollowUpJudgeConfig,
    CrychicIFQCConfig,
    CrychicSimplifierConfig,
)
from convohub.crychic.models.modeling_crychic import (
    CrychicFollowUpJudgeModel,
    CrychicIFQCModel,
    CrychicPreTrainedModel,
    CrychicSimplifierModel,
    pack_sentences,
)

#: (configuration, model) of each CRyCHIc model, keyed by its model type
MODEL_CLASSES: dict[str, tuple[type[CrychicEncoderConfig], type[CrychicPreTrainedModel]]] = {
    CrychicIFQCConfig.model_type: (CrychicIFQCConfig, CrychicIFQCModel),
    CrychicSimplifierConfig.model_type: (CrychicSimplifierConfig, CrychicSimplifierModel),
    CrychicFollowUpJudgeConfig.model_type: (CrychicFollowUpJudgeConfig, CrychicFollowUpJudgeModel),
}


def _register() -> None:
    for model_type, (config_class, model_class) in MODEL_CLASSES.items():
        AutoConfig.register(model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, model_class, exist_ok=True)
        config_class.register_for_auto_class("AutoConfig")
        model_class.register_for_auto_class("AutoModel")


_register()

__all__ = [
    "IFQC_LABELS",
    "JUDGE_ARCHITECTURES",
    "MODEL_CLASSES",
    "SIMPLIFIER_LABELS",
    "CrychicFollowUpJudgeConfig",
    "CrychicFollowUpJudgeModel",
    "CrychicIFQCConfig",
    "CrychicIFQCModel",
    "CrychicSimplifierConfig",
    "CrychicSimplifierModel",
    "pack_sentences",
]
