#!/bin/bash
# Queues the shard array, then the merge to run once every task succeeded.
set -euo pipefail
cd "$(dirname "$0")"
array=$(sbatch --parsable shards.sbatch)
sbatch --dependency="afterok:${array}" merge.sbatch
