#!/bin/sh
# The mini-batch sitting of docs/MINIBATCH.md: every sampler on arxiv-like 3 × 256 at 2
# threads, one after the other, printing a Markdown table of the median epoch (training and
# building the batches), the batches' building time (overlapped with training, see
# EpochRecord::sample_ms), the epoch with evaluation, batches an epoch and test accuracy.
# Usage: benches/minibatch.sh [--peers DGLVENV_PYTHON] [EPOCHS]   (default 12; the first 5 are
# warm-up)
# --peers: right after our table, DGL's samplers in the same configurations on the same graph
# (written out with `sparse-gcn generate`), with the python of a DGL 2.1 virtual environment
# (benches/peers/README.md). Its neighbour sampling takes about a minute an epoch.
set -eu
peers=
if [ "${1:-}" = "--peers" ]; then
    peers=${2:?--peers needs the python of a DGL 2.1 virtual environment}
    shift 2
fi
epochs=${1:-12}
cargo build --release --quiet
bin=target/release/sparse-gcn
echo "| batches | flags | epoch ms | building ms | with evaluation ms | batches | test |"
echo "|---|---|---|---|---|---|---|"
for flags in "" "--batch cluster" "--batch saint-rw" "--batch saint-rw --saint-coverage 0" \
    "--batch saint-edge --saint-coverage 0" "--batch saint-node --saint-coverage 0" \
    "--batch neighbor --fanout 5,10,15 --batch-size 1024"; do
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
[ -n "$peers" ] || exit 0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
$bin generate --preset arxiv-like --seed 0 --out "$dir/arxiv-like" >/dev/null
echo
echo "| DGL sampler | flags | epoch ms | sampling ms | ms a batch | evaluation ms (once) | batches | test |"
echo "|---|---|---|---|---|---|---|---|"
for flags in "--sampler cluster --parts 500 --parts-per-batch 10" \
    "--sampler saint-rw --batch-size 3000 --walk-length 2 --batches-per-epoch 20" \
    "--sampler saint-edge --batch-size 4000 --batches-per-epoch 20" \
    "--sampler saint-node --batch-size 8000 --batches-per-epoch 20" \
    "--sampler neighbor --fanout 15,10,5 --batch-size 1024"; do
    # shellcheck disable=SC2086
    "$peers" benches/peers/dgl_minibatch.py "$dir/arxiv-like" --layers 3 --hidden 256 \
        --epochs "$epochs" --warmup 5 --threads 2 $flags 2>/dev/null | python3 -c '
import json, sys
d = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print("| %s | `%s` | %.0f | %.0f | %.0f | %.0f | %d | %.4f |" % (
    d["sampler"], sys.argv[1], d["epoch_ms_median"], d["sample_ms_median"],
    d["epoch_ms_median"] / d["batches_per_epoch"], d["eval_ms"], d["batches_per_epoch"],
    d["test_acc"]))' "$flags"
done
