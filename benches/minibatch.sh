#!/bin/sh
# The mini-batch sitting of docs/MINIBATCH.md: every sampler on arxiv-like 3 × 256 at 2
# threads, one after the other, printing a Markdown table of the median epoch (training and
# building the batches), the batches' building time (overlapped with training, see
# EpochRecord::sample_ms), the epoch with evaluation, batches an epoch and test accuracy.
# Usage: benches/minibatch.sh [EPOCHS]   (default 12; the first 5 are warm-up)
set -eu
epochs=${1:-12}
cargo build --release --quiet
bin=target/release/sparse-gcn
echo "| batches | flags | epoch ms | building ms | with evaluation ms | batches | test |"
echo "|---|---|---|---|---|---|---|"
for flags in "" "--batch cluster" "--batch saint-rw" "--batch saint-rw --saint-coverage 0" \
    "--batch saint-edge --saint-coverage 0" "--batch saint-node --saint-coverage 0"; do
    # shellcheck disable=SC2086
    $bin train --preset arxiv-like --layers 3 --hidden 256 --epochs "$epochs" --threads 2 \
        --stop never $flags --json 2>/dev/null | python3 -c '
import json, sys
t = sys.stdin.read()
d = json.loads(t[t.index("{"):t.rindex("}") + 1])
flags = sys.argv[1]
print("| %s | `%s` | %.0f | %.0f | %.0f | %s | %.4f |" % (
    d["batch"]["kind"], flags or "(full batch)", d["epoch_ms_median"], d["sample_ms_median"],
    d["epoch_with_eval_ms_median"], d["batches_per_epoch"] or 1, d["test_acc_mean"]))' "$flags"
done
