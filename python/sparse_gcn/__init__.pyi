"""Type stubs of the sparse_gcn API (the docstrings are in __init__.py)."""

import os
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

__version__: str

_Path = Union[str, "os.PathLike[str]"]
_Features = Union[npt.ArrayLike, sp.spmatrix, sp.sparray]
_Adjacency = Union[sp.spmatrix, sp.sparray, npt.ArrayLike]
_Mask = Optional[npt.ArrayLike]
_Epoch = Dict[str, float]

class Dataset:
    adjacency: sp.csr_matrix
    features: Union[np.ndarray, sp.csr_matrix]
    labels: Optional[np.ndarray]
    train_mask: Optional[np.ndarray]
    val_mask: Optional[np.ndarray]
    test_mask: Optional[np.ndarray]
    name: str
    directed: bool
    def __init__(
        self,
        adjacency: sp.csr_matrix,
        features: _Features,
        labels: Optional[np.ndarray] = ...,
        train_mask: Optional[np.ndarray] = ...,
        val_mask: Optional[np.ndarray] = ...,
        test_mask: Optional[np.ndarray] = ...,
        name: str = ...,
        directed: bool = ...,
    ) -> None: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_classes(self) -> int: ...

def load(
    path: _Path,
    *,
    directed: bool = ...,
    split: Optional[str] = ...,
    features: Optional[str] = ...,
    labels: Optional[_Path] = ...,
    num_nodes: Optional[int] = ...,
    train_per_class: Optional[int] = ...,
    split_sizes: Optional[tuple[float, float, float]] = ...,
    data_seed: int = ...,
) -> Dataset: ...
def from_pyg(data: Any) -> Dataset: ...

class GCNClassifier:
    model: str
    layers: Optional[int]
    hidden: Optional[int]
    dropout: Optional[float]
    lr: Optional[float]
    weight_decay: Optional[float]
    epochs: Optional[int]
    stop: Optional[str]
    recipe: str
    seed: int
    threads: Optional[int]
    model_options: Dict[str, Any]
    history_: List[_Epoch]
    val_acc_: float
    test_acc_: float
    best_epoch_: int
    result_: Dict[str, Any]
    classes_: np.ndarray
    checkpoint_info_: Dict[str, str]
    def __init__(
        self,
        model: str = ...,
        layers: Optional[int] = ...,
        hidden: Optional[int] = ...,
        dropout: Optional[float] = ...,
        lr: Optional[float] = ...,
        weight_decay: Optional[float] = ...,
        epochs: Optional[int] = ...,
        stop: Optional[str] = ...,
        recipe: str = ...,
        seed: int = ...,
        threads: Optional[int] = ...,
        **model_options: Any,
    ) -> None: ...
    def get_params(self, deep: bool = ...) -> Dict[str, Any]: ...
    def fit(
        self,
        adjacency: _Adjacency,
        features: _Features,
        labels: npt.ArrayLike,
        train_mask: _Mask = ...,
        val_mask: _Mask = ...,
        test_mask: _Mask = ...,
        on_epoch: Optional[Callable[[_Epoch], None]] = ...,
        directed: bool = ...,
    ) -> "GCNClassifier": ...
    def fit_dataset(self, dataset: Dataset, **kwargs: Any) -> "GCNClassifier": ...
    def decision_function(
        self, adjacency: Optional[_Adjacency] = ..., features: Optional[_Features] = ...
    ) -> np.ndarray: ...
    def predict(
        self, adjacency: Optional[_Adjacency] = ..., features: Optional[_Features] = ...
    ) -> np.ndarray: ...
    def predict_proba(
        self, adjacency: Optional[_Adjacency] = ..., features: Optional[_Features] = ...
    ) -> np.ndarray: ...
    def score(self, mask: npt.ArrayLike, labels: Optional[npt.ArrayLike] = ...) -> float: ...
    def embed(
        self,
        layer: int,
        adjacency: Optional[_Adjacency] = ...,
        features: Optional[_Features] = ...,
    ) -> np.ndarray: ...
    def save(self, path: _Path) -> None: ...
    @classmethod
    def load(cls, path: _Path, threads: Optional[int] = ...) -> "GCNClassifier": ...
