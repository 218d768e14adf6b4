#!/usr/bin/env python3
"""DGL's mini-batch GCN on a dataset in the OGB raw layout: a measuring stick for
`sparse-gcn train --batch ...` (issue 38). The project never depends on Python; this
script only gives DGL's figures for the same configurations. See README.md beside it.

Usage (from the repository root, in a DGL 2.1 virtual environment, see README.md):

    DGLVENV/bin/python benches/peers/dgl_minibatch.py DIR --sampler cluster \
        --layers 3 --hidden 256 --epochs 12 --threads 2

DIR is a folder in the OGB node-property raw layout (raw/edge.csv.gz, raw/node-feat.csv.gz,
raw/node-label.csv.gz, raw/num-node-list.csv.gz, split/NAME/{train,valid,test}.csv.gz), as
`sparse-gcn generate --preset arxiv-like --seed 0 --out DIR` writes it.

Graph. The stored edges are made undirected: both directions, duplicates and self-loops
dropped, giving A. Every sampler draws from A. Each batch then gets a self-loop on
every node, so each layer sees GCN's A + I on the batch:
  * cluster, saint-*: the induced subgraph gets `dgl.add_self_loop`, and GraphConv's
    norm='both' computes D_B^-1/2 (A_B + I) D_B^-1/2 with D_B taken from the batch
    itself. The batch's Â is renormalised on the batch (Cluster-GCN's rule). The
    GraphSAINT loss and aggregation normalisations are not applied (as in DGL's
    SAINTSampler), so the matching engine runs use `--saint-coverage 0`.
  * neighbor: each sampled block (message-flow graph) gets the edge v -> v for each of
    its destination nodes. DGL puts the destination nodes first among the block's
    sources, and the script checks this. On a block, GraphConv(norm='both') scales the
    message u -> v by 1 / sqrt(deg_out_B(u) * deg_in_B(v)). Both degrees are counted in
    the block, self-loop included: deg_in_B(v) is the neighbours sampled for v plus one,
    and deg_out_B(u) is how many of the block's destinations sampled u. These are not
    the whole graph's degrees, so a block's Â is not a sample of the whole graph's Â.
    DGL clamps each degree to at least 1, which never applies here since every node
    has its self-loop.
  * evaluation: the whole graph A + I with the whole graph's degrees.
`--fanout` goes to dgl.dataloading.NeighborSampler unchanged. Entry i is for layer i,
counted from the input layer, so with 15,10,5 the seed nodes (last layer) draw 5
neighbours each and the farthest hop draws 15. PyG's `num_neighbors` lists the hops
in the opposite order.

Model. `--layers` GraphConv(norm='both') layers, hidden width `--hidden`, with ReLU
between layers. Dropout `--dropout` (0.5) applies to the input of every layer after
the first, and `--input-dropout` (defaults to `--dropout`) to the features. This
matches Kipf & Welling and the engine's `--dropout`. Bias only with `--bias` (Kipf's
model and the engine have none by default). Adam with lr `--lr` (0.01) and
weight decay `--wd` (5e-4) on the first layer only with `--wd-scope first` (the
default, Kipf's and the engine's), or on every parameter with `--wd-scope all`.
Features are row-normalised under `--row-norm auto` when every value is >= 0, as the
engine's default does. Loss: mean cross-entropy over the batch's training nodes, for
neighbor the seed nodes. A batch with no training node is skipped and counted. One
Adam step per batch.

Samplers (DGL 2.1, CPU, dgl.dataloading.DataLoader with num_workers=0):
  cluster     ClusterGCNSampler(A, --parts) (METIS, computed once before training and
              timed as partition_s; its cache file goes to a temporary folder). The
              loader yields --parts-per-batch shuffled parts per batch. An epoch covers
              every part once.
  neighbor    NeighborSampler(--fanout) with blocks. Seeds are the training nodes,
              shuffled, in batches of --batch-size. An epoch covers every training
              node once.
  saint-rw    SAINTSampler('walk', budget=(--batch-size roots, --walk-length)).
  saint-node  SAINTSampler('node', budget=--batch-size).
  saint-edge  SAINTSampler('edge', budget=--batch-size).
              GraphSAINT: --batches-per-epoch batches per epoch.

Timing (time.perf_counter). epoch_ms is a whole epoch: sampling, feature gathering,
forward, backward and Adam steps. sample_ms is the part spent inside the data loader's
iterator: DGL's sampling, the added self-loops, gathering the batch's feature rows and
labels, and creating the iterator (shuffling). DGL runs these on the calling thread,
so they do not overlap compute. Medians are taken over the epochs after `--warmup`
warm-up epochs (1 by default, none when --epochs is 1). Validation and test run once
after training, on the whole graph with the final weights, and are timed apart as
eval_ms. Peak RSS is getrusage's ru_maxrss for the whole process. Batch sizes: for
cluster and saint-*, the subgraph's nodes and its undirected edges counted once, without
the added self-loops (as the engine's batch_nodes and batch_edges count them). For
neighbor, the first block's input nodes and the sampled edges summed over the blocks.
Progress goes to stderr, and stdout gets ONE JSON line.
"""
import argparse
import contextlib
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
import warnings

SAMPLERS = ("cluster", "neighbor", "saint-rw", "saint-node", "saint-edge")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset_dir", help="folder in the OGB raw layout")
    ap.add_argument("--split", default=None,
                    help="split name under DIR/split (default: the only one)")
    ap.add_argument("--sampler", choices=SAMPLERS, required=True)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=1,
                    help="epochs left out of the medians (at most epochs - 1)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--input-dropout", type=float, default=None,
                    help="dropout on the input features (default: --dropout)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--wd", type=float, default=5e-4, help="Adam weight decay")
    ap.add_argument("--wd-scope", choices=("first", "all"), default="first",
                    help="weight decay on the first layer only (Kipf) or on every parameter")
    ap.add_argument("--bias", action="store_true", help="give every GraphConv a bias")
    ap.add_argument("--row-norm", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--libxsmm", choices=("default", "on", "off"), default="default",
                    help="dgl.use_libxsmm: DGL's libxsmm SpMM on AVX2+ CPUs (default: DGL's choice)")
    # Cluster-GCN
    ap.add_argument("--parts", type=int, default=500)
    ap.add_argument("--parts-per-batch", type=int, default=10)
    # neighbour sampling
    ap.add_argument("--fanout", default="15,10,5",
                    help="comma-separated, one per layer, input layer first (DGL's order)")
    # neighbour sampling and GraphSAINT
    ap.add_argument("--batch-size", type=int, default=None,
                    help="neighbor: seed nodes per batch (1024); saint-rw: walk roots (3000); "
                         "saint-node: nodes drawn (8000); saint-edge: edges drawn (4000)")
    ap.add_argument("--walk-length", type=int, default=2)
    ap.add_argument("--batches-per-epoch", type=int, default=20)
    args = ap.parse_args(argv)
    if args.batch_size is None:
        args.batch_size = {"neighbor": 1024, "saint-rw": 3000, "saint-node": 8000,
                           "saint-edge": 4000}.get(args.sampler)
    if args.input_dropout is None:
        args.input_dropout = args.dropout
    args.fanouts = [int(f) for f in args.fanout.split(",") if f.strip()]
    if args.layers < 1 or args.epochs < 1 or args.threads < 1:
        ap.error("--layers, --epochs and --threads must be at least 1")
    if args.warmup < 0:
        ap.error("--warmup must be at least 0")
    if args.sampler == "neighbor" and len(args.fanouts) != args.layers:
        ap.error(f"--fanout has {len(args.fanouts)} entries for {args.layers} layers")
    if args.sampler == "cluster" and not 1 <= args.parts_per_batch <= args.parts:
        ap.error("--parts-per-batch must be in 1..=--parts")
    if args.sampler != "cluster" and args.batch_size < 1:
        ap.error("--batch-size must be at least 1")
    if args.sampler.startswith("saint") and args.batches_per_epoch < 1:
        ap.error("--batches-per-epoch must be at least 1")
    return args


# ----------------------------------------------------------------------- data
def read_ogb_raw(root, split=None):
    """Read an OGB raw-layout folder into NumPy arrays."""
    import numpy as np
    import pandas as pd

    def csv(path, **kw):  # a writable, C-ordered copy of the frame
        return np.array(pd.read_csv(path, header=None, engine="c", **kw).to_numpy(), order="C")

    raw = os.path.join(root, "raw")
    n = int(csv(os.path.join(raw, "num-node-list.csv.gz"))[0, 0])
    edges = csv(os.path.join(raw, "edge.csv.gz"), dtype=np.int64).reshape(-1, 2)
    x = csv(os.path.join(raw, "node-feat.csv.gz"), dtype=np.float32)
    y = csv(os.path.join(raw, "node-label.csv.gz"), dtype=np.float64).reshape(-1)
    y = np.where(np.isnan(y), -1, y).astype(np.int64)  # -1: unlabelled
    if x.shape[0] != n or y.shape[0] != n:
        sys.exit(f"{root}: {x.shape[0]} feature rows and {y.shape[0]} labels for {n} nodes")
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        sys.exit(f"{root}: an edge names a node outside 0..{n}")

    split_root = os.path.join(root, "split")
    names = sorted(d for d in os.listdir(split_root)
                   if os.path.isdir(os.path.join(split_root, d))) \
        if os.path.isdir(split_root) else []
    if split is None:
        if len(names) != 1:
            sys.exit(f"{root}: name a split with --split (found {names})")
        split = names[0]
    elif split not in names:
        sys.exit(f"{root}: no split {split!r} (found {names})")
    sets = {}
    for part in ("train", "valid", "test"):
        sets[part] = csv(os.path.join(split_root, split, part + ".csv.gz"),
                         dtype=np.int64).reshape(-1)
    return n, edges, x, y, sets, split


def undirected_simple(edges, n):
    """Both directions of every edge, without self-loops or duplicates: (src, dst)."""
    import numpy as np
    e = edges[edges[:, 0] != edges[:, 1]]
    lo, hi = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
    key = np.unique(lo * n + hi)
    lo, hi = key // n, key % n
    return np.concatenate([lo, hi]), np.concatenate([hi, lo])


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


# ---------------------------------------------------------------------- main
def main(argv=None):
    args = parse_args(argv)
    # The libraries' OpenMP pools read this when they load: set it first.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("DGLBACKEND", "pytorch")

    import numpy as np
    import torch
    import torch.nn.functional as F
    import dgl
    from dgl.dataloading import (ClusterGCNSampler, DataLoader, NeighborSampler,
                                 SAINTSampler, Sampler)
    from dgl.nn import GraphConv

    # A reminder DGL's loader prints at every epoch; it does not apply to one process.
    warnings.filterwarnings("ignore", message=".*CPU affinity.*")
    torch.set_num_threads(args.threads)
    dgl.utils.set_num_threads(args.threads)
    if args.libxsmm != "default":
        dgl.use_libxsmm(args.libxsmm == "on")
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    dgl.seed(args.seed)

    t0 = time.perf_counter()
    n, edges, x_np, y_np, sets, split = read_ogb_raw(args.dataset_dir, args.split)
    if args.row_norm == "on" or (args.row_norm == "auto" and x_np.min(initial=0.0) >= 0):
        s = x_np.sum(axis=1, keepdims=True, dtype=np.float64)
        s[s == 0] = 1.0
        x_np = (x_np / s).astype(np.float32)
        row_normed = True
    else:
        row_normed = False
    src, dst = undirected_simple(edges, n)
    del edges
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)  # A
    g.create_formats_()
    g_eval = dgl.add_self_loop(g)  # A + I, for evaluation on the whole graph
    g_eval.create_formats_()
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(y_np)
    train_idx, valid_idx, test_idx = (torch.from_numpy(sets[k]) for k in ("train", "valid", "test"))
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[train_idx] = True
    num_classes = int(y_np.max()) + 1
    num_undirected = int(src.shape[0]) // 2
    del src, dst, sets
    load_s = time.perf_counter() - t0

    # -------------------------------------------------------------- sampler
    class WithSelfLoops(Sampler):
        """Runs DGL's sampler, then adds A + I's self-loops and gathers the batch's
        features and labels. All of it runs inside the loader's iterator and is timed
        as sampling."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def sample(self, graph, indices):
            out = self.inner.sample(graph, indices)
            if isinstance(out, tuple):  # blocks: (input nodes, seed nodes, blocks)
                input_nodes, seeds, blocks = out
                looped = []
                for b in blocks:
                    nd = b.num_dst_nodes()
                    if not torch.equal(b.srcdata[dgl.NID][:nd], b.dstdata[dgl.NID]):
                        raise RuntimeError("a block's destinations are not its first sources")
                    u, v = b.edges()
                    ar = torch.arange(nd, dtype=u.dtype)
                    looped.append(dgl.create_block(
                        (torch.cat([u, ar]), torch.cat([v, ar])),
                        num_src_nodes=b.num_src_nodes(), num_dst_nodes=nd, idtype=b.idtype))
                # Sizes: the input nodes, and the sampled edges of every block.
                size = torch.tensor([input_nodes.shape[0], sum(b.num_edges() for b in blocks)])
                return looped, x[input_nodes], y[seeds], torch.ones(0, dtype=torch.bool), size
            nid = out.ndata[dgl.NID]
            # Sizes: the nodes, and the undirected edges each once (A has no self-loop).
            size = torch.tensor([nid.shape[0], out.num_edges() // 2])
            return dgl.add_self_loop(out), x[nid], y[nid], train_mask[nid], size

    settings = {}
    partition_s = None
    tmpdir = None
    if args.sampler == "cluster":
        tmpdir = tempfile.TemporaryDirectory(prefix="dgl_cluster_")
        tp = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):  # METIS's progress, off the JSON line
            inner = ClusterGCNSampler(g, args.parts,
                                      cache_path=os.path.join(tmpdir.name, "parts.pkl"))
        partition_s = time.perf_counter() - tp
        loader = DataLoader(g, torch.arange(args.parts), WithSelfLoops(inner),
                            batch_size=args.parts_per_batch, shuffle=True, drop_last=False,
                            num_workers=0)
        settings = {"parts": args.parts, "parts_per_batch": args.parts_per_batch}
    elif args.sampler == "neighbor":
        inner = NeighborSampler(args.fanouts)
        loader = DataLoader(g, train_idx, WithSelfLoops(inner), batch_size=args.batch_size,
                            shuffle=True, drop_last=False, num_workers=0)
        settings = {"fanout": args.fanouts, "batch_size": args.batch_size}
    else:
        mode = {"saint-rw": "walk", "saint-node": "node", "saint-edge": "edge"}[args.sampler]
        budget = (args.batch_size, args.walk_length) if mode == "walk" else args.batch_size
        inner = SAINTSampler(mode, budget)
        # The indices only count the batches; SAINTSampler ignores them.
        loader = DataLoader(g, torch.arange(args.batches_per_epoch), WithSelfLoops(inner),
                            batch_size=1, shuffle=False, drop_last=False, num_workers=0)
        settings = {"batch_size": args.batch_size}
        if mode == "walk":
            settings["walk_length"] = args.walk_length

    # ---------------------------------------------------------------- model
    class GCN(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.convs = torch.nn.ModuleList(
                GraphConv(dims[i], dims[i + 1], norm="both", weight=True, bias=args.bias)
                for i in range(len(dims) - 1))

        def forward(self, graphs, h):
            """graphs: one graph for every layer, or a list of blocks (one a layer)."""
            for i, conv in enumerate(self.convs):
                p = args.input_dropout if i == 0 else args.dropout
                h = F.dropout(h, p=p, training=self.training)
                h = conv(graphs[i] if isinstance(graphs, list) else graphs, h)
                if i < len(self.convs) - 1:
                    h = F.relu(h)
            return h

    dims = [x.shape[1]] + [args.hidden] * (args.layers - 1) + [num_classes]
    model = GCN(dims)
    first = list(model.convs[0].parameters())
    first_ids = {id(p) for p in first}
    rest = [p for p in model.parameters() if id(p) not in first_ids]
    opt = torch.optim.Adam(
        [{"params": first, "weight_decay": args.wd},
         {"params": rest, "weight_decay": args.wd if args.wd_scope == "all" else 0.0}],
        lr=args.lr)

    # ------------------------------------------------------------- training
    warmup = min(args.warmup, args.epochs - 1)
    epoch_s, sample_s = [], []
    n_batches, nodes, edges_b, skipped = [], [], [], 0
    loss_val = float("nan")
    t_train0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        te0 = time.perf_counter()
        ts = te0
        it = iter(loader)
        samp, count = 0.0, 0
        while True:
            try:
                graphs, bx, by, mask, size = next(it)
            except StopIteration:
                samp += time.perf_counter() - ts
                break
            samp += time.perf_counter() - ts
            count += 1
            nodes.append(int(size[0]))
            edges_b.append(int(size[1]))
            if isinstance(graphs, list):  # blocks: every output row is a training seed
                loss = F.cross_entropy(model(graphs, bx), by)
            elif bool(mask.any()):
                loss = F.cross_entropy(model(graphs, bx)[mask], by[mask])
            else:
                skipped += 1
                ts = time.perf_counter()
                continue
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_val = float(loss.detach())
            ts = time.perf_counter()
        epoch_s.append(time.perf_counter() - te0)
        sample_s.append(samp)
        n_batches.append(count)
        print(f"epoch {epoch + 1}/{args.epochs}: {1e3 * epoch_s[-1]:.0f} ms "
              f"(sampling {1e3 * samp:.0f} ms), {count} batches, loss {loss_val:.4f}",
              file=sys.stderr, flush=True)
    train_total_s = time.perf_counter() - t_train0

    # ----------------------------------------------------------- evaluation
    model.eval()
    tv = time.perf_counter()
    with torch.no_grad():
        pred = model(g_eval, x).argmax(-1)
    eval_ms = 1e3 * (time.perf_counter() - tv)

    def acc(idx):
        return float((pred[idx] == y[idx]).float().mean()) if idx.numel() else None

    kept = slice(warmup, None)
    med = lambda xs: 1e3 * statistics.median(xs) if xs else None  # noqa: E731
    res = {
        "script": "dgl_minibatch",
        "dataset": os.path.basename(os.path.normpath(args.dataset_dir)), "split": split,
        "num_nodes": n, "num_undirected_edges": num_undirected,
        "num_features": int(x.shape[1]), "num_classes": num_classes,
        "sampler": args.sampler, **settings,
        "batches_per_epoch": n_batches[0],
        "layers": args.layers, "hidden": args.hidden, "epochs": args.epochs,
        "warmup_epochs": warmup, "threads": args.threads, "seed": args.seed,
        "dropout": args.dropout, "input_dropout": args.input_dropout, "lr": args.lr,
        "wd": args.wd, "wd_scope": args.wd_scope, "bias": args.bias, "row_norm": row_normed,
        "epoch_ms_median": med(epoch_s[kept]),
        "epoch_ms_min": 1e3 * min(epoch_s[kept]),
        "sample_ms_median": med(sample_s[kept]),
        "compute_ms_median": med([e - s for e, s in zip(epoch_s[kept], sample_s[kept])]),
        "batch_nodes_mean": statistics.fmean(nodes) if nodes else None,
        "batch_nodes_max": max(nodes) if nodes else None,
        "batch_edges_mean": statistics.fmean(edges_b) if edges_b else None,
        "batch_edges_max": max(edges_b) if edges_b else None,
        "batches_skipped": skipped,
        "final_loss": loss_val,
        "eval_ms": eval_ms,
        "val_acc": acc(valid_idx), "test_acc": acc(test_idx),
        "partition_s": round(partition_s, 3) if partition_s is not None else None,
        "load_s": round(load_s, 3), "train_total_s": round(train_total_s, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "libxsmm": bool(dgl.is_libxsmm_enabled()),
        "dgl_version": dgl.__version__, "torch_version": torch.__version__,
    }
    if tmpdir is not None:
        tmpdir.cleanup()
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
