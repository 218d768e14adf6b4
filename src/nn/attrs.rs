//! A layer's settings as text ([`Attrs`]), and the [`Registry`] that builds a layer again from
//! its name and settings: what a checkpoint of a hand-built stack records and reads
//! (`train::checkpoint`).
//!
//! A layer that can be saved answers [`Layer::attrs`] with every setting its constructor takes
//! (widths, rates, modes; not its parameters, which the checkpoint stores as tensors) and
//! implements [`FromAttrs`], the way back. The layers of this crate are registered by the
//! architectures that use them ([`Architecture::register_layers`]); a crate's own layer is one
//! line, [`Registry::with`]:
//!
//! ```
//! use sparse_gcn::nn::attrs::{Attrs, Registry};
//! use sparse_gcn::nn::{Layer, Linear};
//!
//! // A crate's own layer would be one more line: `.with::<MyLayer<f32>>("my_layer")`.
//! let registry = Registry::<f32>::empty().with::<Linear<f32>>("linear");
//! let attrs = Attrs::new().with("in_dim", 3).with("out_dim", 2).with("bias", true);
//! let layer = registry.make("linear", &attrs).unwrap();
//! assert_eq!(layer.attrs(), Some(attrs));
//! assert!(registry.make("sage_conv", &Attrs::new()).is_err());
//! assert!(Registry::<f32>::builtin().names().any(|n| n == "gcn_conv"));
//! ```
//!
//! # Sizes from a file
//! A checkpoint's settings come from a file that may say anything. A layer reads the sizes of
//! what it allocates through [`Attrs::shape`], which counts them against a budget the loader
//! sets from the values the file holds ([`Attrs::limit`]): a file of a few bytes cannot make a
//! layer allocate gigabytes.
//!
//! [`Layer::attrs`]: super::Layer::attrs
//! [`Architecture::register_layers`]: super::arch::Architecture::register_layers

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt::{self, Display};
use std::str::FromStr;

use super::layer::Layer;
use crate::{ConfigError, Result, Scalar};

/// A layer's settings: keys and values as text (see the [module docs](self)).
#[derive(Clone, Default)]
pub struct Attrs {
    values: BTreeMap<String, String>,
    /// Elements the sizes read through [`Attrs::shape`] may still add up to (`None`: no bound).
    budget: Cell<Option<u64>>,
}

impl PartialEq for Attrs {
    /// The same settings (the budget aside).
    fn eq(&self, o: &Self) -> bool {
        self.values == o.values
    }
}

impl Eq for Attrs {}

impl fmt::Debug for Attrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.values.iter()).finish()
    }
}

fn attr_err(key: &str, value: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Attr {
        key: key.to_string(),
        value: value.to_string(),
        msg: msg.into(),
    }
}

impl Attrs {
    /// No settings, no budget.
    pub fn new() -> Attrs {
        Attrs::default()
    }

    /// These settings with `key` set to `value` (its `Display`: floats as the shortest text
    /// that reads back to the same value).
    #[must_use]
    pub fn with(mut self, key: &str, value: impl Display) -> Attrs {
        self.set(key, value);
        self
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, key: &str, value: impl Display) {
        self.values.insert(key.to_string(), value.to_string());
    }

    /// These settings, whose [`Attrs::shape`]s may add up to at most `elements`.
    #[must_use]
    pub fn limit(self, elements: u64) -> Attrs {
        self.budget.set(Some(elements));
        self
    }

    /// Every setting, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of settings.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The text of `key`.
    ///
    /// # Errors
    /// [`ConfigError::Attr`] when it is missing.
    pub fn text(&self, key: &str) -> Result<&str, ConfigError> {
        self.values
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| attr_err(key, "", "missing"))
    }

    /// `key` parsed as a `T`.
    ///
    /// # Errors
    /// [`ConfigError::Attr`] naming the key and its text when it is missing or does not parse.
    pub fn get<T: FromStr>(&self, key: &str) -> Result<T, ConfigError>
    where
        T::Err: Display,
    {
        let text = self.text(key)?;
        text.parse()
            .map_err(|e: T::Err| attr_err(key, text, e.to_string()))
    }

    /// `key` as a whole number in `min..=max` (a width a layer does not allocate from: the
    /// stack checks widths against each other; a step count).
    ///
    /// # Errors
    /// [`ConfigError::Attr`] when it is missing, not a whole number, or out of range.
    pub fn count(&self, key: &str, min: usize, max: usize) -> Result<usize, ConfigError> {
        let v: usize = self.get(key)?;
        if (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(self.invalid(key, format!("must lie in [{min}, {max}]")))
        }
    }

    /// The error for `key`'s value, which is wrong because `msg`.
    pub fn invalid(&self, key: &str, msg: impl Into<String>) -> ConfigError {
        attr_err(key, self.values.get(key).map_or("", String::as_str), msg)
    }

    /// `key` as a rate in [0, 1) (a dropout probability).
    ///
    /// # Errors
    /// [`ConfigError::Attr`] when it is missing, not a number, or outside [0, 1).
    pub fn rate(&self, key: &str) -> Result<f64, ConfigError> {
        let p: f64 = self.get(key)?;
        if (0.0..1.0).contains(&p) {
            Ok(p)
        } else {
            Err(self.invalid(key, "must lie in [0, 1)"))
        }
    }

    /// `key` as a finite number.
    ///
    /// # Errors
    /// [`ConfigError::Attr`] when it is missing, not a number, or not finite.
    pub fn finite(&self, key: &str) -> Result<f64, ConfigError> {
        let v: f64 = self.get(key)?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(self.invalid(key, "must be finite"))
        }
    }

    /// The sizes `keys` (each > 0) of something the layer allocates, whose product is counted
    /// against the budget ([`Attrs::limit`]).
    ///
    /// # Errors
    /// [`ConfigError::Attr`] when one is missing, not a count or 0, or when the product
    /// exceeds what is left of the budget.
    pub fn shape<const N: usize>(&self, keys: [&str; N]) -> Result<[usize; N], ConfigError> {
        let mut dims = [0usize; N];
        let mut product = 1u64;
        for (d, key) in dims.iter_mut().zip(keys) {
            *d = self.get(key)?;
            if *d == 0 {
                return Err(attr_err(key, "0", "must be > 0"));
            }
            product = product.saturating_mul(*d as u64);
        }
        if let Some(left) = self.budget.get() {
            if product > left {
                let key = keys.join(" × ");
                let value = dims.map(|d| d.to_string()).join(" × ");
                return Err(attr_err(
                    &key,
                    &value,
                    format!("{product} elements, more than the {left} the file's tensors can fill"),
                ));
            }
            self.budget.set(Some(left - product));
        }
        Ok(dims)
    }
}

/// A layer that can be built again from its [`Layer::attrs`] (its parameters zero or at their
/// initial values; a checkpoint then fills them).
pub trait FromAttrs<F: Scalar>: Layer<F> + Sized + 'static {
    /// The layer these settings describe.
    ///
    /// # Errors
    /// [`ConfigError::Attr`] naming a missing or invalid setting (read sizes through
    /// [`Attrs::shape`]).
    fn from_attrs(attrs: &Attrs) -> Result<Self, ConfigError>;
}

/// How a [`Registry`] makes a layer.
pub type MakeLayer<F> = fn(&Attrs) -> Result<Box<dyn Layer<F>>, ConfigError>;

fn make<F: Scalar, L: FromAttrs<F>>(attrs: &Attrs) -> Result<Box<dyn Layer<F>>, ConfigError> {
    Ok(Box::new(L::from_attrs(attrs)?))
}

/// The layers a loader can build, by name (see the [module docs](self)).
#[derive(Clone)]
pub struct Registry<F: Scalar> {
    makers: BTreeMap<&'static str, MakeLayer<F>>,
}

impl<F: Scalar> fmt::Debug for Registry<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.makers.keys()).finish()
    }
}

impl<F: Scalar> Registry<F> {
    /// No layers.
    pub fn empty() -> Registry<F> {
        Registry {
            makers: BTreeMap::new(),
        }
    }

    /// Every layer of this crate (each registered by the architecture that uses it).
    pub fn builtin() -> Registry<F> {
        let mut r = Registry::empty();
        super::arch::Arch::register_layers(&mut r);
        r
    }

    /// This registry with `L` under `name` (its [`Layer::name`]; a layer whose name depends
    /// on its settings is registered under each).
    #[must_use]
    pub fn with<L: FromAttrs<F>>(mut self, name: &'static str) -> Registry<F> {
        self.add::<L>(name);
        self
    }

    /// Registers `L` under `name`.
    pub fn add<L: FromAttrs<F>>(&mut self, name: &'static str) {
        self.makers.insert(name, make::<F, L>);
    }

    /// The names registered, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.makers.keys().copied()
    }

    /// The layer `name` with settings `attrs`, checked to name itself `name`.
    ///
    /// # Errors
    /// [`ConfigError::UnknownName`] for a name not registered; what the layer's
    /// [`FromAttrs::from_attrs`] reports; [`ConfigError::Attr`] when the layer made names
    /// itself otherwise.
    pub fn make(&self, name: &str, attrs: &Attrs) -> Result<Box<dyn Layer<F>>, ConfigError> {
        let Some(make) = self.makers.get(name) else {
            return Err(ConfigError::UnknownName {
                what: "layer (not in the registry: register it with Registry::with)",
                got: name.to_string(),
                expected: self.names().collect::<Vec<_>>().join(", "),
            });
        };
        let layer = make(attrs)?;
        if layer.name() != name {
            return Err(attr_err(
                "name",
                name,
                format!("these settings make a `{}` layer", layer.name()),
            ));
        }
        Ok(layer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_and_errors_name_the_key() {
        let a = Attrs::new()
            .with("dim", 16)
            .with("p", 0.5)
            .with("alpha", 0.1_f64 + 0.2)
            .with("mode", "cat");
        assert_eq!(a.get::<usize>("dim").unwrap(), 16);
        assert_eq!(a.rate("p").unwrap(), 0.5);
        assert_eq!(
            a.finite("alpha").unwrap(),
            0.1 + 0.2,
            "floats read back exactly"
        );
        let e = a.get::<usize>("mode").unwrap_err().to_string();
        assert!(e.contains("`mode`") && e.contains("`cat`"), "{e}");
        let e = a.get::<usize>("width").unwrap_err().to_string();
        assert!(e.contains("`width`") && e.contains("missing"), "{e}");
        let e = Attrs::new().with("p", 1).rate("p").unwrap_err().to_string();
        assert!(e.contains("[0, 1)"), "{e}");
        let e = Attrs::new().with("a", "inf").finite("a").unwrap_err();
        assert!(e.to_string().contains("finite"), "{e}");
    }

    #[test]
    fn shapes_count_against_the_budget() {
        let a = Attrs::new().with("r", 10).with("c", 20).with("z", 0);
        assert_eq!(a.shape(["r", "c"]).unwrap(), [10, 20]);
        assert!(a.shape(["z"]).is_err(), "a size of 0");
        let a = a.limit(250);
        assert_eq!(a.shape(["r", "c"]).unwrap(), [10, 20]);
        // 50 left: 10 × 10 is refused, 10 fits, then 40 are left.
        let e = a.shape(["r", "r"]).unwrap_err().to_string();
        assert!(e.contains("100 elements") && e.contains("the 50"), "{e}");
        assert_eq!(a.shape(["r"]).unwrap(), [10]);
        let e = a.shape(["r", "r"]).unwrap_err().to_string();
        assert!(e.contains("the 40"), "{e}");
        let huge = Attrs::new()
            .with("r", usize::MAX)
            .with("c", usize::MAX)
            .limit(1 << 20);
        let e = huge.shape(["r", "c"]).unwrap_err().to_string();
        assert!(e.contains("r × c"), "{e}");
    }
}
