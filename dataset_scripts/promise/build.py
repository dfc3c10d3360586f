"""Build entry of the `promise` dataset (the same as `convohub datasets build promise`).

    python dataset_scripts/promise/build.py --out hub_release                        # generated, offline
    python dataset_scripts/promise/build.py --source dataset_scripts/promise/sample  # released dialogues

`sample/` is a small source in the format convohub assumes (`validation.jsonl`, one dialogue per line, and
`test.json`, a list): four dialogues written by hand for convohub from its passage collection, exercising the
`--source` path. The format is documented in the dataset card and in `convohub.promise.source`.
"""

from __future__ import annotations

import sys

from convohub.cli import main

if __name__ == "__main__":
    sys.exit(main(["datasets", "build", "promise", *sys.argv[1:]]))
