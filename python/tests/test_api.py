"""The Python package's API: inputs (SciPy, edge index, PyG-shaped), the CLI's bits, save and
load, and the errors bad arguments raise."""

import json
import os
import signal
import subprocess
import threading
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparse_gcn

ROOT = Path(__file__).resolve().parents[2]
DATA = os.environ.get("SPARSE_GCN_DATA")
CLI = ROOT / "target" / "release" / "sparse-gcn"


def blocks(n=600, classes=3, seed=0, d=24):
    """A stochastic block model: dense intra-class edges, sparse inter-class edges, features
    that hint at the class; Planetoid-like masks."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    same = y[:, None] == y[None, :]
    p = np.where(same, 0.02, 0.002)
    upper = np.triu(rng.random((n, n)) < p, 1)
    rows, cols = np.nonzero(upper)
    a = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, n))
    a = ((a + a.T) > 0).astype(np.float32).tocsr()
    x = rng.random((n, d)).astype(np.float32)
    x[np.arange(n), y] += 3.0
    order = rng.permutation(n)
    train = np.zeros(n, bool)
    train[order[:60]] = True
    val = np.zeros(n, bool)
    val[order[60:200]] = True
    test = np.zeros(n, bool)
    test[order[200:]] = True
    return a, x, y.astype(np.int64), train, val, test


def bits(history):
    """A history without its wall-clock times."""
    return [{k: v for k, v in h.items() if not k.endswith("_ms")} for h in history]


def fit(model="gcn", **kw):
    a, x, y, tr, va, te = blocks()
    clf = sparse_gcn.GCNClassifier(model=model, epochs=30, stop="never", **kw)
    return clf.fit(a, x, y, tr, va, te), (a, x, y, tr, va, te)


def test_scipy_input_trains_and_predicts():
    clf, (a, x, y, tr, va, te) = fit()
    assert len(clf.history_) == 30
    assert [h["epoch"] for h in clf.history_] == list(range(1, 31))
    assert clf.score(te) == clf.test_acc_
    assert clf.test_acc_ > 2 / 3, clf.test_acc_  # chance is 1/3
    pred = clf.predict()
    assert pred.shape == (600,) and pred.dtype.kind == "i"
    proba = clf.predict_proba()
    assert proba.shape == (600, 3) and proba.dtype == np.float32
    assert np.allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    assert np.array_equal(np.argmax(proba, axis=1), pred)
    assert clf.embed(1).shape == (600, 16)
    # The fit's data given again: the same logits.
    assert np.array_equal(clf.decision_function(a, x), clf.decision_function())


def test_edge_index_and_pyg_object_give_the_same_bits():
    clf, (a, x, y, tr, va, te) = fit()
    coo = sp.triu(a).tocoo()
    edge_index = np.vstack([coo.row, coo.col]).astype(np.int64)  # one direction only
    by_index = sparse_gcn.GCNClassifier(epochs=30, stop="never").fit(
        edge_index, x, y, tr, va, te
    )
    assert bits(by_index.history_) == bits(clf.history_)
    assert by_index.test_acc_ == clf.test_acc_

    class Tensor:  # a torch-like tensor: detach(), cpu(), numpy()
        def __init__(self, a):
            self.a = a

        def detach(self):
            return self

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    full = sp.coo_matrix(a)
    data = types.SimpleNamespace(
        edge_index=Tensor(np.vstack([full.row, full.col]).astype(np.int64)),
        x=Tensor(x),
        y=Tensor(y),
        train_mask=Tensor(tr),
        val_mask=Tensor(va),
        test_mask=Tensor(te),
    )
    ds = sparse_gcn.from_pyg(data)
    assert ds.num_nodes == 600 and ds.num_classes == 3
    by_pyg = sparse_gcn.GCNClassifier(epochs=30, stop="never").fit_dataset(ds)
    assert bits(by_pyg.history_) == bits(clf.history_)
    assert by_pyg.test_acc_ == clf.test_acc_


def test_sparse_and_dense_features_and_index_masks_agree():
    clf, (a, x, y, tr, va, te) = fit()
    other = sparse_gcn.GCNClassifier(epochs=30, stop="never").fit(
        a, sp.csr_matrix(x), y, np.flatnonzero(tr), np.flatnonzero(va), np.flatnonzero(te)
    )
    assert other.test_acc_ == clf.test_acc_


def test_every_model_trains():
    for model in ["gcn", "residual", "gcnii", "jk-cat", "jk-max", "jk-att", "sgc", "appnp"]:
        clf, _ = fit(model=model)
        assert len(clf.history_) == 30, model
        assert np.isfinite(clf.history_[-1]["train_loss"]), model


def test_seed_changes_and_reproduces():
    a, _ = fit(seed=3)
    b, _ = fit(seed=3)
    c, _ = fit(seed=4)
    assert bits(a.history_) == bits(b.history_)
    assert bits(a.history_) != bits(c.history_)


def test_on_epoch_sees_every_epoch_and_its_errors_propagate():
    seen = []
    a, x, y, tr, va, te = blocks()
    clf = sparse_gcn.GCNClassifier(epochs=12, stop="never")
    clf.fit(a, x, y, tr, va, te, on_epoch=seen.append)
    assert [s["epoch"] for s in seen] == list(range(1, 13))
    assert seen == clf.history_

    def boom(record):
        if record["epoch"] == 3:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        clf.fit(a, x, y, tr, va, te, on_epoch=boom)


def test_ctrl_c_stops_between_epochs():
    a, x, y, tr, va, te = blocks(n=3000, d=64)
    epochs = 20_000  # tens of seconds: bounded even if the interrupt were lost
    clf = sparse_gcn.GCNClassifier(epochs=epochs, stop="never", hidden=64)
    seen = []
    # A process started in the background by a non-interactive shell (CI) inherits SIGINT
    # ignored, and Python then installs no handler: install Python's own for the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            clf.fit(a, x, y, tr, va, te, on_epoch=seen.append)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert 0 < len(seen) < epochs


def test_save_and_load(tmp_path):
    clf, (a, x, y, tr, va, te) = fit()
    path = tmp_path / "m.safetensors"
    clf.save(path)
    loaded = sparse_gcn.GCNClassifier.load(path)
    assert np.array_equal(loaded.predict_proba(a, x), clf.predict_proba())
    assert np.array_equal(loaded.predict(a, x), clf.predict())
    assert np.array_equal(loaded.embed(1, a, x), clf.embed(1))
    with pytest.raises(ValueError, match="adjacency, features"):
        loaded.predict()
    # A directory is never replaced.
    with pytest.raises(OSError):
        clf.save(tmp_path)
    with pytest.raises(OSError):
        sparse_gcn.GCNClassifier.load(tmp_path / "missing.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError):
        sparse_gcn.GCNClassifier.load(bad)


def test_bad_options_name_the_option():
    cases = [
        (dict(dropout=1.0), ValueError, "dropout"),
        (dict(lr=0.0), ValueError, "lr"),
        (dict(layers=0), ValueError, "layers"),
        (dict(hidden=-1), ValueError, "hidden"),
        (dict(k=3), ValueError, "k"),  # gcn has no K
        (dict(model="sgc", hidden=8), ValueError, "hidden"),
        (dict(model="nope"), ValueError, "model"),
        (dict(stop="sometimes"), ValueError, "stop"),
        (dict(stop="never", patience=3), ValueError, "patience"),
        (dict(epochs="ten"), TypeError, "epochs"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(threads=-2), ValueError, "threads"),
        (dict(colour="red"), TypeError, "colour"),
        (dict(parts=10), ValueError, "parts"),  # only batch="cluster" has parts
        (dict(batch="neighbor", model="appnp"), ValueError, "batch"),
        (dict(batch="neighbor", fanout=[5]), ValueError, "fanout"),  # 2 layers, 1 fanout
        (dict(batch="saint-rw", eval="batch"), ValueError, "eval"),
        (dict(batch="sideways"), ValueError, "batch"),
        (dict(fanout="5,5", batch="neighbor"), TypeError, "fanout"),
    ]
    for kw, exc, name in cases:
        with pytest.raises(exc, match=name):
            sparse_gcn.GCNClassifier(**kw)
    # Names in any case, as the CLI.
    sparse_gcn.GCNClassifier(model="GCN", stop="Never")


def test_every_adjacency_layout_gives_the_same_bits():
    clf, (a, x, y, tr, va, te) = fit()
    want = bits(clf.history_)
    a64 = a.copy()
    a64.indptr, a64.indices = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    coo = a.tocoo()
    diag = np.arange(600, dtype=coo.row.dtype)
    zero = sp.csr_matrix(
        (
            np.concatenate([coo.data, np.zeros(600, np.float32)]),
            (np.concatenate([coo.row, diag]), np.concatenate([coo.col, diag])),
        ),
        shape=(600, 600),
    )
    assert zero.nnz == a.nnz + 600  # explicit zeros on the diagonal
    pairs = np.stack([coo.row.astype(np.int64), coo.col.astype(np.int64)], axis=1)
    layouts = {
        "csr int32": a,
        "csr int64": a64,
        "csc": a.tocsc(),
        "coo": coo,
        "explicit zeros": zero,
        "edge index int32": np.vstack([coo.row, coo.col]).astype(np.int32),
        "edge index strided": pairs.T,  # rows not contiguous: a copy
        "edge index uint16": np.vstack([coo.row, coo.col]).astype(np.uint16),
    }
    for name, adj in layouts.items():
        other = sparse_gcn.GCNClassifier(epochs=30, stop="never").fit(adj, x, y, tr, va, te)
        assert bits(other.history_) == want, name


def test_a_malformed_csr_names_its_array():
    a, x, y, tr, va, te = blocks()
    clf = sparse_gcn.GCNClassifier(epochs=2, stop="never")

    def tampered(array, k, v):
        b = a.copy()
        arr = getattr(b, array).copy()
        arr[k] = v
        setattr(b, array, arr)
        return b

    cases = [
        (tampered("indptr", 3, a.indptr[5]), "adjacency \\(indptr\\)"),  # decreasing
        (tampered("indptr", -1, a.nnz - 1), "adjacency \\(indptr\\)"),  # short of nnz
        (tampered("indptr", 0, 1), "adjacency \\(indptr\\)"),
        (tampered("indices", 7, 600), "adjacency \\(column indices\\)"),
        (tampered("indices", 0, -1), "adjacency \\(column indices\\)"),
    ]
    for adj, name in cases:
        with pytest.raises(ValueError, match=name):
            clf.fit(adj, x, y, tr, va, te)


def test_a_csr_adjacency_is_read_in_place():
    """Python-side allocations while fitting on a CSR adjacency of 2M entries stay far below
    one copy of its indices (tracemalloc sees NumPy's buffers, not the engine's)."""
    import tracemalloc

    n, per_row = 100_000, 20
    rng = np.random.default_rng(0)
    cols = rng.integers(0, n, n * per_row).astype(np.int32)
    cols.reshape(n, per_row).sort(axis=1)
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int32)
    a = sp.csr_matrix((np.ones(n * per_row, np.float32), cols, indptr), shape=(n, n))
    x = rng.random((n, 4), dtype=np.float32)
    y = rng.integers(0, 2, n)
    tr, va = np.arange(0, 100), np.arange(100, 200)
    clf = sparse_gcn.GCNClassifier(epochs=1, stop="never", hidden=4)
    tracemalloc.start()
    try:
        clf.fit(a, x, y, tr, va)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.indices.nbytes / 4, f"{peak} bytes traced, indices {a.indices.nbytes}"


def test_bad_data_names_the_argument():
    a, x, y, tr, va, te = blocks()
    clf = sparse_gcn.GCNClassifier(epochs=2, stop="never")
    cases = [
        ((a, x[:, 0], y, tr, va, te), ValueError, "features"),
        ((a, x[:-1], y, tr, va, te), ValueError, "features"),
        ((a, x.astype(str), y, tr, va, te), TypeError, "features"),
        ((a, x, y[:-1], tr, va, te), ValueError, "labels"),
        ((a, x, y.astype(np.float64) + 0.5, tr, va, te), ValueError, "labels"),
        ((a, x, y, tr[:-1], va, te), ValueError, "train_mask"),
        ((a, x, y, tr, va.astype(np.float64), te), TypeError, "val_mask"),
        ((a, x, y, tr, va, np.array([0, 600])), ValueError, "test_mask"),
        ((a, x, y, tr, None, te), ValueError, "val_mask"),
        ((a[:, :-1], x, y, tr, va, te), ValueError, "adjacency"),
        ((a * 2.0, x, y, tr, va, te), ValueError, "adjacency"),
        ((np.zeros((3, 4), np.int64), x, y, tr, va, te), ValueError, "adjacency"),
        ((np.array([[0], [600]]), x, y, tr, va, te), ValueError, "adjacency"),
        (("graph", x, y, tr, va, te), TypeError, "adjacency"),
    ]
    for args, exc, name in cases:
        with pytest.raises(exc, match=name):
            clf.fit(*args)
    bad = x.copy()
    bad[5, 2] = np.nan
    with pytest.raises(ValueError, match="features"):
        clf.fit(a, bad, y, tr, va, te)
    # Overlapping masks: the engine's message.
    with pytest.raises(ValueError, match="node 0 is in split part train and part valid"):
        clf.fit(a, x, y, tr, tr, te)
    # A fitted model given data of another width.
    fitted, _ = fit()
    with pytest.raises(ValueError, match="features"):
        fitted.predict(a, x[:, :5])
    with pytest.raises(ValueError, match="layer"):
        fitted.embed(3)


def test_load_errors():
    with pytest.raises(OSError):
        sparse_gcn.load("/nonexistent/dataset")
    with pytest.raises(TypeError):
        sparse_gcn.load("/nonexistent/dataset", colour="red")


def test_load_an_edge_list(tmp_path):
    edges = tmp_path / "g.csv"
    edges.write_text("src,dst\n0,1\n1,2\n2,0\n3,4\n")
    ds = sparse_gcn.load(edges, features="degree")
    assert ds.num_nodes == 5
    assert ds.adjacency.nnz == 8
    assert (ds.adjacency != ds.adjacency.T).nnz == 0


def test_cora_matches_the_cli_bit_for_bit(tmp_path):
    if not DATA or not (Path(DATA) / "cora").is_dir():
        pytest.skip("skipped: SPARSE_GCN_DATA/cora is not there")
    if not CLI.exists():
        pytest.skip(f"skipped: {CLI} is not built (cargo build --release)")
    cora = Path(DATA) / "cora"
    ds = sparse_gcn.load(cora)
    runs = [
        ("gcn", {}, []),
        ("appnp", {"epochs": 40}, ["--epochs", "40"]),
        (
            "gcn",
            {"batch": "neighbor", "fanout": [5, 10], "batch_size": 32, "epochs": 5},
            ["--batch", "neighbor", "--fanout", "5,10", "--batch-size", "32", "--epochs", "5"],
        ),
        (
            "gcn",
            {"batch": "cluster", "parts": 20, "parts_per_batch": 4, "clusters": "community",
             "epochs": 10},
            ["--batch", "cluster", "--parts", "20", "--parts-per-batch", "4", "--clusters",
             "community", "--epochs", "10"],
        ),
    ]
    for model, kw, extra in runs:
        clf = sparse_gcn.GCNClassifier(model=model, seed=1, **kw).fit_dataset(ds)
        hist = tmp_path / f"{model}-{len(extra)}.csv"
        out = subprocess.run(
            [str(CLI), "train", "--data", str(cora), "--model", model, "--seed", "1",
             "--history", str(hist), "--json", *extra],
            check=True, capture_output=True, text=True,
        )
        j = json.loads(out.stdout.strip().splitlines()[-1])
        assert j["test_acc_mean"] == clf.test_acc_ == clf.score(ds.test_mask)
        rows = hist.read_text().splitlines()[1:]
        assert len(rows) == len(clf.history_)
        for row, h in zip(rows, clf.history_):
            f = row.split(",")
            assert int(f[1]) == h["epoch"]
            assert [float(v) for v in f[2:6]] == [
                h["train_loss"], h["train_acc"], h["val_loss"], h["val_acc"]
            ]
    # Cora as a PyG-shaped object (edge_index, dense x, y, masks): the CLI's accuracy too.
    coo = ds.adjacency.tocoo()
    data = types.SimpleNamespace(
        edge_index=np.vstack([coo.row, coo.col]).astype(np.int64),
        x=ds.features.toarray(),
        y=ds.labels,
        train_mask=ds.train_mask,
        val_mask=ds.val_mask,
        test_mask=ds.test_mask,
    )
    by_pyg = sparse_gcn.GCNClassifier(seed=1).fit_dataset(sparse_gcn.from_pyg(data))
    out = subprocess.run(
        [str(CLI), "train", "--data", str(cora), "--seed", "1", "--json"],
        check=True, capture_output=True, text=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])["test_acc_mean"] == by_pyg.test_acc_
    # A checkpoint saved here is the CLI's: `eval` gives the same test accuracy.
    clf = sparse_gcn.GCNClassifier(seed=0).fit_dataset(ds)
    ck = tmp_path / "cora.safetensors"
    clf.save(ck)
    out = subprocess.run(
        [str(CLI), "eval", "--checkpoint", str(ck), "--data", str(cora), "--json"],
        check=True, capture_output=True, text=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])["test_acc"] == clf.test_acc_


def test_a_store_loads_as_its_source(tmp_path):
    """`sparse-gcn convert` writes a store (here in the community order); `load` reads it
    back in the input's node order: the same arrays as the source, the same training."""
    if not CLI.exists():
        pytest.skip(f"skipped: {CLI} is not built (cargo build --release)")
    src, store = tmp_path / "src", tmp_path / "store"
    subprocess.run([str(CLI), "generate", "--out", str(src)], check=True, capture_output=True)
    subprocess.run(
        [str(CLI), "convert", "--data", str(src), "--out", str(store), "--reorder", "community"],
        check=True, capture_output=True,
    )
    a, b = sparse_gcn.load(src), sparse_gcn.load(store)
    assert (a.adjacency != b.adjacency).nnz == 0
    fa = a.features.toarray() if sp.issparse(a.features) else a.features
    fb = b.features.toarray() if sp.issparse(b.features) else b.features
    assert np.array_equal(fa, fb)
    assert np.array_equal(a.labels, b.labels)
    for m in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(a, m), getattr(b, m))
    fit = lambda ds: sparse_gcn.GCNClassifier(epochs=20, stop="never").fit_dataset(ds)
    assert bits(fit(a).history_) == bits(fit(b).history_)
