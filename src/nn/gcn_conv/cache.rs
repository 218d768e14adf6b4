//! What a convolution keeps between passes, each keyed on the Â and features it was computed
//! from ([`InputKey`]): Â·X of the model's fixed input (aggregate-first, the SGC idea), and the
//! pattern of a sparse Â·X̃ (X̃ has X's pattern).

use crate::graph::Propagate;
use crate::input::SparseFeatures;
use crate::kernels::CsrView;
use crate::nn::layer::{InputKey, Value};
use crate::{Result, Scalar};

/// S = Â·X kept by an aggregate-first layer across passes.
#[derive(Debug, Clone)]
pub(super) enum Aggregated<F> {
    Dense(ndarray::Array2<F>),
    Sparse(SparseFeatures<F>),
}

impl<F: Scalar> Aggregated<F> {
    pub(super) fn value(&self) -> Value<'_, F> {
        match self {
            Aggregated::Dense(s) => Value::Dense(s.view()),
            Aggregated::Sparse(s) => Value::Sparse(s.x(), s.x_t()),
        }
    }
}

/// A value computed from the data, with the key of the data.
pub(super) type Keyed<T> = Option<(InputKey, T)>;

/// S = Â·X for sparse X into `sparse` (its pattern computed again unless `sparse` holds the
/// pattern of the same Â and features, `key`); `tmp` is the product's dense accumulator.
///
/// # Errors
/// When Â's backend has no sparse product.
pub(super) fn aggregate_sparse<'s, F: Scalar>(
    adj: &dyn Propagate<F>,
    xs: CsrView<'_, F>,
    key: InputKey,
    sparse: &'s mut Keyed<SparseFeatures<F>>,
    tmp: &mut Vec<F>,
) -> Result<&'s SparseFeatures<F>> {
    if sparse.as_ref().is_none_or(|(k, _)| *k != key) {
        *sparse = Some((key, adj.a_times_sparse_pattern(xs)?));
    }
    let Some((_, s)) = sparse.as_mut() else {
        unreachable!("set above")
    };
    tmp.resize(xs.cols(), F::zero());
    adj.a_times_sparse(xs, s, tmp)?;
    Ok(s)
}
