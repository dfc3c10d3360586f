"""Build entry of the `wildchat-aqa` dataset (the same as `convohub datasets build wildchat-aqa`).

    python dataset_scripts/wildchat_aqa/build.py --out hub_release             # construction, tiny, offline
    python dataset_scripts/wildchat_aqa/build.py --source /data/wildchat_aqa   # the authors' released datasets
    CONVOHUB_LLM_BASE_URL=http://vllm:8000/v1#Qwen/Qwen3-8B python dataset_scripts/wildchat_aqa/build.py

`--source` names a folder holding the authors' datasets as saved with `save_to_disk`, each in a subfolder
named after its Hub repository (wildchat_aqa_with_embedding_and_gpt_generated_query,
wildchat_aqa_sampled_subset_with_embedding_and_gpt_generated_query, wildchat_aqa_conversations,
wildchat_aqa_summary_with_embedding), with their taxonomy files in wildchat_aqa_taxonomy/ to map topic ids to
names. The paper-scale construction (WildChat-1M, the paper's thresholds, an endpoint LLM) is
`convohub release --only aqa --profile paper --llm URL#MODEL`.
"""

from __future__ import annotations

import sys

from convohub.cli import main

if __name__ == "__main__":
    sys.exit(main(["datasets", "build", "wildchat-aqa", *sys.argv[1:]]))
