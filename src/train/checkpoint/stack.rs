//! A hand-built stack ([`StackDesc`]) as checkpoint metadata (format version 3, `model` =
//! `stack`), every key under `stack.`:
//!
//! | key | value |
//! |---|---|
//! | `stack.nodes` | the number of nodes N |
//! | `stack.{i}.layer` | node i's layer name (`linear`, `gcn_conv`, a crate's own) |
//! | `stack.{i}.inputs` | its sources, comma-separated: `x`, `xd` (X after the input dropout) or an earlier node's index |
//! | `stack.{i}.group`, `stack.{i}.site` | its weight-decay group and dropout stream |
//! | `stack.{i}.attr.{key}` | each of its layer's settings ([`Attrs`]) |
//! | `stack.input_dropout`, `stack.input_site` | the input dropout and its stream |
//! | `stack.taps` | the nodes whose outputs are the layer representations, comma-separated |
//! | `stack.blocks` | the hidden blocks, `start..end` comma-separated |
//! | `stack.streams` | `shared` or `per-layer` |
//! | `stack.varying_graph` | `true` or `false` ([`StackOptions::varying_graph`]) |
//! | `stack.checkpoint` | `none` or `every:K` ([`Checkpointing`]) |
//! | `stack.in_dim` | the features' width, when a layer declares it |
//! | `stack.out_dim` | the logits' width |

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use crate::nn::arch::MAX_LAYERS;
use crate::nn::attrs::Attrs;
use crate::nn::{Checkpointing, MaskStreams, NodeDesc, Src, StackDesc, StackOptions, Wiring};

/// The prefix of every key of a stack.
pub(super) const PREFIX: &str = "stack.";

/// Most nodes a file may describe.
pub(super) const MAX_NODES: usize = 16 * MAX_LAYERS;

/// A stack read back: its description and widths.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Read {
    pub(super) desc: StackDesc,
    pub(super) in_dim: Option<usize>,
    pub(super) out_dim: usize,
}

fn list<T: ToString>(v: impl IntoIterator<Item = T>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn src_name(s: Src) -> String {
    match s {
        Src::X => "x".into(),
        Src::Xd => "xd".into(),
        Src::Node(j) => j.to_string(),
    }
}

/// Writes `desc` (with the widths) into `meta`.
pub(super) fn write(
    desc: &StackDesc,
    in_dim: Option<usize>,
    out_dim: usize,
    meta: &mut BTreeMap<String, String>,
) {
    let mut put = |k: &str, v: String| {
        meta.insert(format!("{PREFIX}{k}"), v);
    };
    put("nodes", desc.nodes.len().to_string());
    for (i, n) in desc.nodes.iter().enumerate() {
        put(&format!("{i}.layer"), n.layer.clone());
        put(
            &format!("{i}.inputs"),
            list(n.inputs.iter().map(|&s| src_name(s))),
        );
        put(&format!("{i}.group"), n.group.to_string());
        put(&format!("{i}.site"), n.site.to_string());
        for (k, v) in n.attrs.iter() {
            put(&format!("{i}.attr.{k}"), v.to_string());
        }
    }
    let w = &desc.wiring;
    put("input_dropout", w.input_dropout.to_string());
    put("input_site", w.input_site.to_string());
    put("taps", list(&w.taps));
    put(
        "blocks",
        list(w.blocks.iter().map(|b| format!("{}..{}", b.start, b.end))),
    );
    put(
        "streams",
        match w.streams {
            MaskStreams::Shared => "shared",
            MaskStreams::PerLayer => "per-layer",
        }
        .into(),
    );
    put("varying_graph", desc.options.varying_graph.to_string());
    put(
        "checkpoint",
        match desc.options.checkpoint {
            Checkpointing::None => "none".into(),
            Checkpointing::Every(k) => format!("every:{k}"),
        },
    );
    if let Some(d) = in_dim {
        put("in_dim", d.to_string());
    }
    put("out_dim", out_dim.to_string());
}

/// Reads the values under [`PREFIX`]; an error names the key (as [`super::fields::read`]'s).
struct Reader<'m>(&'m HashMap<String, String>);

impl Reader<'_> {
    /// `PREFIX + k` parsed by `parse`, which is `None` when the text is not `what`.
    fn value<T>(
        &self,
        k: &str,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, String> {
        let key = format!("{PREFIX}{k}");
        let v = self
            .0
            .get(&key)
            .ok_or_else(|| format!("metadata key `{key}` is missing"))?;
        parse(v).ok_or_else(|| format!("metadata `{key}` = `{v}` is not {what}"))
    }

    /// `PREFIX + k` as a `T` (`FromStr`).
    fn parsed<T: std::str::FromStr>(&self, k: &str, what: &str) -> Result<T, String> {
        self.value(k, what, |v| v.parse().ok())
    }

    /// `PREFIX + k` as a comma-separated list, each item parsed by `one`.
    fn list<T>(
        &self,
        k: &str,
        what: &str,
        one: impl Fn(&str) -> Option<T>,
    ) -> Result<Vec<T>, String> {
        self.value(k, what, |v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(&one)
                .collect::<Option<Vec<T>>>()
        })
    }
}

fn parse_src(s: &str) -> Option<Src> {
    match s {
        "x" => Some(Src::X),
        "xd" => Some(Src::Xd),
        _ => s.parse().ok().map(Src::Node),
    }
}

fn parse_block(s: &str) -> Option<Range<usize>> {
    let (a, b) = s.split_once("..")?;
    Some(a.parse().ok()?..b.parse().ok()?)
}

/// Each node's settings, from the keys `stack.{i}.attr.{key}`.
fn node_attrs(meta: &HashMap<String, String>, n: usize) -> Result<Vec<Attrs>, String> {
    let mut attrs: Vec<Attrs> = vec![Attrs::new(); n];
    for (key, v) in meta {
        let Some((i, k)) = key
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once(".attr."))
        else {
            continue;
        };
        match i.parse::<usize>() {
            Ok(i) if i < n => attrs[i].set(k, v),
            _ => return Err(format!("metadata key `{key}`: no node {i} of {n}")),
        }
    }
    Ok(attrs)
}

/// The stack `meta` describes; an error names the key.
pub(super) fn read(meta: &HashMap<String, String>) -> Result<Read, String> {
    let r = Reader(meta);
    let n: usize = r.value("nodes", &format!("a node count in [1, {MAX_NODES}]"), |v| {
        v.parse().ok().filter(|c| (1..=MAX_NODES).contains(c))
    })?;
    let nodes = node_attrs(meta, n)?
        .into_iter()
        .enumerate()
        .map(|(i, attrs)| {
            Ok(NodeDesc {
                layer: r.value(&format!("{i}.layer"), "a name", |v| Some(v.to_string()))?,
                attrs,
                inputs: r.list(
                    &format!("{i}.inputs"),
                    "a list of sources (x, xd, node indices)",
                    parse_src,
                )?,
                group: r.parsed(&format!("{i}.group"), "a group")?,
                site: r.parsed(&format!("{i}.site"), "a stream number")?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let streams = r.value("streams", "shared or per-layer", |v| match v {
        "shared" => Some(MaskStreams::Shared),
        "per-layer" => Some(MaskStreams::PerLayer),
        _ => None,
    })?;
    let checkpoint = r.value("checkpoint", "none or every:K (K > 0)", |v| {
        match v.strip_prefix("every:").map(str::parse::<usize>) {
            None if v == "none" => Some(Checkpointing::None),
            Some(Ok(k)) if k > 0 => Some(Checkpointing::Every(k)),
            _ => None,
        }
    })?;
    let in_dim = if meta.contains_key(&format!("{PREFIX}in_dim")) {
        Some(r.parsed("in_dim", "a width")?)
    } else {
        None
    };
    Ok(Read {
        desc: StackDesc {
            nodes,
            wiring: Wiring {
                input_dropout: r.parsed("input_dropout", "a number")?,
                input_site: r.parsed("input_site", "a stream number")?,
                taps: r.list("taps", "a list of node indices", |s| s.parse().ok())?,
                streams,
                blocks: r.list("blocks", "a list of start..end node ranges", parse_block)?,
            },
            options: StackOptions {
                varying_graph: r.parsed("varying_graph", "true or false")?,
                checkpoint,
                separate_eval: false,
            },
        },
        in_dim,
        out_dim: r.parsed("out_dim", "a width")?,
    })
}
