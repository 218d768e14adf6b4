#!/usr/bin/env python3
"""One sitting, one process: sparse-gcn's training step from Python against PyTorch Geometric's.

For each dataset this script trains the same GCN twice in the same process, on the same arrays:
first with ``sparse_gcn.GCNClassifier`` (the engine, in-process), then with PyTorch Geometric's
``GCNConv``, once with ``edge_index`` message passing and once with a ``torch.sparse_csr``
adjacency (the precomputed Â = D^-1/2 (A+I) D^-1/2 and ``GCNConv(normalize=False)``), and
prints a Markdown table of the median training step (forward + backward + optimiser step) of
each, after the warm-up epochs, with the faster of PyG's two adjacencies.

Datasets:
  cora        ``DATA_DIR/cora`` (``--data-dir``, default ``$SPARSE_GCN_DATA``), in the OGB raw
              layout; Kipf & Welling's model: 2 layers x 16 hidden, 200 epochs.
  arxiv-like  generated once by the repository's CLI (``sparse-gcn generate --preset arxiv-like
              --seed 0``) into a temporary folder (or ``--work-dir``); 3 layers x 256 hidden,
              10 epochs.

The model, on both sides: dropout 0.5 on the input of every layer (the features included),
ReLU between layers, no bias, Adam lr 0.01 with weight decay 5e-4 on the first layer only,
seed 0, ``stop="never"`` (every epoch runs; the last epoch's model is kept, and its test
accuracy reported). Features are row-normalised on the PyG side when they are all >= 0, as the
engine's ``row_norm="auto"`` does, so that the two test accuracies are comparable. Each epoch
also evaluates the whole graph (the engine does, for ``history_``); that is outside the timed
step and reported separately as the epoch time.

A sitting is only as good as the machine is quiet: the footer gives the CPU-seconds that other
processes and the hypervisor (steal) took while it ran. On 2 cores a concurrent build slows
torch's OpenMP loops several times over, so rerun a sitting where these are not near 0.

Rerun (from the repository's root), in a virtual environment outside the repository:

    python3 -m venv VENV
    VENV/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu   # or plain: pip install torch
    VENV/bin/pip install torch_geometric numpy scipy pandas
    CARGO_TARGET_DIR=SOME_TARGET_DIR VENV/bin/pip install ./python   # builds sparse_gcn (maturin)
    cargo build --release                                              # target/release/sparse-gcn
    SPARSE_GCN_DATA=PATH/TO/datasets VENV/bin/python benches/python/sitting.py

``--json`` adds one JSON object (every measurement) as the last line of stdout; ``--help``
lists the other options (threads, epochs, warm-up, which datasets, which PyG adjacencies).
PyG needs neither torch-sparse nor pyg-lib here.
"""

import argparse
import os
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATASETS = ("cora", "arxiv-like")
SHAPES = {  # dataset: (layers, hidden, default epochs)
    "cora": (2, 16, 200),
    "arxiv-like": (3, 256, 10),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="See the top of this file for how to set up the environment and rerun it.",
    )
    ap.add_argument("--data-dir", default=os.environ.get("SPARSE_GCN_DATA"),
                    help="folder holding cora/ (default: $SPARSE_GCN_DATA)")
    ap.add_argument("--cli", default=os.path.join(REPO, "target", "release", "sparse-gcn"),
                    help="the sparse-gcn binary that generates arxiv-like "
                         "(default: the repository's target/release/sparse-gcn)")
    ap.add_argument("--work-dir", default=None,
                    help="where arxiv-like is generated (default: a temporary folder, removed at "
                         "the end); its arxiv-like/ subfolder is overwritten")
    ap.add_argument("--datasets", default=",".join(DATASETS),
                    help=f"comma-separated, from {', '.join(DATASETS)} (default: both)")
    ap.add_argument("--threads", type=int, default=2,
                    help="threads for both sides: the engine's, torch's, OMP/MKL/OpenBLAS's (default 2)")
    ap.add_argument("--cora-epochs", type=int, default=SHAPES["cora"][2])
    ap.add_argument("--arxiv-epochs", type=int, default=SHAPES["arxiv-like"][2])
    ap.add_argument("--warmup", type=int, default=5,
                    help="epochs left out of each median (default 5)")
    ap.add_argument("--pyg-adj", choices=("both", "edge_index", "csr"), default="both",
                    help="PyG's adjacencies to time (default both; the table quotes the faster)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true",
                    help="also print one JSON object with every measurement as the last line")
    args = ap.parse_args(argv)
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for d in args.datasets:
        if d not in DATASETS:
            ap.error(f"--datasets: unknown dataset {d!r} (known: {', '.join(DATASETS)})")
    if args.threads < 1:
        ap.error("--threads: at least 1")
    for name in ("cora_epochs", "arxiv_epochs"):
        if getattr(args, name) <= args.warmup:
            ap.error(f"--{name.replace('_', '-')}: more than --warmup ({args.warmup}) epochs, "
                     "or nothing is left to time")
    if "cora" in args.datasets:
        if not args.data_dir:
            ap.error("cora: give --data-dir or set SPARSE_GCN_DATA (the folder holding cora/)")
        if not os.path.isdir(os.path.join(args.data_dir, "cora")):
            ap.error(f"cora: no folder {os.path.join(args.data_dir, 'cora')}")
    if "arxiv-like" in args.datasets and not os.access(args.cli, os.X_OK):
        ap.error(f"arxiv-like: no sparse-gcn binary at {args.cli}; build it with "
                 "`cargo build --release` or give --cli PATH")
    return args


ARGS = parse_args()
# Thread pools are sized when the libraries load: set them before numpy and torch are imported.
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import sparse_gcn  # noqa: E402

# Noise from the libraries, not about this script: PyG's import scripts a function with the
# deprecated torch.jit, and torch calls CSR tensors beta.
warnings.filterwarnings("ignore", message=".*torch.jit.script.*is deprecated", category=FutureWarning)
warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_geometric  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402

torch.set_num_threads(ARGS.threads)

LR, WEIGHT_DECAY, DROPOUT = 0.01, 5e-4, 0.5


# ------------------------------------------------------------------------ environment
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit():
    def git(*a):
        return subprocess.run(["git", "-C", REPO, *a], capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False
    try:
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        dirty = False
    return commit, dirty


def command_line():
    env = ""
    if ARGS.data_dir and ARGS.data_dir == os.environ.get("SPARSE_GCN_DATA") \
            and "--data-dir" not in " ".join(sys.argv):
        env = f"SPARSE_GCN_DATA={shlex.quote(ARGS.data_dir)} "
    return env + shlex.join([sys.executable] + sys.argv)


def cpu_snapshot():
    """(busy, steal) CPU-seconds of the whole machine since boot (/proc/stat), and this
    process's own CPU-seconds (its children's included)."""
    busy = steal = float("nan")
    try:
        with open("/proc/stat") as f:
            v = [int(t) for t in f.readline().split()[1:]]
        hz = os.sysconf("SC_CLK_TCK")
        # user nice system idle iowait irq softirq steal ...
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz
        steal = (v[7] if len(v) > 7 else 0) / hz
    except (OSError, ValueError, IndexError):
        pass
    t = os.times()
    return busy, steal, t.user + t.system + t.children_user + t.children_system


def contention(before, after, wall_s):
    """CPU-seconds that other processes used during the sitting, and the hypervisor's steal,
    as fractions of the machine's CPU-seconds: a sitting is only as quiet as these."""
    cpus = os.cpu_count() or 1
    others = (after[0] - before[0]) - (after[2] - before[2])
    steal = after[1] - before[1]
    return {"others_cpu_s": max(others, 0.0), "others_share": max(others, 0.0) / (cpus * wall_s),
            "steal_cpu_s": steal, "steal_share": steal / (cpus * wall_s),
            "loadavg_end": os.getloadavg()}


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def median_after(xs, warmup):
    xs = list(xs)[warmup:]
    return statistics.median(xs) if xs else float("nan")


# ------------------------------------------------------------------------ datasets
def generate_arxiv_like(work_dir):
    out = os.path.join(work_dir, "arxiv-like")
    cmd = [ARGS.cli, "generate", "--preset", "arxiv-like", "--seed", "0", "--out", out,
           "--threads", str(ARGS.threads)]
    if os.path.exists(out):
        cmd.append("--force")
    print(f"# generating arxiv-like: {shlex.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"sparse-gcn generate failed ({r.returncode}):\n{r.stderr}")
    return out, time.perf_counter() - t0


def torch_graph(ds):
    """The Dataset's arrays as PyG takes them: dense float32 features (row-normalised when all
    >= 0, as the engine's row_norm="auto"), labels, masks, edge_index (both directions, no
    self loops, as GCNConv adds its own) and the CSR Â = D^-1/2 (A+I) D^-1/2."""
    n = ds.num_nodes
    a = sp.csr_matrix(ds.adjacency, dtype=np.float32, copy=True)
    if not ds.directed:
        a = a + a.T
    a.setdiag(0)
    a.eliminate_zeros()
    a.data[:] = 1.0
    a.sort_indices()
    coo = a.tocoo()
    # GCNConv aggregates messages from edge_index[0] (source) into edge_index[1] (target).
    edge_index = torch.from_numpy(np.stack([coo.col, coo.row]).astype(np.int64))
    a_hat = a + sp.identity(n, dtype=np.float32, format="csr")
    deg = np.asarray(a_hat.sum(axis=1), dtype=np.float64).ravel()
    d = sp.diags((1.0 / np.sqrt(deg)).astype(np.float32))
    a_hat = sp.csr_matrix(d @ a_hat @ d, dtype=np.float32)
    a_hat.sort_indices()
    # With a sparse adjacency GCNConv computes adj_t @ x (rows = targets): Â's rows.
    adj_csr = torch.sparse_csr_tensor(
        torch.from_numpy(a_hat.indptr.astype(np.int64)),
        torch.from_numpy(a_hat.indices.astype(np.int64)),
        torch.from_numpy(a_hat.data), size=(n, n), check_invariants=True)
    x = ds.features.toarray() if sp.issparse(ds.features) else np.asarray(ds.features)
    x = np.ascontiguousarray(x, dtype=np.float32)
    row_normalized = bool(np.all(x >= 0))
    if row_normalized:
        s = x.sum(axis=1, keepdims=True, dtype=np.float64)
        s[s == 0] = 1.0
        x = (x / s).astype(np.float32)
    mask = {k: torch.from_numpy(np.asarray(getattr(ds, k), dtype=bool))
            for k in ("train_mask", "val_mask", "test_mask")}
    return {
        "x": torch.from_numpy(x), "y": torch.from_numpy(np.asarray(ds.labels, dtype=np.int64)),
        "edge_index": edge_index, "csr": adj_csr, "row_normalized": row_normalized,
        "num_classes": ds.num_classes, **mask,
    }


# ------------------------------------------------------------------------ the two sides
def run_ours(ds, layers, hidden, epochs):
    clf = sparse_gcn.GCNClassifier(model="gcn", layers=layers, hidden=hidden, epochs=epochs,
                                   stop="never", seed=ARGS.seed, threads=ARGS.threads)
    t0 = time.perf_counter()
    clf.fit_dataset(ds)
    wall = time.perf_counter() - t0
    h = clf.history_
    if len(h) != epochs:
        raise SystemExit(f"sparse_gcn ran {len(h)} epochs, not {epochs} (stop='never')")
    return {
        "train_ms": median_after((e["train_ms"] for e in h), ARGS.warmup),
        "epoch_ms": median_after((e["epoch_ms"] for e in h), ARGS.warmup),
        "test_acc": float(clf.test_acc_), "val_acc": float(clf.val_acc_),
        "best_epoch": int(clf.best_epoch_), "epochs": len(h), "fit_s": wall,
        "train_ms_all": [e["train_ms"] for e in h],
    }


class GCN(torch.nn.Module):
    """Kipf & Welling's GCN: dropout on every layer's input, GCNConv without bias, ReLU
    between layers."""

    def __init__(self, dims, normalize):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            GCNConv(a, b, bias=False, cached=normalize, normalize=normalize)
            for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x, adj):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, p=DROPOUT, training=self.training)
            x = conv(x, adj)
            if i + 1 < len(self.convs):
                x = x.relu()
        return x


def run_pyg(g, adj_kind, layers, hidden, epochs):
    torch.manual_seed(ARGS.seed)
    dims = [g["x"].shape[1]] + [hidden] * (layers - 1) + [g["num_classes"]]
    if adj_kind == "edge_index":
        model, adj = GCN(dims, normalize=True), g["edge_index"]  # Â computed once, cached
    else:
        model, adj = GCN(dims, normalize=False), g["csr"]  # the precomputed Â
    first = list(model.convs[0].parameters())
    rest = [p for c in model.convs[1:] for p in c.parameters()]
    opt = torch.optim.Adam([{"params": first, "weight_decay": WEIGHT_DECAY},
                            {"params": rest, "weight_decay": 0.0}], lr=LR)
    x, y, tr = g["x"], g["y"], g["train_mask"]
    train_ms, epoch_ms = [], []
    t_all = time.perf_counter()
    for _ in range(epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x, adj)[tr], y[tr])
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            pred = model(x, adj).argmax(-1)
        val_acc = float((pred[g["val_mask"]] == y[g["val_mask"]]).float().mean())
        test_acc = float((pred[g["test_mask"]] == y[g["test_mask"]]).float().mean())
        t2 = time.perf_counter()
        train_ms.append(1e3 * (t1 - t0))
        epoch_ms.append(1e3 * (t2 - t0))
    return {
        "adj": adj_kind,
        "train_ms": median_after(train_ms, ARGS.warmup),
        "epoch_ms": median_after(epoch_ms, ARGS.warmup),
        "test_acc": test_acc, "val_acc": val_acc, "epochs": epochs,
        "fit_s": time.perf_counter() - t_all, "train_ms_all": train_ms,
    }


# ------------------------------------------------------------------------ report
def fmt_ms(ms):
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def markdown(meta, rows):
    out = [
        f"| dataset (model) | sparse-gcn, ms/step | PyG {meta['torch_geometric']}, ms/step "
        "(faster adjacency) | PyG / sparse-gcn | test acc sparse-gcn | test acc PyG |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r["pyg_best"]
        out.append(
            f"| {r['dataset']} ({r['layers']} × {r['hidden']}, {r['epochs']} epochs) "
            f"| {fmt_ms(r['ours']['train_ms'])} | {fmt_ms(p['train_ms'])} ({p['adj']}) "
            f"| {p['train_ms'] / r['ours']['train_ms']:.1f}× "
            f"| {100 * r['ours']['test_acc']:.2f} % | {100 * p['test_acc']:.2f} % |")
    out.append("")
    out.append(f"ms/step: median training step (forward + backward + optimiser step) over the "
               f"epochs after the first {meta['warmup']}, in one process; test accuracy of the "
               f"last epoch's model, seed {meta['seed']}.")
    for r in rows:
        each = "; ".join(f"{p['adj']} {fmt_ms(p['train_ms'])} ms/step, "
                         f"{fmt_ms(p['epoch_ms'])} ms/epoch" for p in r["pyg"])
        out.append(f"- {r['dataset']}: {r['nodes']:,} nodes, {r['adj_nnz']:,} adjacency entries, "
                   f"{r['features']} {r['feature_kind']} features, {r['classes']} classes; "
                   f"with evaluation, sparse-gcn {fmt_ms(r['ours']['epoch_ms'])} ms/epoch; "
                   f"PyG {each}.")
    dirty = " (work tree with uncommitted changes)" if meta["dirty"] else ""
    q = meta["contention"]
    out += [
        "",
        f"- threads: {meta['threads']} (sparse-gcn `threads={meta['threads']}`, "
        f"`torch.set_num_threads({meta['threads']})`, OMP/MKL/OpenBLAS_NUM_THREADS={meta['threads']})",
        f"- CPU: {meta['cpu']} ({meta['cpus']} CPUs online)",
        f"- other load during the sitting: other processes {q['others_cpu_s']:.1f} CPU-s "
        f"({100 * q['others_share']:.1f} % of the machine), hypervisor steal {q['steal_cpu_s']:.1f} "
        f"CPU-s ({100 * q['steal_share']:.1f} %); load average {q['loadavg_start'][0]:.2f} at the "
        f"start, {q['loadavg_end'][0]:.2f} at the end",
        f"- date: {meta['start']} – {meta['end']} UTC ({meta['total_s']:.0f} s)",
        f"- commit: {meta['commit']}{dirty}; sparse_gcn {meta['sparse_gcn']}",
        f"- torch {meta['torch']}, torch_geometric {meta['torch_geometric']}, "
        f"Python {meta['python']}, NumPy {meta['numpy']}",
        f"- command: `{meta['command']}`",
    ]
    return "\n".join(out)


def main():
    start = now_utc()
    t_start = time.perf_counter()
    cpu_before = cpu_snapshot()
    load_start = os.getloadavg()
    commit, dirty = git_commit()
    tmp = None
    rows = []
    try:
        for name in ARGS.datasets:
            layers, hidden, _ = SHAPES[name]
            epochs = ARGS.cora_epochs if name == "cora" else ARGS.arxiv_epochs
            gen_s = None
            if name == "cora":
                path = os.path.join(ARGS.data_dir, "cora")
            else:
                work = ARGS.work_dir
                if work is None:
                    work = tmp = tempfile.mkdtemp(prefix="sparse-gcn-sitting-")
                os.makedirs(work, exist_ok=True)
                path, gen_s = generate_arxiv_like(work)
            t0 = time.perf_counter()
            ds = sparse_gcn.load(path)
            load_s = time.perf_counter() - t0
            print(f"# {name}: {ds!r}, loaded in {load_s:.1f} s", file=sys.stderr, flush=True)
            ours = run_ours(ds, layers, hidden, epochs)
            print(f"# {name}: sparse-gcn {ours['train_ms']:.3f} ms/step, test "
                  f"{ours['test_acc']:.4f}", file=sys.stderr, flush=True)
            g = torch_graph(ds)
            kinds = ("edge_index", "csr") if ARGS.pyg_adj == "both" else (ARGS.pyg_adj,)
            pyg = []
            for kind in kinds:
                r = run_pyg(g, kind, layers, hidden, epochs)
                print(f"# {name}: PyG {kind} {r['train_ms']:.3f} ms/step, test "
                      f"{r['test_acc']:.4f}", file=sys.stderr, flush=True)
                pyg.append(r)
            rows.append({
                "dataset": name, "path": path, "layers": layers, "hidden": hidden,
                "epochs": epochs, "nodes": ds.num_nodes, "adj_nnz": int(ds.adjacency.nnz),
                "features": int(ds.features.shape[1]),
                "feature_kind": "sparse" if sp.issparse(ds.features) else "dense",
                "classes": ds.num_classes, "pyg_row_normalized": g["row_normalized"],
                "generate_s": gen_s, "load_s": load_s,
                "ours": ours, "pyg": pyg, "pyg_best": min(pyg, key=lambda p: p["train_ms"]),
            })
            del ds, g
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    end = now_utc()
    total_s = time.perf_counter() - t_start
    quiet = contention(cpu_before, cpu_snapshot(), total_s)
    quiet["loadavg_start"] = load_start
    meta = {
        "threads": ARGS.threads, "warmup": ARGS.warmup, "seed": ARGS.seed,
        "cpu": cpu_model(), "cpus": os.cpu_count(),
        "start": start.strftime("%Y-%m-%d %H:%M:%S"), "end": end.strftime("%H:%M:%S"),
        "total_s": total_s, "contention": quiet,
        "commit": commit, "dirty": dirty, "sparse_gcn": sparse_gcn.__version__,
        "torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
        "python": platform.python_version(), "numpy": np.__version__,
        "command": command_line(),
    }
    print(markdown(meta, rows))
    if ARGS.json:
        print(json.dumps({"meta": meta, "results": rows}))


if __name__ == "__main__":
    main()
