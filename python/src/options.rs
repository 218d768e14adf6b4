//! Training options from a keyword dict: the CLI's names in snake case, each value checked
//! (a `TypeError` for an unknown key or a value of the wrong type, a `ValueError` naming the
//! option otherwise), then the library's checks of options together.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use sparse_gcn::nn::{Arch, NormKind, Order};
use sparse_gcn::order::Reorder;
use sparse_gcn::sample::Clusters;
use sparse_gcn::train::options::{
    BatchKind, DecayScope, EvalKind, Names, Recipe, StopKind, TrainOptions,
};
use sparse_gcn::train::run::RowNorm;
use sparse_gcn::train::OptimizerKind;

use crate::value_err;

/// The training options of a keyword dict (the CLI's names, in snake case): a `TypeError` for
/// an unknown key, a `ValueError` naming the option for a bad value.
pub(crate) fn options_of(d: &Bound<'_, PyDict>) -> PyResult<TrainOptions> {
    let mut o = TrainOptions::default();
    for (k, v) in d.iter() {
        let key: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        let name = |v: &Bound<'_, PyAny>| -> PyResult<String> {
            v.extract::<String>()
                .map_err(|_| PyTypeError::new_err(format!("{key}: a name (str)")))
        };
        let named = |v: &Bound<'_, PyAny>, all: &[&str]| -> PyResult<usize> {
            let s = name(v)?;
            all.iter()
                .position(|a| a.eq_ignore_ascii_case(&s))
                .ok_or_else(|| value_err(&key, format!("'{s}' is not one of {}", all.join(", "))))
        };
        let count = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
            if v.is_instance_of::<pyo3::types::PyBool>() {
                return Err(PyTypeError::new_err(format!(
                    "{key}: a whole number, not a bool"
                )));
            }
            v.extract::<i64>()
                .map_err(|_| PyTypeError::new_err(format!("{key}: a whole number")))
                .and_then(|i| {
                    usize::try_from(i).map_err(|_| value_err(&key, format!("{i} is negative")))
                })
        };
        let real = |v: &Bound<'_, PyAny>| -> PyResult<f64> {
            if v.is_instance_of::<pyo3::types::PyBool>() {
                return Err(PyTypeError::new_err(format!("{key}: a number, not a bool")));
            }
            v.extract::<f64>()
                .map_err(|_| PyTypeError::new_err(format!("{key}: a number")))
        };
        match key.as_str() {
            "model" => {
                let s = name(&v)?;
                o.model = Arch::named(&s).ok_or_else(|| {
                    value_err(
                        "model",
                        format!("'{s}' is not one of {}", Arch::names().join(", ")),
                    )
                })?;
            }
            "recipe" => {
                o.recipe = [Recipe::Default, Recipe::Paper][named(&v, &["default", "paper"])?]
            }
            "layers" => o.layers = Some(count(&v)?),
            "hidden" => o.hidden = Some(count(&v)?),
            "dropout" => o.dropout = Some(real(&v)?),
            "lr" => o.lr = Some(real(&v)?),
            "weight_decay" => o.weight_decay = Some(real(&v)?),
            "weight_decay_scope" => {
                o.weight_decay_scope =
                    Some([DecayScope::First, DecayScope::All][named(&v, &["first", "all"])?])
            }
            "epochs" => o.epochs = Some(count(&v)?),
            "stop" => {
                let all = [StopKind::Kipf, StopKind::Patience, StopKind::Never];
                o.stop = Some(all[named(&v, &["kipf", "patience", "never"])?]);
            }
            "patience" => o.patience = Some(count(&v)?),
            "order" => {
                let all = [
                    Order::Auto,
                    Order::AggregateFirst,
                    Order::TransformFirst,
                    Order::Lean,
                ];
                let names = ["auto", "aggregate-first", "transform-first", "lean"];
                o.order = Some(all[named(&v, &names)?]);
            }
            "optimizer" => {
                let all = [OptimizerKind::Adam, OptimizerKind::Sgd];
                o.optimizer = Some(all[named(&v, &["adam", "sgd"])?]);
            }
            "norm_layer" => {
                let s = name(&v)?;
                o.norm_layer = Some(
                    s.parse::<NormKind>()
                        .map_err(|e| value_err("norm_layer", e))?,
                );
            }
            "drop_edge" => o.drop_edge = Some(real(&v)?),
            "checkpoint_every" => o.checkpoint_every = Some(count(&v)?),
            "alpha" => o.alpha = Some(real(&v)?),
            "lambda" | "lambda_" => o.lambda = Some(real(&v)?),
            "k" => o.k = Some(count(&v)?),
            "bias" => {
                o.bias = v
                    .extract::<bool>()
                    .map_err(|_| PyTypeError::new_err("bias: a bool"))?
            }
            "warmup" => o.warmup = Some(count(&v)?),
            "norm" => {
                let all = [sparse_gcn::Norm::Symmetric, sparse_gcn::Norm::Row];
                o.norm = all[named(&v, &["sym", "row"])?];
            }
            "row_norm" => {
                let all = [RowNorm::Auto, RowNorm::On, RowNorm::Off];
                o.row_norm = all[named(&v, &["auto", "on", "off"])?];
            }
            "reorder" => {
                let s = name(&v)?;
                o.reorder = s.parse::<Reorder>().map_err(|e| value_err("reorder", e))?;
            }
            "batch" => {
                let s = name(&v)?;
                o.batches.batch = BatchKind::named(&s).ok_or_else(|| {
                    let all: Vec<&str> = BatchKind::ALL.iter().map(|k| k.name()).collect();
                    value_err("batch", format!("'{s}' is not one of {}", all.join(", ")))
                })?;
            }
            "parts" => o.batches.parts = Some(count(&v)?),
            "parts_per_batch" => o.batches.parts_per_batch = Some(count(&v)?),
            "clusters" => {
                let all = [Clusters::Metis, Clusters::Community];
                o.batches.clusters = Some(all[named(&v, &["metis", "community"])?]);
            }
            "diag_lambda" => o.batches.diag_lambda = Some(real(&v)?),
            "batch_size" => o.batches.batch_size = Some(count(&v)?),
            "fanout" => {
                let list = v
                    .try_iter()
                    .map_err(|_| PyTypeError::new_err("fanout: a list of whole numbers"))?;
                let mut f = Vec::new();
                for item in list {
                    f.push(count(&item?)?);
                }
                o.batches.fanout = Some(f);
            }
            "walk_length" => o.batches.walk_length = Some(count(&v)?),
            "batches_per_epoch" => o.batches.batches_per_epoch = Some(count(&v)?),
            "batches_per_step" => o.batches.batches_per_step = Some(count(&v)?),
            "saint_coverage" => o.batches.saint_coverage = Some(real(&v)?),
            "eval" => {
                let all = [EvalKind::Full, EvalKind::Batch];
                o.batches.eval = Some(all[named(&v, &["full", "batch"])?]);
            }
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "unexpected keyword argument '{key}'"
                )))
            }
        }
    }
    o.check(Names::Keywords)
        .map_err(|e| PyValueError::new_err(e.message(Names::Keywords)))?;
    Ok(o)
}
