"""Build entry of the `wildfeedback` dataset (the same as `convohub datasets build wildfeedback`).

    python dataset_scripts/wildfeedback/build.py --out hub_release                          # pipeline, offline
    python dataset_scripts/wildfeedback/build.py --source dataset_scripts/wildfeedback/sample  # released layout
    python dataset_scripts/wildfeedback/build.py --source /data/WildFeedback               # the real release
    CONVOHUB_LLM_BASE_URL=http://vllm:8000/v1#Qwen/Qwen3-8B python dataset_scripts/wildfeedback/build.py

`sample/` holds small files in the released layout (wildfeedback.json, sat_dsat_annotation.json,
user_preference.json), written by `convohub.wildfeedback.sample.write_sample` from an offline pipeline run,
that exercise the `--source` path. More options (policy/judge models, cluster sizes, work folder):
`convohub wildfeedback build --help`.
"""

from __future__ import annotations

import sys

from convohub.cli import main

if __name__ == "__main__":
    sys.exit(main(["datasets", "build", "wildfeedback", *sys.argv[1:]]))
