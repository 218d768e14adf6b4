//! `sparse_gcn._native`: the engine's entry points for the Python package (`sparse_gcn`, whose
//! `__init__.py` is the API users call). Arrays come in as NumPy arrays and go out as new ones;
//! training runs with the interpreter released; every engine error becomes a Python exception
//! carrying the engine's message ([`py_err`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyOSError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use sparse_gcn::data::content::ContentHash;
use sparse_gcn::data::io::{load as load_any, LoadOptions, RandomSplit, SplitRule};
use sparse_gcn::data::node_features::NodeFeatures;
use sparse_gcn::data::{Dataset, Features, SparseFeatures, Split, UNLABELLED};
use sparse_gcn::graph::Direction;
use sparse_gcn::kernels::Csr;
use sparse_gcn::metrics::softmax_rows;
use sparse_gcn::nn::Model;
use sparse_gcn::train::checkpoint::{self, Checkpoint};
use sparse_gcn::train::options::{TrainOptions, MAX_THREADS};
use sparse_gcn::train::run::{check_inference_fits, Prepare, Prepared, Watch};
use sparse_gcn::train::{EpochHook, EpochRecord, RunResult};
use sparse_gcn::{Error, Par};

mod convert;
mod options;

use convert::{graph_of, ids, labels_of, mask_of};
use options::options_of;

/// The Python exception for an engine error: `OSError` for files, `MemoryError` for a size that
/// does not fit, `KeyboardInterrupt` for an interrupted run, `ValueError` for data and options
/// the engine refuses, `RuntimeError` otherwise.
fn py_err(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Io { .. } | Error::NotRegularFile { .. } | Error::DiskSpace { .. } => {
            PyOSError::new_err(msg)
        }
        Error::TooLarge { .. } => PyMemoryError::new_err(msg),
        Error::Interrupted { .. } => PyKeyboardInterrupt::new_err(msg),
        Error::ThreadPool(_) | Error::Distributed(_) | Error::Environment { .. } => {
            PyRuntimeError::new_err(msg)
        }
        _ => PyValueError::new_err(msg),
    }
}

/// A `ValueError` naming the argument.
fn value_err(arg: &str, why: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{arg}: {why}"))
}

/// A rayon pool of `threads` workers (0: one per CPU).
fn pool(threads: usize) -> PyResult<rayon::ThreadPool> {
    if threads > MAX_THREADS {
        return Err(value_err(
            "threads",
            format!("{threads} must be at most {MAX_THREADS} (0 or None: one per CPU)"),
        ));
    }
    sparse_gcn::par::thread_pool(threads).map_err(py_err)
}

/// The dataset a dict of arrays describes (`sparse_gcn._graph` builds it): `n_nodes`, the
/// adjacency as `indptr` and `indices` (CSR) or `rows` and `cols` (an edge index), read in
/// place ([`graph_of`]), `features` (a 2-D float32 array, or a dict of
/// CSR `indptr`, `indices`, `data` and `shape`), `labels` (int64, −1 unlabelled, or None),
/// `train`, `valid`, `test` (bool arrays or None), `directed`, `name`.
fn dataset_of(g: &Bound<'_, PyDict>) -> PyResult<Dataset> {
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        g.get_item(key)?
            .ok_or_else(|| PyTypeError::new_err(format!("graph description without '{key}'")))
    };
    let n: usize = item("n_nodes")?.extract()?;
    let directed: bool = item("directed")?.extract()?;
    let dir = if directed {
        Direction::Directed
    } else {
        Direction::Undirected
    };
    let graph = graph_of(g, n, dir)?;
    let features = features_of(&item("features")?, n)?;
    let (labels, n_classes) = labels_of(&item("labels")?, n)?;
    let split = Split {
        name: "masks".into(),
        train: mask_of(&item("train")?, "train_mask", n)?,
        valid: mask_of(&item("valid")?, "val_mask", n)?,
        test: mask_of(&item("test")?, "test_mask", n)?,
    };
    let name: String = item("name")?.extract()?;
    Dataset::try_new(name, graph, features, labels, n_classes, split).map_err(py_err)
}

/// The features of `n` nodes: a dense float32 array (stored sparse below the density the
/// loaders use, as the CLI stores Cora's), or a dict of a CSR matrix's arrays.
fn features_of(x: &Bound<'_, PyAny>, n: usize) -> PyResult<Features<f32>> {
    let features = if let Ok(d) = x.cast::<PyDict>() {
        let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            d.get_item(key)?
                .ok_or_else(|| PyTypeError::new_err(format!("sparse features without '{key}'")))
        };
        let (rows, cols): (usize, usize) = get("shape")?.extract()?;
        let indptr = ids(&get("indptr")?, "features (indptr)", usize::MAX)?;
        let indices = ids(&get("indices")?, "features (indices)", cols)?;
        let data: PyReadonlyArray1<'_, f32> = get("data")?
            .extract()
            .map_err(|_| PyTypeError::new_err("features: sparse values must be float32"))?;
        let data = data.as_slice()?.to_vec();
        let indptr: Vec<usize> = indptr.into_iter().map(|v| v as usize).collect();
        let csr = Csr::try_new((rows, cols), indptr, indices, data).map_err(|(_, _, _, e)| {
            value_err("features", format!("not a valid CSR matrix: {e}"))
        })?;
        Features::sparse(SparseFeatures::new(csr))
    } else {
        let a: PyReadonlyArray2<'_, f32> = x.extract().map_err(|_| {
            PyTypeError::new_err("features: a 2-D float32 array or a SciPy sparse matrix")
        })?;
        Features::dense(a.as_array().to_owned())
            .into_sparse_if(sparse_gcn::data::io::SPARSE_FEATURES_BELOW)
    };
    if features.n_rows() != n {
        return Err(value_err(
            "features",
            format!("{} rows for {n} nodes", features.n_rows()),
        ));
    }
    Ok(features)
}

/// The arrays of a dataset, for `sparse_gcn.Dataset`: the adjacency's CSR (`indptr`,
/// `indices`), the features (dense, or a CSR dict), labels (int64, −1 unlabelled), the three
/// masks, `name`, `n_classes`, `directed`.
fn dataset_dict<'py>(py: Python<'py>, d: &Dataset) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let g = &d.graph;
    let indptr: Vec<i64> = g.indptr().iter().map(|&v| v as i64).collect();
    let indices: Vec<i32> = g.indices().iter().map(|&v| v as i32).collect();
    out.set_item("n_nodes", g.n_nodes())?;
    out.set_item("indptr", indptr.into_pyarray(py))?;
    out.set_item("indices", indices.into_pyarray(py))?;
    out.set_item("directed", g.is_directed())?;
    match d.features.get() {
        sparse_gcn::data::FeaturesRef::Dense(a) => {
            out.set_item("features", a.clone().into_pyarray(py))?;
        }
        sparse_gcn::data::FeaturesRef::Sparse(s) => {
            let x = s.x();
            let f = PyDict::new(py);
            let ip: Vec<i64> = x.indptr().raw_storage().iter().map(|&v| v as i64).collect();
            let ix: Vec<i32> = x.indices().iter().map(|&v| v as i32).collect();
            f.set_item("indptr", ip.into_pyarray(py))?;
            f.set_item("indices", ix.into_pyarray(py))?;
            f.set_item("data", x.data().to_vec().into_pyarray(py))?;
            f.set_item("shape", x.shape())?;
            out.set_item("features", f)?;
        }
    }
    let labels: Vec<i64> = d
        .labels
        .iter()
        .map(|&l| if l == UNLABELLED { -1 } else { i64::from(l) })
        .collect();
    out.set_item("labels", labels.into_pyarray(py))?;
    for (key, m) in [
        ("train", &d.split.train),
        ("valid", &d.split.valid),
        ("test", &d.split.test),
    ] {
        out.set_item(key, m.to_bool().into_pyarray(py))?;
    }
    out.set_item("name", &d.name)?;
    out.set_item("split", &d.split.name)?;
    out.set_item("n_classes", d.n_classes)?;
    Ok(out)
}

/// Loads a dataset as `sparse-gcn --data PATH` does, with the data options of the CLI.
#[pyfunction]
#[pyo3(signature = (path, directed=false, split=None, features=None, labels=None, num_nodes=None,
    train_per_class=None, split_sizes=None, data_seed=0))]
#[allow(clippy::too_many_arguments)]
fn load<'py>(
    py: Python<'py>,
    path: PathBuf,
    directed: bool,
    split: Option<String>,
    features: Option<String>,
    labels: Option<PathBuf>,
    num_nodes: Option<usize>,
    train_per_class: Option<usize>,
    split_sizes: Option<(f64, f64, f64)>,
    data_seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let mut random_split = RandomSplit::default();
    if let Some(k) = train_per_class {
        if k == 0 {
            return Err(value_err("train_per_class", "must be at least 1"));
        }
        if let SplitRule::PerClass {
            ref mut train_per_class,
            ..
        } = random_split.rule
        {
            *train_per_class = k;
        }
    }
    if let Some((train, valid, test)) = split_sizes {
        let each = [train, valid, test];
        if each.iter().any(|f| !(0.0..=1.0).contains(f)) || each.iter().sum::<f64>() > 1.0 + 1e-9 {
            return Err(value_err(
                "split_sizes",
                "three fractions in [0, 1] adding up to at most 1",
            ));
        }
        random_split.rule = SplitRule::Fractions { train, valid, test };
    }
    // `features` is a built kind (identity, degree, constant, random:D) or a file.
    let built: Option<NodeFeatures> = features.as_deref().and_then(|s| s.parse().ok());
    if let (None, Some(s)) = (&built, &features) {
        if s.starts_with("random:") {
            let e = s.parse::<NodeFeatures>().err().map(|e| e.to_string());
            return Err(value_err("features", e.unwrap_or_default()));
        }
    }
    let opts = LoadOptions {
        split,
        direction: if directed {
            Direction::Directed
        } else {
            Direction::Undirected
        },
        features: features.filter(|_| built.is_none()).map(PathBuf::from),
        labels,
        n_nodes: num_nodes,
        random_split,
        ..LoadOptions::default()
    };
    let d = py
        .detach(|| {
            let mut d = load_any(&path, &opts)?;
            if let Some(k) = built {
                d.features = k.build(&d.graph, data_seed)?;
            }
            Ok::<_, Error>(d)
        })
        .map_err(py_err)?;
    dataset_dict(py, &d)
}

/// A trained model, with the data of its fit (prepared as training prepared it) when it was
/// trained here rather than loaded from a checkpoint.
#[pyclass(module = "sparse_gcn._native")]
struct Fitted {
    model: Mutex<Model<f32>>,
    /// How data is prepared for this model (node order, feature and Â normalisation).
    prepare: Prepare,
    /// The fit's data, its run, and the content hash of the data as given.
    fit: Option<FitData>,
    /// The checkpoint's metadata, when loaded from one.
    extra: BTreeMap<String, String>,
}

struct FitData {
    prepared: Prepared,
    run: RunResult,
    content: ContentHash,
    options: TrainOptions,
}

/// Checks training options without data (the estimator's constructor arguments).
#[pyfunction]
fn check_options(options: &Bound<'_, PyDict>) -> PyResult<()> {
    options_of(options).map(|_| ())
}

/// One epoch's record as a dict (epochs counted from 1, as the CLI's history).
fn epoch_dict<'py>(py: Python<'py>, r: &EpochRecord) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("epoch", r.epoch + 1)?;
    d.set_item("train_loss", r.train_loss)?;
    d.set_item("train_acc", r.train_acc)?;
    d.set_item("val_loss", r.val_loss)?;
    d.set_item("val_acc", r.val_acc)?;
    d.set_item("train_ms", r.train_ms)?;
    d.set_item("epoch_ms", r.epoch_ms)?;
    Ok(d)
}

/// Trains one model on `graph` with `options` and `seed`, as `sparse-gcn train --seed SEED`
/// with the same options: the same history and accuracies, bit for bit. `on_epoch` (when not
/// None) is called with each epoch's dict; Ctrl-C stops between epochs with
/// `KeyboardInterrupt`.
#[pyfunction]
#[pyo3(signature = (graph, options, seed=0, threads=0, on_epoch=None))]
fn fit(
    py: Python<'_>,
    graph: &Bound<'_, PyDict>,
    options: &Bound<'_, PyDict>,
    seed: u64,
    threads: usize,
    on_epoch: Option<Py<PyAny>>,
) -> PyResult<Fitted> {
    let opts = options_of(options)?;
    if seed > sparse_gcn::train::options::MAX_SEED {
        return Err(value_err(
            "seed",
            format!(
                "{seed} must be at most {} (as the CLI's --seed)",
                sparse_gcn::train::options::MAX_SEED
            ),
        ));
    }
    let pool = pool(threads)?;
    let data = dataset_of(graph)?;
    let cfg = opts.config();
    let prepare = opts.prepare(&cfg);
    let stop = AtomicBool::new(false);
    let failed: Mutex<Option<PyErr>> = Mutex::new(None);
    let hook = |_seed: u64, r: &EpochRecord| {
        let Some(cb) = &on_epoch else { return };
        Python::attach(|py| {
            let res = epoch_dict(py, r).and_then(|d| cb.call1(py, (d,)).map(|_| ()));
            if let Err(e) = res {
                if let Ok(mut slot) = failed.lock() {
                    slot.get_or_insert(e);
                }
                stop.store(true, Ordering::Relaxed);
            }
        });
    };
    let train = || {
        pool.install(|| {
            data.check_trainable()?;
            let content = ContentHash::of(&data);
            let prepared = Prepared::new(data, &prepare)?;
            let watch = Watch {
                on_epoch: Some(EpochHook(&hook)),
                interrupt: Some(&stop),
                ..Watch::default()
            };
            let (run, model) = prepared.fit_watched(&cfg, seed, watch)?;
            Ok::<_, Error>((prepared, run, model, content))
        })
    };
    let result = run_interruptible(py, &stop, train)?;
    if let Some(e) = failed.lock().ok().and_then(|mut s| s.take()) {
        return Err(e);
    }
    let (prepared, run, model, content) = result.map_err(py_err)?;
    Ok(Fitted {
        model: Mutex::new(model),
        prepare: prepared.prepare,
        extra: BTreeMap::new(),
        fit: Some(FitData {
            prepared,
            run,
            content,
            options: opts,
        }),
    })
}

/// Runs `work` on another thread with the interpreter released, checking for signals (Ctrl-C)
/// every 20 ms on this one: on a signal, `stop` is set (the run ends after its epoch) and the
/// signal's exception is raised once the work has ended.
fn run_interruptible<T: Send>(
    py: Python<'_>,
    stop: &AtomicBool,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    std::thread::scope(|s| {
        let handle = s.spawn(work);
        let mut signal = None;
        while !handle.is_finished() {
            py.detach(|| std::thread::sleep(Duration::from_millis(20)));
            if let Err(e) = py.check_signals() {
                stop.store(true, Ordering::Relaxed);
                signal.get_or_insert(e);
            }
        }
        let out = py
            .detach(|| handle.join())
            .map_err(|_| PyRuntimeError::new_err("the training thread panicked"))?;
        match signal {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

#[pymethods]
impl Fitted {
    /// One dict per epoch of the fit (`epoch` counted from 1).
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        if let Some(f) = &self.fit {
            for r in &f.run.history {
                list.append(epoch_dict(py, r)?)?;
            }
        }
        Ok(list)
    }

    /// The fit's result: `val_acc`, `test_acc`, `test_loss`, `best_epoch` (counted from 1),
    /// `epochs` run, `seed`, and the configuration in force (`settings`).
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(f) = &self.fit else { return Ok(None) };
        let d = PyDict::new(py);
        let r = &f.run;
        d.set_item("val_acc", r.val_acc)?;
        d.set_item("test_acc", r.test_acc)?;
        d.set_item("test_loss", r.test_loss)?;
        d.set_item("best_epoch", r.best_epoch + 1)?;
        d.set_item("epochs", r.history.len())?;
        d.set_item("seed", r.seed)?;
        d.set_item("reorder", f.prepared.prepare.reorder.to_string())?;
        d.set_item("row_normalized", f.prepared.row_normalized)?;
        d.set_item("settings", format!("{:?}", f.options.config()))?;
        Ok(Some(d))
    }

    /// Input width and classes of the model.
    fn dims(&self) -> PyResult<(usize, usize)> {
        let model = self.lock()?;
        let c = model
            .config()
            .ok_or_else(|| PyRuntimeError::new_err("a model without a configuration"))?;
        Ok((c.in_dim, c.out_dim))
    }

    /// The logits of every node (in the input's order), or with `proba` its class
    /// probabilities (a softmax in f64, as `sparse-gcn predict` writes them): of the fit's data
    /// when `graph` is None, else of the graph given (prepared as training prepared its data).
    #[pyo3(signature = (graph=None, threads=0, proba=false))]
    fn logits<'py>(
        &self,
        py: Python<'py>,
        graph: Option<&Bound<'py, PyDict>>,
        threads: usize,
        proba: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let out = self.on_data(py, graph, threads, &|model, p| {
            let z = model.predict(&p.adj, &p.data.features, Par::Rayon)?;
            let z = p.input_order(z.view());
            Ok(if proba { softmax_rows(z.view()) } else { z })
        })?;
        Ok(out.into_pyarray(py))
    }

    /// Layer `layer`'s output (counted from 1, as `sparse-gcn embed --layer`), in the input's
    /// node order.
    #[pyo3(signature = (layer, graph=None, threads=0))]
    fn embed<'py>(
        &self,
        py: Python<'py>,
        layer: usize,
        graph: Option<&Bound<'py, PyDict>>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let n_layers = self.lock()?.n_representations();
        if layer == 0 || layer > n_layers {
            return Err(value_err(
                "layer",
                format!("{layer}: the model has {n_layers} layer outputs (1 to {n_layers})"),
            ));
        }
        let out = self.on_data(py, graph, threads, &|model, p| {
            let mut h = None;
            model.visit_representations(&p.adj, &p.data.features, Par::Rayon, &mut |l, x| {
                if l + 1 == layer {
                    h = Some(p.input_order(x));
                }
            })?;
            Ok(h.unwrap_or_default())
        })?;
        Ok(out.into_pyarray(py))
    }

    /// Saves the model in the CLI's checkpoint format (safetensors; `sparse-gcn eval`,
    /// `predict` and `embed` read it), written atomically: an existing regular file is replaced
    /// only by a complete new one.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let mut extra = self.extra.clone();
        if let Some(f) = &self.fit {
            extra.extend(f.prepared.extra());
            f.content.record(&mut extra);
            extra.insert("seed".into(), f.run.seed.to_string());
            extra.insert("test_acc".into(), f.run.test_acc.to_string());
        }
        let mut guard = self.lock()?;
        let model: &mut Model<f32> = &mut guard;
        py.detach(|| checkpoint::save(&path, model, &extra))
            .map_err(py_err)
    }
}

/// What [`Fitted::on_data`] runs: the model on prepared data, giving an output per node.
type OnData<'a> = dyn Fn(&mut Model<f32>, &Prepared) -> sparse_gcn::Result<Array2<f32>> + Sync + 'a;

impl Fitted {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Model<f32>>> {
        self.model
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the model's lock is poisoned"))
    }

    /// Runs `f` on the model and the fit's prepared data (`graph` None) or `graph` prepared
    /// as training prepared its data, with the interpreter released.
    fn on_data(
        &self,
        py: Python<'_>,
        graph: Option<&Bound<'_, PyDict>>,
        threads: usize,
        f: &OnData<'_>,
    ) -> PyResult<Array2<f32>> {
        let pool = pool(threads)?;
        let data = graph.map(dataset_of).transpose()?;
        let (in_dim, _) = self.dims()?;
        if let Some(d) = &data {
            if d.features.n_cols() != in_dim {
                return Err(value_err(
                    "features",
                    format!("{} columns; the model takes {in_dim}", d.features.n_cols()),
                ));
            }
        }
        let mut guard = self.lock()?;
        let model: &mut Model<f32> = &mut guard;
        let prepare = Prepare {
            keep_graph: false,
            whole_adj: true,
            ..self.prepare
        };
        let fit = self.fit.as_ref().map(|f| &f.prepared);
        py.detach(|| {
            pool.install(|| {
                let fresh;
                let p = match (data, fit) {
                    (Some(d), _) => {
                        fresh = Prepared::new(d, &prepare)?;
                        &fresh
                    }
                    (None, Some(p)) => p,
                    (None, None) => {
                        return Err(Error::Config(sparse_gcn::ConfigError::OutOfRange {
                            name: "adjacency",
                            value: 0.0,
                            rule: "given: a model loaded from a checkpoint has no data of its \
                                   own",
                        }))
                    }
                };
                check_inference_fits(model, p.n_nodes, &p.data.features)?;
                let out = f(model, p)?;
                if let Some(v) = out.iter().find(|v| !v.is_finite()) {
                    return Err(Error::NonFiniteOutput {
                        what: format!("the model's output on {}", p.data.name),
                        value: f64::from(*v),
                    });
                }
                Ok(out)
            })
        })
        .map_err(py_err)
    }
}

/// A model saved by `sparse-gcn train --save` or `GCNClassifier.save`, ready to predict on the
/// data given (prepared as its training prepared its data).
#[pyfunction]
fn load_checkpoint(py: Python<'_>, path: PathBuf, graph: &Bound<'_, PyDict>) -> PyResult<Fitted> {
    let data = dataset_of(graph)?;
    let (ck, model, prepare) = py
        .detach(|| {
            let ck: Checkpoint = checkpoint::load(&path)?;
            let prepare = Prepare::from_extra(&ck.extra)?;
            // The model's shapes need Â and X: built on the data given.
            let p = Prepared::new(data, &prepare)?;
            let mut model = ck.build(&p.adj, &p.data.features)?;
            let mut o = model.options();
            o.separate_eval = true;
            model.set_options(o);
            Ok::<_, Error>((ck, model, prepare))
        })
        .map_err(py_err)?;
    Ok(Fitted {
        model: Mutex::new(model),
        prepare,
        fit: None,
        extra: ck.extra,
    })
}

/// A checkpoint's metadata (the file checked: a typed error for anything else than a
/// checkpoint).
#[pyfunction]
fn checkpoint_info(py: Python<'_>, path: PathBuf) -> PyResult<BTreeMap<String, String>> {
    let ck = py.detach(|| checkpoint::load(&path)).map_err(py_err)?;
    let mut info = ck.extra.clone();
    info.insert("model".into(), ck.model_name());
    Ok(info)
}

/// The engine's version.
#[pyfunction]
fn engine_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_function(wrap_pyfunction!(check_options, m)?)?;
    m.add_function(wrap_pyfunction!(load_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(engine_version, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint_info, m)?)?;
    m.add_class::<Fitted>()?;
    Ok(())
}
