#!/bin/sh
# Issue 41's benchmark sitting, in one go: ours, DGL and PyG on Cora (Kipf's 2 x 16) and on
# arxiv-like (3 x 256), at 2 threads, each peer in its best configuration (DGL with libxsmm on
# and off, PyG with a CSR adjacency and with edge_index: the faster of each), then our
# `roofline --epoch` on arxiv-like. Prints the Markdown tables docs/BENCHMARKS.md shows.
#
# Usage: benches/sitting.sh [--dgl PYTHON] [--pyg PYTHON] [--peers DIR] [--rounds N]
#   --dgl / --pyg: the python of a virtual environment holding DGL 2.1 / PyTorch Geometric
#                  (../shared/peers/README.md says how to make them); a peer not given is skipped
#   --peers:       the folder of the peers' scripts dgl_gcn.py and pyg_gcn.py (default:
#                  ../shared/peers)
#   --rounds:      rounds of the whole sitting (default 1); each time is that round's
# Cora is read from $SPARSE_GCN_DATA/cora (skipped, with a line saying so, when it is unset).
set -eu
dgl= pyg= peers=../shared/peers rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
    --dgl) dgl=${2:?--dgl needs a python}; shift 2 ;;
    --pyg) pyg=${2:?--pyg needs a python}; shift 2 ;;
    --peers) peers=${2:?--peers needs a folder}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a count}; shift 2 ;;
    *) echo "sitting.sh: unknown argument $1 (see the header of benches/sitting.sh)" >&2; exit 2 ;;
    esac
done
for p in "$dgl" "$pyg"; do
    if [ -n "$p" ] && [ ! -x "$p" ]; then echo "sitting.sh: $p is not an executable python" >&2; exit 2; fi
done
if [ -n "$dgl$pyg" ] && [ ! -d "$peers" ]; then
    echo "sitting.sh: no peers' folder $peers (--peers)" >&2; exit 2
fi
cargo build --release --quiet
bin=target/release/sparse-gcn
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
$bin generate --preset arxiv-like --seed 0 --out "$dir/arxiv-like" >/dev/null
cora=
if [ -n "${SPARSE_GCN_DATA:-}" ]; then cora=$SPARSE_GCN_DATA/cora; else echo "skipped: Cora (SPARSE_GCN_DATA is unset)"; fi

# The last JSON object a command prints, as "epoch_ms test_acc".
field() {
    python3 -c '
import json, sys
t = [l for l in sys.stdin.read().splitlines() if l.startswith("{")]
d = json.loads(t[-1])
acc = d["test_acc_mean"] if "test_acc_mean" in d else d["test_acc"]
print("%.3f %.4f" % (d["epoch_ms_median"], acc))'
}
# The smaller epoch of two "epoch_ms test_acc" lines (a peer's two configurations).
best() {
    printf '%s\n%s\n' "$1" "$2" | awk 'NF == 2' | sort -g | head -n 1
}
row() { # dataset ours dgl pyg
    python3 - "$@" <<'EOF'
import sys
name, ours, dgl, pyg = sys.argv[1:5]
o = [float(x) for x in ours.split()]
def cell(s):
    if not s.strip():
        return "–", "–"
    ms, acc = (float(x) for x in s.split())
    return "%.2f (%.3f)" % (ms, acc), "%.1f×" % (ms / o[0])
d, dr = cell(dgl)
p, pr = cell(pyg)
print("| %s | %.2f (%.3f) | %s | %s | %s | %s |" % (name, o[0], o[1], d, p, dr, pr))
EOF
}

echo "| data | ours ms (test) | DGL ms (test) | PyG ms (test) | DGL ÷ ours | PyG ÷ ours |"
echo "|---|---|---|---|---|---|"
r=1
while [ "$r" -le "$rounds" ]; do
    if [ -n "$cora" ]; then
        ours=$($bin train --data "$cora" --seeds 1 --threads 2 --bias --weight-decay-scope all \
            --stop never --json 2>/dev/null | field)
        d= p=
        if [ -n "$dgl" ]; then
            d=$(best "$("$dgl" "$peers/dgl_gcn.py" "$cora" --threads 2 --row-norm 2>/dev/null | field)" \
                "$("$dgl" "$peers/dgl_gcn.py" "$cora" --threads 2 --row-norm --libxsmm off 2>/dev/null | field)")
        fi
        if [ -n "$pyg" ]; then
            p=$(best "$("$pyg" "$peers/pyg_gcn.py" "$cora" --seeds 3 --threads 2 --row-norm --wd-scope all --adj csr 2>/dev/null | field)" \
                "$("$pyg" "$peers/pyg_gcn.py" "$cora" --seeds 3 --threads 2 --row-norm --wd-scope all --adj edge_index 2>/dev/null | field)")
        fi
        row "Cora 2 × 16, round $r" "$ours" "$d" "$p"
    fi
    ours=$($bin train --data "$dir/arxiv-like" --layers 3 --hidden 256 --epochs 20 --seeds 1 \
        --threads 2 --bias --weight-decay-scope all --stop never --json 2>/dev/null | field)
    d= p=
    if [ -n "$dgl" ]; then
        d=$(best "$("$dgl" "$peers/dgl_gcn.py" "$dir/arxiv-like" --layers 3 --hidden 256 --epochs 10 --threads 2 2>/dev/null | field)" \
            "$("$dgl" "$peers/dgl_gcn.py" "$dir/arxiv-like" --layers 3 --hidden 256 --epochs 10 --threads 2 --libxsmm off 2>/dev/null | field)")
    fi
    if [ -n "$pyg" ]; then
        p=$(best "$("$pyg" "$peers/pyg_gcn.py" "$dir/arxiv-like" --layers 3 --hidden 256 --epochs 12 --seeds 1 --threads 2 --wd-scope all --adj csr 2>/dev/null | field)" \
            "$("$pyg" "$peers/pyg_gcn.py" "$dir/arxiv-like" --layers 3 --hidden 256 --epochs 12 --seeds 1 --threads 2 --wd-scope all --adj edge_index 2>/dev/null | field)")
    fi
    row "arxiv-like 3 × 256, round $r" "$ours" "$d" "$p"
    r=$((r + 1))
done

echo
echo "| roofline --epoch, arxiv-like 3 × 256 | FMA peak GFLOP/s | GEMMs GFLOP/s | gemm_fma_fraction | epoch ms | floor ms (GEMM rates) | floor ms (FMA peak) | epoch ÷ FMA floor |"
echo "|---|---|---|---|---|---|---|---|"
$bin roofline --data "$dir/arxiv-like" --epoch --layers 3 --hidden 256 --threads 2 --json 2>/dev/null \
    | python3 -c '
import json, sys
t = [l for l in sys.stdin.read().splitlines() if l.startswith("{")]
d = json.loads(t[-1])
print("| | %.1f | %.1f | %.3f | %.1f | %.1f | %.1f | %.2f× |" % (
    d["fma_peak_gflops"], d["gemm_gflops"], d["gemm_fma_fraction"], d["epoch_ms"],
    d["epoch_floor_ms"], d["epoch_floor_fma_ms"], d["epoch_ms"] / d["epoch_floor_fma_ms"]))'
