//! A stack as data ([`StackDesc`]): each node's layer by name and settings, its inputs, and the
//! stack's wiring and options. [`Model::describe`] gives it, [`Model::from_desc`] builds the
//! stack again with a [`Registry`] of layers: what a checkpoint of a hand-built stack records.

use super::{Model, Node, Src, StackOptions, Wiring};
use crate::nn::attrs::{Attrs, Registry};
use crate::nn::layer::InputDesc;
use crate::{ConfigError, Scalar};

/// One node of a [`StackDesc`].
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDesc {
    /// Its layer's name ([`Layer::name`](crate::nn::Layer::name)).
    pub layer: String,
    /// Its layer's settings ([`Layer::attrs`](crate::nn::Layer::attrs)).
    pub attrs: Attrs,
    /// Its inputs.
    pub inputs: Vec<Src>,
    /// Weight-decay group of its parameters.
    pub group: usize,
    /// Its dropout stream.
    pub site: u64,
}

/// A stack as data: each node's layer by name and settings, its inputs, and the stack's wiring
/// and options ([`Model::describe`], [`Model::from_desc`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StackDesc {
    /// The nodes, in forward order.
    pub nodes: Vec<NodeDesc>,
    /// How they are wired besides their inputs.
    pub wiring: Wiring,
    /// The stack's options.
    pub options: StackOptions,
}

impl<F: Scalar> Model<F> {
    /// The stack as data: every node's layer by name and settings.
    ///
    /// # Errors
    /// [`ConfigError::Stack`] naming the first node whose layer has no settings
    /// ([`Layer::attrs`](crate::nn::Layer::attrs) is `None`): it cannot be built again.
    pub fn describe(&self) -> Result<StackDesc, ConfigError> {
        let nodes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let attrs = n.layer.attrs().ok_or_else(|| {
                    ConfigError::Stack(format!(
                        "node {i} ({}) cannot be saved: its layer does not describe its settings \
                         (Layer::attrs)",
                        n.layer.name()
                    ))
                })?;
                Ok(NodeDesc {
                    layer: n.layer.name().to_string(),
                    attrs,
                    inputs: n.inputs.clone(),
                    group: n.group,
                    site: n.site,
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        Ok(StackDesc {
            nodes,
            wiring: self.wiring(),
            options: self.opts,
        })
    }

    /// The stack `desc` describes, each layer made by `registry` (its parameters at their
    /// initial values: fill them, e.g. from a checkpoint).
    ///
    /// # Errors
    /// What [`Registry::make`] reports for a node (prefixed with it); what
    /// [`Model::from_nodes`] reports.
    pub fn from_desc(desc: &StackDesc, registry: &Registry<F>) -> Result<Model<F>, ConfigError> {
        let nodes = desc
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let layer = registry
                    .make(&n.layer, &n.attrs)
                    .map_err(|e| ConfigError::Stack(format!("node {i} ({}): {e}", n.layer)))?;
                Ok(Node {
                    layer,
                    inputs: n.inputs.clone(),
                    group: n.group,
                    site: n.site,
                })
            })
            .collect::<Result<_, ConfigError>>()?;
        Model::from_nodes(nodes, desc.wiring.clone(), desc.options)
    }

    /// The width of the features, as the first layer reading them declares it
    /// ([`Spec::in_dim`](crate::nn::Spec::in_dim)); `None` when no layer reading them does.
    pub fn in_dim(&self) -> Option<usize> {
        self.nodes
            .iter()
            .filter(|n| n.inputs.iter().any(|s| matches!(s, Src::X | Src::Xd)))
            .find_map(|n| n.layer.spec(&descs(n.inputs.len()), 0).in_dim)
    }

    /// The width of the logits (the last node's output).
    pub fn out_dim(&self) -> usize {
        self.nodes
            .last()
            .map_or(0, |n| n.layer.spec(&descs(n.inputs.len()), 0).out_dim)
    }
}

/// Dense inputs, for a question whose answer does not depend on them (widths).
fn descs(n: usize) -> Vec<InputDesc> {
    vec![InputDesc::default(); n]
}
