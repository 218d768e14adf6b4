//! A [`ModelConfig`] as checkpoint metadata: one table ([`FIELDS`]) from which every common
//! field is written, read and checked, then the architecture's own settings
//! ([`Arch::settings`]: GCNII's `alpha` and `lambda`, SGC's `k`, APPNP's `k` and `alpha`), which
//! the architecture writes and checks itself. A new common field is one row here; a new
//! architecture's settings need nothing here.

use std::collections::{BTreeMap, HashMap};

use crate::nn::{Arch, MaskStreams, ModelConfig, NormKind, Order};

/// One field of the configuration in the metadata.
pub(super) struct Field {
    /// The metadata key.
    pub(super) key: &'static str,
    /// Its value in the configuration, as written.
    get: fn(&ModelConfig) -> String,
    /// Sets it from the metadata's value, or says what the value is not.
    set: fn(&mut ModelConfig, &str) -> Result<(), String>,
}

// (Each parser's error is what follows "metadata `key`" in the message.)

fn uint(v: &str) -> Result<usize, String> {
    v.parse()
        .map_err(|_| format!(" = `{v}` is not a non-negative integer"))
}

fn float(v: &str) -> Result<f64, String> {
    v.parse().map_err(|_| format!(" = `{v}` is not a number"))
}

fn named<T: std::str::FromStr<Err = crate::ConfigError>>(v: &str) -> Result<T, String> {
    v.parse::<T>().map_err(|e| format!(": {e}"))
}

/// The metadata spelling of a mask-stream scheme.
fn streams_name(s: MaskStreams) -> &'static str {
    match s {
        MaskStreams::Shared => "shared",
        MaskStreams::PerLayer => "per-layer",
    }
}

/// The common fields, `model` first (the architecture its settings then belong to).
pub(super) const FIELDS: &[Field] = &[
    Field {
        key: "model",
        get: |c| c.arch.name().to_string(),
        set: |c, v| named::<Arch>(v).map(|a| c.arch = a),
    },
    Field {
        key: "in_dim",
        get: |c| c.in_dim.to_string(),
        set: |c, v| uint(v).map(|x| c.in_dim = x),
    },
    Field {
        key: "hidden_dim",
        get: |c| c.hidden_dim.to_string(),
        set: |c, v| uint(v).map(|x| c.hidden_dim = x),
    },
    Field {
        key: "out_dim",
        get: |c| c.out_dim.to_string(),
        set: |c, v| uint(v).map(|x| c.out_dim = x),
    },
    Field {
        key: "n_layers",
        get: |c| c.n_layers.to_string(),
        set: |c, v| uint(v).map(|x| c.n_layers = x),
    },
    Field {
        key: "dropout",
        get: |c| c.dropout.to_string(),
        set: |c, v| float(v).map(|x| c.dropout = x),
    },
    Field {
        key: "input_dropout",
        get: |c| c.input_dropout.to_string(),
        set: |c, v| float(v).map(|x| c.input_dropout = x),
    },
    Field {
        key: "norm_layer",
        get: |c| c.norm.name().to_string(),
        set: |c, v| named::<NormKind>(v).map(|x| c.norm = x),
    },
    Field {
        key: "bias",
        get: |c| c.bias.to_string(),
        set: |c, v| {
            v.parse()
                .map(|x| c.bias = x)
                .map_err(|_| format!(" = `{v}` is not true or false"))
        },
    },
    Field {
        key: "order",
        get: |c| c.order.name().to_string(),
        set: |c, v| named::<Order>(v).map(|x| c.order = x),
    },
    Field {
        key: "checkpoint",
        get: |c| c.checkpoint.to_string(),
        set: |c, v| uint(v).map(|x| c.checkpoint = x),
    },
    Field {
        key: "drop_edge",
        get: |c| c.drop_edge.to_string(),
        set: |c, v| float(v).map(|x| c.drop_edge = x),
    },
    Field {
        key: "mask_streams",
        get: |c| streams_name(c.mask_streams).to_string(),
        set: |c, v| {
            c.mask_streams = match v {
                "shared" => MaskStreams::Shared,
                "per-layer" => MaskStreams::PerLayer,
                _ => return Err(format!(" = `{v}` is not shared or per-layer")),
            };
            Ok(())
        },
    },
];

/// Every architecture's setting keys (reserved, whichever architecture a file holds).
pub(super) fn setting_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = Arch::all()
        .iter()
        .flat_map(|a| a.settings().into_iter().map(|(k, _)| k))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Writes `cfg`'s fields and its architecture's settings into `meta`.
pub(super) fn write(cfg: &ModelConfig, meta: &mut BTreeMap<String, String>) {
    for f in FIELDS {
        meta.insert(f.key.to_string(), (f.get)(cfg));
    }
    for (k, v) in cfg.arch.settings() {
        meta.insert(k.to_string(), v.to_string());
    }
}

/// The configuration `meta` describes: every field of [`FIELDS`], then the architecture's
/// settings; an error names the key (`metadata key `k` is missing`, `metadata `k` = `v` …`).
pub(super) fn read(meta: &HashMap<String, String>) -> Result<ModelConfig, String> {
    let get = |key: &str| {
        meta.get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("metadata key `{key}` is missing"))
    };
    let mut cfg = ModelConfig::default();
    for f in FIELDS {
        let v = get(f.key)?;
        (f.set)(&mut cfg, v).map_err(|e| format!("metadata `{}`{e}", f.key))?;
    }
    for (k, _) in cfg.arch.settings() {
        let v = get(k)?;
        let x = float(v).map_err(|e| format!("metadata `{k}`{e}"))?;
        cfg.arch
            .set(k, x)
            .map_err(|e| format!("metadata `{k}` = `{v}`: {e}"))?;
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::appnp::AppnpConfig;
    use crate::nn::gcnii::GcniiConfig;
    use crate::nn::sgc::SgcConfig;

    #[test]
    fn every_architecture_s_configuration_round_trips() {
        for arch in [
            Arch::Gcnii(GcniiConfig {
                alpha: 0.25,
                lambda: 1.5,
            }),
            Arch::Sgc(SgcConfig { k: 5 }),
            Arch::Appnp(AppnpConfig { k: 3, alpha: 0.2 }),
        ]
        .into_iter()
        .chain(Arch::all())
        {
            let cfg = ModelConfig {
                arch,
                in_dim: 7,
                out_dim: 3,
                norm: NormKind::Batch,
                order: Order::Lean,
                checkpoint: 2,
                drop_edge: 0.25,
                mask_streams: MaskStreams::PerLayer,
                ..ModelConfig::deep(arch, 4)
            };
            let mut meta = BTreeMap::new();
            write(&cfg, &mut meta);
            let meta: HashMap<String, String> = meta.into_iter().collect();
            assert_eq!(read(&meta), Ok(cfg), "{arch}");
        }
    }

    #[test]
    fn a_missing_or_bad_field_is_named() {
        let mut meta = BTreeMap::new();
        write(&ModelConfig::deep(Arch::GCNII, 3), &mut meta);
        let meta: HashMap<String, String> = meta.into_iter().collect();
        let mut m = meta.clone();
        m.remove("lambda");
        assert_eq!(read(&m), Err("metadata key `lambda` is missing".into()));
        let mut m = meta.clone();
        m.insert("alpha".into(), "2".into());
        assert!(read(&m).is_err_and(|e| e.contains("`alpha` = `2`")));
        let mut m = meta;
        m.insert("bias".into(), "maybe".into());
        assert_eq!(
            read(&m),
            Err("metadata `bias` = `maybe` is not true or false".into())
        );
        assert!(setting_keys().contains(&"k") && setting_keys().contains(&"lambda"));
    }
}
