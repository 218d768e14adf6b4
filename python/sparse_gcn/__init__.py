"""sparse_gcn: Graph Convolutional Networks on large sparse graphs, on CPUs.

The sparse-gcn engine (Rust) from Python: train on NumPy / SciPy arrays, on a dataset folder or
file as ``sparse-gcn --data`` reads it, or on a PyG-shaped ``Data`` object, with the same bits
as ``sparse-gcn train`` given the same options and seed.

    >>> import sparse_gcn
    >>> ds = sparse_gcn.load("datasets/cora")                      # doctest: +SKIP
    >>> clf = sparse_gcn.GCNClassifier(seed=0).fit_dataset(ds)     # doctest: +SKIP
    >>> clf.score(ds.test_mask)                                    # doctest: +SKIP

Arrays are read in place, without a copy, when their dtype and layout allow: a SciPy CSR
adjacency with int32 or int64 indices (or a contiguous int32/int64 edge index), C-ordered
float32 features or a canonical float32 CSR matrix. Other inputs are converted first (a copy,
said in each function's docstring). The engine then builds what it trains on from them: its
own Â, and its own copy of the features (in its node order, row-normalised in place, stored
sparse when they are bag-of-words). Outputs are new NumPy arrays. Training runs with the interpreter released
on the engine's threads; Ctrl-C stops it between epochs with ``KeyboardInterrupt``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import scipy.sparse as sp

from . import _native

__all__ = ["Dataset", "GCNClassifier", "from_pyg", "load", "__version__"]

__version__: str = _native.engine_version()


class Dataset:
    """A node-classification dataset: ``adjacency`` (SciPy CSR, n × n, entries of weight 1),
    ``features`` (NumPy float32 n × d, or SciPy CSR for sparse ones), ``labels`` (int64, −1 for
    an unlabelled node), and the boolean ``train_mask``, ``val_mask`` and ``test_mask``."""

    def __init__(
        self,
        adjacency: sp.csr_matrix,
        features: Any,
        labels: Optional[np.ndarray] = None,
        train_mask: Optional[np.ndarray] = None,
        val_mask: Optional[np.ndarray] = None,
        test_mask: Optional[np.ndarray] = None,
        name: str = "data",
        directed: bool = False,
    ) -> None:
        self.adjacency = adjacency
        self.features = features
        self.labels = labels
        self.train_mask = train_mask
        self.val_mask = val_mask
        self.test_mask = test_mask
        self.name = name
        self.directed = directed

    @property
    def num_nodes(self) -> int:
        """The number of nodes."""
        return int(self.adjacency.shape[0])

    @property
    def num_classes(self) -> int:
        """The largest label + 1 (0 without labels)."""
        if self.labels is None or len(self.labels) == 0:
            return 0
        return int(self.labels.max()) + 1

    def __repr__(self) -> str:
        kind = "sparse" if sp.issparse(self.features) else "dense"
        masks = "/".join(
            str(int(np.count_nonzero(m))) if m is not None else "-"
            for m in (self.train_mask, self.val_mask, self.test_mask)
        )
        return (
            f"Dataset({self.name!r}: {self.num_nodes} nodes, {self.adjacency.nnz} adjacency "
            f"entries, {self.features.shape[1]} {kind} features, {self.num_classes} classes, "
            f"split {masks})"
        )


def _from_native(d: Dict[str, Any]) -> Dataset:
    n = d["n_nodes"]
    indices = d["indices"]
    adjacency = sp.csr_matrix(
        (np.ones(len(indices), dtype=np.float32), indices, d["indptr"]), shape=(n, n)
    )
    f = d["features"]
    if isinstance(f, dict):
        features = sp.csr_matrix((f["data"], f["indices"], f["indptr"]), shape=tuple(f["shape"]))
    else:
        features = f
    return Dataset(
        adjacency,
        features,
        d["labels"],
        d["train"],
        d["valid"],
        d["test"],
        name=d["name"],
        directed=d["directed"],
    )


def load(path: "os.PathLike[str] | str", **options: Any) -> Dataset:
    """Loads a dataset as ``sparse-gcn --data PATH`` does: an OGB raw-layout folder, a
    gnn-benchmark or SciPy ``.npz`` file, or an edge list (``.txt``, ``.csv``, ``.tsv``,
    ``.edges``, ``.el``, optionally gzipped).

    Options (the CLI's data flags): ``directed`` (bool), ``split`` (an OGB split folder),
    ``features`` (a feature file, or ``identity``, ``degree``, ``constant``, ``random:D``),
    ``labels`` (a label file), ``num_nodes``, ``train_per_class``, ``split_sizes`` (three
    fractions), ``data_seed`` (of ``random:D``). Raises ``OSError`` for a missing file,
    ``ValueError`` (the engine's message, naming the file and line) for bad contents,
    ``TypeError`` for an unknown option."""
    return _from_native(_native.load(os.fspath(path), **options))


def _numpy(x: Any) -> Any:
    """A torch tensor (or anything with ``.numpy()``) as a NumPy array, without importing
    torch."""
    if x is None:
        return None
    for step in ("detach", "cpu"):
        f = getattr(x, step, None)
        if callable(f):
            x = f()
    f = getattr(x, "numpy", None)
    if callable(f) and not isinstance(x, np.ndarray):
        x = f()
    return x


def from_pyg(data: Any) -> Dataset:
    """A PyG-shaped object (``edge_index`` of shape (2, E), ``x``, ``y``, ``train_mask``,
    ``val_mask``, ``test_mask``; torch tensors or NumPy arrays) as a :class:`Dataset`, without
    importing torch. The edge index is read as PyG reads it for ``GCNConv`` on an undirected
    graph: both directions, duplicates merged."""
    for attr in ("edge_index", "x"):
        if getattr(data, attr, None) is None:
            raise TypeError(f"data: a PyG-shaped object has '{attr}'")
    x = _numpy(data.x)
    features = x if sp.issparse(x) else np.asarray(x)
    if not sp.issparse(features) and features.ndim != 2:
        raise ValueError(f"data.x: a 2-D array, got shape {features.shape}")
    n = getattr(data, "num_nodes", None)
    n = int(n) if n is not None else int(features.shape[0])
    rows, cols = _edge_index(_numpy(data.edge_index), n, "data.edge_index")
    adjacency = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, n)
    )
    adjacency.sum_duplicates()
    adjacency.data[:] = 1.0
    y = _numpy(getattr(data, "y", None))
    labels = None if y is None else _labels(y, n, "data.y")
    masks = [
        _mask(_numpy(getattr(data, m, None)), n, f"data.{m}")
        for m in ("train_mask", "val_mask", "test_mask")
    ]
    return Dataset(adjacency, features, labels, *masks, name="pyg")


def _edge_index(e: Any, n: int, what: str):
    """The two rows of a (2, E) edge index as contiguous int32 or int64 arrays: views of `e`
    when its rows are contiguous and its dtype one of those, else copies."""
    e = np.asarray(e)
    if e.ndim != 2 or e.shape[0] != 2:
        raise ValueError(f"{what}: an edge index of shape (2, E), got shape {e.shape}")
    if e.dtype.kind not in "iu":
        raise TypeError(f"{what}: integer node ids, got dtype {e.dtype}")
    if e.size and (e.min() < 0 or e.max() >= n):
        raise ValueError(f"{what}: node ids must lie in 0..{n - 1} (got {e.min()}..{e.max()})")
    dtype = e.dtype if e.dtype in (np.int32, np.int64) else np.int64
    return (np.ascontiguousarray(e[0], dtype=dtype), np.ascontiguousarray(e[1], dtype=dtype))


def _labels(y: Any, n: int, what: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{what}: one class id per node (1-D), got shape {y.shape}")
    if len(y) != n:
        raise ValueError(f"{what}: {len(y)} labels for {n} nodes")
    if y.dtype.kind == "f":
        nan = np.isnan(y)
        whole = np.where(nan, 0, y)
        if not np.all(whole == np.round(whole)):
            raise ValueError(f"{what}: class ids must be whole numbers")
        return np.where(nan, -1, whole).astype(np.int64)
    if y.dtype.kind not in "iu":
        raise TypeError(f"{what}: integer class ids (−1: unlabelled), got dtype {y.dtype}")
    return y.astype(np.int64, copy=False)


def _mask(m: Any, n: int, what: str) -> Optional[np.ndarray]:
    """A boolean mask of `n` nodes from a boolean array or an array of node indices."""
    if m is None:
        return None
    m = np.asarray(m)
    if m.ndim != 1:
        raise ValueError(f"{what}: a 1-D boolean mask or index array, got shape {m.shape}")
    if m.dtype == np.bool_:
        if len(m) != n:
            raise ValueError(f"{what}: {len(m)} entries for {n} nodes")
        return m
    if m.dtype.kind in "iu":
        if m.size and (m.min() < 0 or m.max() >= n):
            raise ValueError(f"{what}: node indices must lie in 0..{n - 1}")
        out = np.zeros(n, dtype=bool)
        out[m] = True
        return out
    raise TypeError(f"{what}: a boolean mask or an integer index array, got dtype {m.dtype}")


def _adjacency(adjacency: Any, n: Optional[int]):
    """(n, arrays) of a SciPy sparse matrix (``indptr`` and ``indices`` of its CSR form) or a
    (2, E) edge index (``rows`` and ``cols``), for the engine to read in place.

    No copy is made of a CSR matrix whose ``indptr`` and ``indices`` share the dtype int32 or
    int64 and that stores no explicit zero, nor of an int32 or int64 edge index whose rows are
    contiguous; other formats (COO, CSC, …), dtypes and layouts are converted first (a copy).
    """
    if sp.issparse(adjacency):
        if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
            raise ValueError(f"adjacency: a square matrix, got shape {adjacency.shape}")
        csr = adjacency if adjacency.format == "csr" else adjacency.tocsr()
        data = np.asarray(csr.data)
        if data.size and np.count_nonzero(data) != data.size:
            csr = csr.copy()
            csr.eliminate_zeros()
            data = np.asarray(csr.data)
        if data.size and not (data.min() == 1 and data.max() == 1):
            raise ValueError(
                "adjacency: entries of weight 1 (an unweighted graph); weighted entries are "
                "not supported (the engine builds its own normalisation D^-1/2 (A+I) D^-1/2)"
            )
        indptr, indices = np.asarray(csr.indptr), np.asarray(csr.indices)
        dtype = indptr.dtype
        if dtype != indices.dtype or dtype not in (np.int32, np.int64):
            dtype = np.int64
        return adjacency.shape[0], {
            "indptr": np.ascontiguousarray(indptr, dtype=dtype),
            "indices": np.ascontiguousarray(indices, dtype=dtype),
        }
    if n is None:
        raise TypeError("adjacency: a SciPy sparse matrix or a (2, E) edge index")
    e = _numpy(adjacency)
    if not isinstance(e, np.ndarray) and not isinstance(e, (list, tuple)):
        raise TypeError("adjacency: a SciPy sparse matrix or a (2, E) edge index")
    rows, cols = _edge_index(e, n, "adjacency")
    return n, {"rows": rows, "cols": cols}


def _features(features: Any):
    """The features as the engine reads them: a C-ordered float32 array, or a dict of a
    canonical float32 CSR matrix's arrays. No copy is made of a C-ordered float32 array, nor of
    a float32 CSR matrix in canonical form (sorted indices, no duplicates, no explicit zeros);
    other dtypes, layouts and formats are converted first (a copy). The engine then keeps its
    own copy, in its node order and row-normalised as its options say."""
    if sp.issparse(features):
        if features.ndim != 2:
            raise ValueError(f"features: a 2-D matrix, got shape {features.shape}")
        if features.dtype.kind not in "fiub":
            raise TypeError(f"features: numbers, got dtype {features.dtype}")
        csr = features
        canonical = (
            csr.format == "csr"
            and csr.dtype == np.float32
            and csr.has_canonical_format
            and np.count_nonzero(csr.data) == csr.data.size
        )
        if not canonical:
            csr = sp.csr_matrix(features, dtype=np.float32, copy=True)
            csr.sum_duplicates()
            csr.eliminate_zeros()
        return {
            "indptr": csr.indptr,
            "indices": csr.indices,
            "data": csr.data,
            "shape": csr.shape,
        }
    x = _numpy(features)
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"features: a 2-D array (nodes × features), got shape {x.shape}")
    if x.dtype.kind not in "fiub":
        raise TypeError(f"features: numbers, got dtype {x.dtype}")
    return np.ascontiguousarray(x, dtype=np.float32)


def _graph(
    adjacency: Any,
    features: Any,
    labels: Any = None,
    masks=(None, None, None),
    directed: bool = False,
    name: str = "data",
) -> Dict[str, Any]:
    x = _features(features)
    n_rows = x["shape"][0] if isinstance(x, dict) else x.shape[0]
    n, arrays = _adjacency(adjacency, n_rows)
    if n_rows != n:
        raise ValueError(f"features: {n_rows} rows for {n} nodes (the adjacency's)")
    lab = None if labels is None else _labels(_numpy(labels), n, "labels")
    train, valid, test = (
        _mask(_numpy(m), n, w) for m, w in zip(masks, ("train_mask", "val_mask", "test_mask"))
    )
    return {
        "n_nodes": n,
        **arrays,
        "features": x,
        "labels": lab,
        "train": train,
        "valid": valid,
        "test": test,
        "directed": bool(directed),
        "name": name,
    }


_OPTIONS = (
    "model",
    "recipe",
    "layers",
    "hidden",
    "dropout",
    "lr",
    "weight_decay",
    "epochs",
    "stop",
)


class GCNClassifier:
    """A node classifier trained by the sparse-gcn engine: the CLI's ``train`` with its names
    and defaults.

    Parameters (None: the CLI's default, which may depend on the model and recipe):
    ``model`` ("gcn", "residual", "gcnii", "jk-cat", "jk-max", "jk-att", "sgc", "appnp"; any
    case), ``layers`` [2; gcnii's paper recipe 64], ``hidden`` [16], ``dropout`` [0.5], ``lr``
    [0.01], ``weight_decay`` [5e-4 on the first layer], ``epochs`` [200], ``stop`` ("kipf" for
    Kipf's 2-layer gcn, "patience" for the others; or "never"), ``recipe`` ("default" or
    "paper": the model's published hyperparameters, which explicit options override), ``seed``
    [0], ``threads`` [one per CPU], and ``**model_options``: ``patience``, ``alpha``,
    ``lambda_`` (or ``lambda``), ``k``, ``norm_layer``, ``drop_edge``, ``order``,
    ``optimizer``, ``weight_decay_scope``, ``checkpoint_every``, ``bias``, ``warmup``,
    ``norm`` ("sym", "row"), ``row_norm`` ("auto", "on", "off"), ``reorder``; and the
    mini-batches of ``sparse-gcn train --batch``: ``batch`` ("full", "cluster", "saint-node",
    "saint-edge", "saint-rw", "neighbor"), ``parts``, ``parts_per_batch``, ``clusters``
    ("metis", "community"), ``diag_lambda``, ``batch_size``, ``fanout`` (a list, one a layer),
    ``walk_length``, ``batches_per_epoch``, ``batches_per_step``, ``saint_coverage``, ``eval``
    ("full", "batch").

    An option the model does not use, or a value out of range, raises ``ValueError`` naming it
    (as the CLI's usage errors name the flag); an unknown keyword raises ``TypeError``.
    """

    def __init__(
        self,
        model: str = "gcn",
        layers: Optional[int] = None,
        hidden: Optional[int] = None,
        dropout: Optional[float] = None,
        lr: Optional[float] = None,
        weight_decay: Optional[float] = None,
        epochs: Optional[int] = None,
        stop: Optional[str] = None,
        recipe: str = "default",
        seed: int = 0,
        threads: Optional[int] = None,
        **model_options: Any,
    ) -> None:
        self.model = model
        self.layers = layers
        self.hidden = hidden
        self.dropout = dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.epochs = epochs
        self.stop = stop
        self.recipe = recipe
        self.seed = seed
        self.threads = threads
        self.model_options = dict(model_options)
        if "lambda_" in self.model_options:
            self.model_options["lambda"] = self.model_options.pop("lambda_")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed: a whole number >= 0, got {seed!r}")
        if threads is not None and (
            not isinstance(threads, (int, np.integer)) or isinstance(threads, bool) or threads < 0
        ):
            raise ValueError(f"threads: a whole number >= 0 or None, got {threads!r}")
        _native.check_options(self._options())
        self._fitted = None
        self._checkpoint: Optional[str] = None
        self._labels: Optional[np.ndarray] = None
        self.history_: List[Dict[str, float]] = []

    def _options(self) -> Dict[str, Any]:
        opts = {k: getattr(self, k) for k in _OPTIONS}
        opts.update(self.model_options)
        return opts

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """The constructor's arguments (scikit-learn's protocol)."""
        p = self._options()
        p.update(seed=self.seed, threads=self.threads)
        return p

    def __repr__(self) -> str:
        given = {k: v for k, v in self.get_params().items() if v is not None}
        return "GCNClassifier(" + ", ".join(f"{k}={v!r}" for k, v in given.items()) + ")"

    def fit(
        self,
        adjacency: Any,
        features: Any,
        labels: Any,
        train_mask: Any = None,
        val_mask: Any = None,
        test_mask: Any = None,
        on_epoch: Optional[Callable[[Dict[str, float]], None]] = None,
        directed: bool = False,
    ) -> "GCNClassifier":
        """Trains on the graph (``adjacency``: a SciPy sparse matrix of weight-1 entries, or a
        (2, E) edge index, read in place when CSR or the edge index has int32/int64 indices,
        else converted first, a copy; undirected unless ``directed``), its ``features`` (dense or SciPy
        sparse; read in place when C-ordered float32 or canonical float32 CSR, else converted
        first, a copy) and
        ``labels`` (−1: unlabelled). Masks are boolean or index arrays; ``val_mask`` is needed
        (the stop rule and ``history_`` read validation every epoch); without ``train_mask``
        the labelled nodes outside validation and test train; without ``test_mask`` the
        labelled nodes outside training and validation are tested. ``on_epoch`` receives each
        epoch's dict. Returns self."""
        x = _numpy(features)
        if not hasattr(x, "shape") or len(x.shape) != 2:
            raise ValueError("features: a 2-D array or SciPy sparse matrix (nodes × features)")
        n = int(adjacency.shape[0]) if sp.issparse(adjacency) else int(x.shape[0])
        if x.shape[0] != n:
            raise ValueError(f"features: {x.shape[0]} rows for {n} nodes (the adjacency's)")
        lab = _labels(_numpy(labels), n, "labels")
        train, valid, test = (
            _mask(_numpy(m), n, w)
            for m, w in zip((train_mask, val_mask, test_mask), ("train_mask", "val_mask", "test_mask"))
        )
        if valid is None:
            raise ValueError(
                "val_mask: training evaluates validation nodes every epoch (the stop rule, "
                "history_): give a boolean mask or node indices"
            )
        labelled = lab >= 0
        if train is None:
            if test is None:
                raise ValueError(
                    "train_mask: without train_mask and test_mask no labelled node is left to "
                    "test; give one of them"
                )
            train = labelled & ~valid & ~test
        if test is None:
            test = labelled & ~train & ~valid
        graph = _graph(adjacency, x, lab, (train, valid, test), directed)
        threads = 0 if self.threads is None else int(self.threads)
        self._fitted = _native.fit(graph, self._options(), int(self.seed), threads, on_epoch)
        self._checkpoint = None
        self._labels = lab
        self.history_ = self._fitted.history()
        r = self._fitted.result()
        self.val_acc_ = r["val_acc"]
        self.test_acc_ = r["test_acc"]
        self.best_epoch_ = r["best_epoch"]
        self.result_ = r
        _, n_classes = self._fitted.dims()
        self.classes_ = np.arange(n_classes)
        return self

    def fit_dataset(self, dataset: Dataset, **kwargs: Any) -> "GCNClassifier":
        """:meth:`fit` on a :class:`Dataset` (its adjacency, features, labels and masks)."""
        return self.fit(
            dataset.adjacency,
            dataset.features,
            dataset.labels,
            dataset.train_mask,
            dataset.val_mask,
            dataset.test_mask,
            directed=dataset.directed,
            **kwargs,
        )

    def _data(self, adjacency: Any, features: Any) -> Optional[Dict[str, Any]]:
        if adjacency is None and features is None:
            if self._checkpoint is not None:
                raise ValueError(
                    "adjacency, features: a model loaded from a checkpoint has no data of its "
                    "own; give both"
                )
            if self._fitted is None:
                raise ValueError("adjacency, features: the classifier is not fitted; call fit")
            return None
        if adjacency is None or features is None:
            raise ValueError("adjacency, features: give both (or neither: the fit's data)")
        return _graph(adjacency, features)

    def _model(self, graph: Optional[Dict[str, Any]]):
        if self._fitted is None and self._checkpoint is not None and graph is not None:
            self._fitted = _native.load_checkpoint(self._checkpoint, graph)
        if self._fitted is None:
            raise ValueError("the classifier is not fitted; call fit or GCNClassifier.load")
        return self._fitted

    def _threads(self) -> int:
        return 0 if self.threads is None else int(self.threads)

    def decision_function(self, adjacency: Any = None, features: Any = None) -> np.ndarray:
        """The logits (nodes × classes, float32) of every node, in the input's node order."""
        graph = self._data(adjacency, features)
        return self._model(graph).logits(graph, self._threads())

    def predict(self, adjacency: Any = None, features: Any = None) -> np.ndarray:
        """The predicted class of every node (the first largest logit), of the fit's data when
        both arguments are omitted."""
        return np.argmax(self.decision_function(adjacency, features), axis=1)

    def predict_proba(self, adjacency: Any = None, features: Any = None) -> np.ndarray:
        """Class probabilities (a softmax in float64, as ``sparse-gcn predict`` writes them)."""
        graph = self._data(adjacency, features)
        return self._model(graph).logits(graph, self._threads(), True)

    def score(self, mask: Any, labels: Any = None) -> float:
        """Accuracy over the nodes of ``mask`` (boolean or indices) of the fit's data, against
        the fit's labels (or ``labels``): the CLI's accuracy, bit for bit."""
        if self._fitted is None or (self._labels is None and labels is None):
            raise ValueError("mask: score needs a fitted classifier (or labels)")
        if labels is None:
            lab = self._labels
        else:
            lab = _labels(_numpy(labels), len(self.predict()), "labels")
        m = _mask(_numpy(mask), len(lab), "mask")
        if m is None or not np.any(m):
            raise ValueError("mask: no node selected")
        pred = self.predict()
        return float(np.count_nonzero(pred[m] == lab[m])) / float(np.count_nonzero(m))

    def embed(self, layer: int, adjacency: Any = None, features: Any = None) -> np.ndarray:
        """Layer ``layer``'s output (counted from 1, as ``sparse-gcn embed --layer``)."""
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise TypeError(f"layer: a whole number, got {layer!r}")
        graph = self._data(adjacency, features)
        return self._model(graph).embed(int(layer), graph, self._threads())

    def save(self, path: "os.PathLike[str] | str") -> None:
        """Saves the model in the CLI's checkpoint format (``sparse-gcn eval --checkpoint``
        reads it); an existing regular file is replaced only by a complete new one."""
        if self._fitted is None:
            raise ValueError("the classifier is not fitted; nothing to save")
        self._fitted.save(os.fspath(path))

    @classmethod
    def load(cls, path: "os.PathLike[str] | str", threads: Optional[int] = None) -> "GCNClassifier":
        """A classifier from a checkpoint (``train --save`` or :meth:`save`): its
        :meth:`predict`, :meth:`predict_proba` and :meth:`embed` then take the data."""
        path = os.fspath(path)
        info = _native.checkpoint_info(path)
        clf = cls.__new__(cls)
        GCNClassifier.__init__(clf, threads=threads)
        clf.checkpoint_info_ = info
        clf._checkpoint = path
        return clf
