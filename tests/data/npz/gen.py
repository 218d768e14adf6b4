"""Writes the numpy/scipy reference fixtures of this folder (run once; outputs are committed).

    python3 gen.py      # numpy >= 1.20, scipy >= 1.8

The graph: 6 nodes, edges 0-1, 1-2, 2-0, 3-4 (node 5 isolated), 3 classes. The Rust tests
(tests/ogb_loader.rs, `real_numpy_*`) check every loader against these values.
"""
import numpy as np
import scipy.sparse as sp

n = 6
edges = [(0, 1), (1, 2), (2, 0), (3, 4)]
rows = [u for u, v in edges] + [v for u, v in edges]
cols = [v for u, v in edges] + [u for u, v in edges]
A = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n))
X = np.array([[1, 0, 0], [0, 1.5, 0], [0, 0, 1], [2.5, 0, 0], [0, -1, 0], [0, 0, 0]], np.float32)
Xs = sp.csr_matrix(X)
y = np.array([0, 1, 2, 1, 0, 2], np.int64)

# gnn-benchmark layout, compressed, with pickled extras the loader must ignore
np.savez_compressed(
    "tiny_benchmark.npz",
    adj_data=A.data, adj_indices=A.indices, adj_indptr=A.indptr, adj_shape=np.array(A.shape),
    attr_data=Xs.data, attr_indices=Xs.indices, attr_indptr=Xs.indptr,
    attr_shape=np.array(Xs.shape),
    labels=y,
    node_names=np.array(["a", "b", "c", "d", "e", "f"], dtype=object),
    class_names=np.array(["x", "y", "z"], dtype=object),
    idx_to_node=np.array({0: 0}, dtype=object),
)

# gnn-benchmark layout, stored (np.savez), one direction per edge with unsorted indices,
# dense Fortran-order float64 features, big-endian labels
# (row 0 -> 2, 1 unsorted; row 1 -> 2; row 3 -> 4)
np.savez(
    "tiny_benchmark_dense.npz",
    adj_data=np.array([1, 1, 1, 1], np.float64),
    adj_indices=np.array([2, 1, 2, 4], np.int64),
    adj_indptr=np.array([0, 2, 3, 3, 4, 4, 4], np.int64),
    adj_shape=np.array([n, n], np.int64),
    attr_matrix=np.asfortranarray(X.astype(np.float64)),
    labels=y.astype(">i4"),
)

# scipy.sparse.save_npz: adjacency in CSR with unsorted indices and a duplicate entry
A2 = sp.csr_matrix(
    (np.array([1, 1, 1, 1, 1, 1, 1, 1, 1], np.float32),
     np.array([2, 1, 0, 2, 0, 1, 4, 3, 3], np.int32),
     np.array([0, 2, 4, 6, 7, 9, 9], np.int32)),
    shape=(n, n))
sp.save_npz("scipy_adj_csr.npz", A2)                      # compressed (the default)
sp.save_npz("scipy_adj_coo.npz", sp.coo_array(A), compressed=False)
sp.save_npz("scipy_feat_csc.npz", sp.csc_array(X))
np.save("labels.npy", y)
np.save("feat_dense.npy", X)
