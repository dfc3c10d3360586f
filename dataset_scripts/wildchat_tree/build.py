"""Build entry of the `wildchat-tree` dataset (the same as `convohub datasets build wildchat-tree`).

    python dataset_scripts/wildchat_tree/build.py --out hub_release                  # constructed, offline
    python dataset_scripts/wildchat_tree/build.py --source dataset_scripts/wildchat_tree/sample

`sample/annotated.jsonl` is a small source in WildChatTree's schema (six conversations written by hand for
convohub, parents assigned by hand) that exercises the `--source` path.
"""

from __future__ import annotations

import sys

from convohub.cli import main

if __name__ == "__main__":
    sys.exit(main(["datasets", "build", "wildchat-tree", *sys.argv[1:]]))
