"""Test-wide settings: everything runs offline, on models and data convohub builds itself."""

from __future__ import annotations

import os

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_EVALUATE_OFFLINE": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_key, _value)

# Under pytest-xdist (the README's ``-n 2``) two workers share the two cores: each gets one torch/OpenMP thread
# (inherited by the training scripts they launch), since two processes of two threads each on two cores make
# torch's threads wait on each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_key] = "1"
