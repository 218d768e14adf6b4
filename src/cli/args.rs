//! Value parsers for the options: every range is checked while the command line is parsed,
//! before any file is read, so a bad value is a usage error (exit 2) naming the flag as typed
//! and the allowed range (clap prints `invalid value '1.5' for '--dropout <P>': …`).

use std::path::{Path, PathBuf};

fn number(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| "not a number".to_string())?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err("must be a finite number".into())
    }
}

/// A probability of dropping: `[0, 1)`.
pub(crate) fn rate(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err("must lie in [0, 1)".into())
    }
}

/// A teleport or mixing weight: `[0, 1]`.
pub(crate) fn unit(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("must lie in [0, 1]".into())
    }
}

/// A finite value > 0 (learning rate, GCNII's λ).
pub(crate) fn positive(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err("must be > 0".into())
    }
}

/// A finite value ≥ 0 (weight decay).
pub(crate) fn non_negative(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err("must be >= 0".into())
    }
}

/// Three fractions `TRAIN,VALID,TEST`, each in [0, 1], summing to at most 1.
pub(crate) fn fractions(s: &str) -> Result<[f64; 3], String> {
    let parts: Vec<&str> = s.split(',').collect();
    let [a, b, c] = parts[..] else {
        return Err("expected three fractions TRAIN,VALID,TEST (e.g. 0.6,0.2,0.2)".into());
    };
    let f = [unit(a)?, unit(b)?, unit(c)?];
    if f.iter().sum::<f64>() > 1.0 + 1e-9 {
        return Err("the three fractions add up to more than 1".into());
    }
    Ok(f)
}

/// A count ≥ 1 (layers, hidden width, epochs, seeds, …).
pub(crate) fn count(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| "not a whole number".to_string())?;
    if v >= 1 {
        Ok(v)
    } else {
        Err("must be at least 1".into())
    }
}

/// A count in `1..=max`.
fn count_to(s: &str, max: usize, why: &str) -> Result<usize, String> {
    let v = s
        .trim()
        .parse::<u128>()
        .map_err(|_| "not a whole number".to_string())?;
    if v == 0 {
        return Err("must be at least 1".into());
    }
    match usize::try_from(v) {
        Ok(v) if v <= max => Ok(v),
        _ => Err(format!("must be at most {max} ({why})")),
    }
}

/// A count in `0..=max` (0 meaning off or automatic).
fn zero_to(s: &str, max: usize, why: &str) -> Result<usize, String> {
    let v = s
        .trim()
        .parse::<u128>()
        .map_err(|_| "not a whole number >= 0".to_string())?;
    match usize::try_from(v) {
        Ok(v) if v <= max => Ok(v),
        _ => Err(format!("must be at most {max} ({why})")),
    }
}

pub(crate) use sparse_gcn::train::options::{MAX_EPOCHS, MAX_SEED, MAX_SEEDS, MAX_THREADS};

/// `--layers`: graph convolutions, at most [`MAX_LAYERS`](sparse_gcn::nn::arch::MAX_LAYERS).
pub(crate) fn layers(s: &str) -> Result<usize, String> {
    count_to(
        s,
        sparse_gcn::nn::arch::MAX_LAYERS,
        "the deepest published GCN studies use 64 to 128",
    )
}

/// `--hidden`: at most [`MAX_HIDDEN`](sparse_gcn::nn::arch::MAX_HIDDEN).
pub(crate) fn hidden(s: &str) -> Result<usize, String> {
    count_to(
        s,
        sparse_gcn::nn::arch::MAX_HIDDEN,
        "the widest hidden layer accepted",
    )
}

/// `--k`: propagation steps, at most [`MAX_K`](sparse_gcn::nn::arch::MAX_K).
pub(crate) fn steps(s: &str) -> Result<usize, String> {
    count_to(
        s,
        sparse_gcn::nn::arch::MAX_K,
        "SGC uses 2 and APPNP 10 steps; each step is one SpMM",
    )
}

/// `--parts`, `--parts-per-batch`: at most 2²⁴ (and at most the nodes, checked with the data).
pub(crate) fn parts(s: &str) -> Result<usize, String> {
    count_to(s, 1 << 24, "parts of a graph")
}

/// `--batch-size`: at most 2²⁶ nodes, edges or walk roots a batch.
pub(crate) fn batch_size(s: &str) -> Result<usize, String> {
    count_to(s, 1 << 26, "nodes, edges or walk roots a batch")
}

/// `--fanout`: 0 (every neighbour) to 2²⁰.
pub(crate) fn fanout(s: &str) -> Result<usize, String> {
    zero_to(
        s,
        1 << 20,
        "neighbours drawn per node and hop; 0 takes them all",
    )
}

/// `--walk-length`: at most 10,000 steps.
pub(crate) fn walk_length(s: &str) -> Result<usize, String> {
    count_to(s, 10_000, "steps of a random walk")
}

/// `--batches-per-step`: at most 2¹⁶.
pub(crate) fn batches_per_step(s: &str) -> Result<usize, String> {
    count_to(s, 1 << 16, "batches whose gradients one step sums")
}

/// `--batches-per-epoch`: at most 2²⁴.
pub(crate) fn batches(s: &str) -> Result<usize, String> {
    count_to(s, 1 << 24, "batches an epoch")
}

/// `--saint-coverage`: 0 (no normalisation) to 10,000.
pub(crate) fn coverage(s: &str) -> Result<f64, String> {
    let v = non_negative(s)?;
    if v <= 1e4 {
        Ok(v)
    } else {
        Err("must be at most 10000 (node counts pre-sampled, in multiples of the nodes)".into())
    }
}

/// `--seeds`: at most [`MAX_SEEDS`].
pub(crate) fn seeds(s: &str) -> Result<usize, String> {
    count_to(s, MAX_SEEDS, "seeds of one run")
}

/// `--seed`: a whole number from 0 to [`MAX_SEED`].
pub(crate) fn seed(s: &str) -> Result<u64, String> {
    let v = s
        .trim()
        .parse::<u128>()
        .map_err(|_| "not a whole number".to_string())?;
    u64::try_from(v)
        .ok()
        .filter(|&v| v <= MAX_SEED)
        .ok_or_else(|| format!("must be at most {MAX_SEED} (seeds are exact JSON numbers)"))
}

/// `--epochs`, `--patience`: at most [`MAX_EPOCHS`].
pub(crate) fn epochs(s: &str) -> Result<usize, String> {
    count_to(s, MAX_EPOCHS, "epochs of one run")
}

/// `plan --ranks`: 1 to 65536 each.
pub(crate) fn ranks(s: &str) -> Result<usize, String> {
    count_to(s, 1 << 16, "ranks of a plan")
}

/// `--warmup`: 0 to [`MAX_EPOCHS`].
pub(crate) fn epochs_or_zero(s: &str) -> Result<usize, String> {
    zero_to(s, MAX_EPOCHS, "epochs of one run")
}

/// `--threads`: 0 (one per CPU) to [`MAX_THREADS`].
pub(crate) fn threads(s: &str) -> Result<usize, String> {
    zero_to(s, MAX_THREADS, "0 is one per CPU")
}

/// `--checkpoint-every`: 0 (off) to [`MAX_LAYERS`](sparse_gcn::nn::arch::MAX_LAYERS).
pub(crate) fn every(s: &str) -> Result<usize, String> {
    zero_to(s, sparse_gcn::nn::arch::MAX_LAYERS, "0 is off")
}

/// What is at `path`, when it is not a regular file (symbolic links followed).
pub(crate) fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    sparse_gcn::train::checkpoint::not_regular_kind(meta)
}

/// An output file whose folder exists and is writable; checked by creating and removing a
/// probe file next to it, so a run does not fail at the end on its `--save`. An existing path
/// must be a regular file (or a symbolic link to one: the file it points to is replaced, the
/// link kept); a device, a FIFO, a folder or a dangling link is refused.
pub(crate) fn writable_path(path: &Path) -> Result<PathBuf, String> {
    if path.as_os_str().is_empty() || path.file_name().is_none() {
        return Err("needs a file name".into());
    }
    match std::fs::metadata(path) {
        Ok(m) => {
            if let Some(kind) = not_regular(&m) {
                return Err(format!(
                    "exists and is {kind}, not a regular file; refusing to replace it"
                ));
            }
        }
        Err(_) if path.is_symlink() => {
            return Err("is a symbolic link to nothing; give a file name".into());
        }
        Err(_) => {}
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    if !dir.is_dir() {
        return Err(format!("the folder {} does not exist", dir.display()));
    }
    let probe = dir.join(format!(".sparse-gcn-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(path.to_path_buf())
        }
        Err(e) => Err(format!("cannot write in {}: {e}", dir.display())),
    }
}

/// An output file as [`writable_path`] whose name ends in one of `exts`.
pub(crate) fn output_with_ext(path: &Path, exts: &[&str]) -> Result<PathBuf, String> {
    let lower = path.as_os_str().to_string_lossy().to_ascii_lowercase();
    if !exts.iter().any(|e| lower.ends_with(e)) {
        return Err(format!("must end in {}", exts.join(" or ")));
    }
    writable_path(path)
}

/// The value parser of an output file (any bytes, not only UTF-8, as paths are): a file name
/// ending in one of its extensions (any name when there are none) that [`writable_path`]
/// accepts.
#[derive(Clone, Copy)]
pub(crate) struct Output(pub(crate) &'static [&'static str]);

/// Any file name.
pub(crate) const ANY_FILE: Output = Output(&[]);
/// `.csv` or `.npy`.
pub(crate) const CSV_OR_NPY: Output = Output(&[".csv", ".npy"]);
/// `.npy`.
pub(crate) const NPY: Output = Output(&[".npy"]);
/// `.csv`.
pub(crate) const CSV: Output = Output(&[".csv"]);

impl clap::builder::TypedValueParser for Output {
    type Value = PathBuf;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PathBuf, clap::Error> {
        let path = Path::new(value);
        let res = if self.0.is_empty() {
            writable_path(path)
        } else {
            output_with_ext(path, self.0)
        };
        res.map_err(|msg| {
            let flag = arg.map_or_else(|| "...".to_string(), ToString::to_string);
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "invalid value '{}' for '{flag}': {msg}\n",
                    value.to_string_lossy()
                ),
            )
            .with_cmd(cmd)
        })
    }
}

/// The flag whose value is the first argument of the command line that is not UTF-8 (for
/// clap's error on one, which names no flag).
pub(crate) fn non_utf8_flag(args: &[std::ffi::OsString]) -> String {
    let k = args.iter().position(|a| a.to_str().is_none());
    let Some(k) = k else {
        return "an argument".into();
    };
    let bytes = args[k].as_encoded_bytes();
    if bytes.starts_with(b"--") {
        let flag = bytes.split(|&b| b == b'=').next().unwrap_or(bytes);
        return String::from_utf8_lossy(flag).into_owned();
    }
    match k.checked_sub(1).and_then(|p| args[p].to_str()) {
        Some(prev) if prev.starts_with('-') => prev.to_string(),
        _ => format!("argument {k}"),
    }
}

/// `--memory-limit`: a size with a unit, at least 1 MiB.
pub(crate) fn memory_limit(s: &str) -> std::result::Result<u64, String> {
    match sparse_gcn::data::memory::parse_size(s) {
        Some(b) if b >= 1 << 20 => Ok(b),
        Some(_) => Err("at least 1MiB".into()),
        None => Err("a size with a unit, such as 64MiB or 12GiB (powers of 1024)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(rate("0.5"), Ok(0.5));
        assert_eq!(rate("0"), Ok(0.0));
        assert!(rate("1").is_err() && rate("1.5").is_err() && rate("-0.1").is_err());
        assert!(rate("NaN").is_err() && rate("x").is_err());
        assert_eq!(unit("1"), Ok(1.0));
        assert!(unit("1.01").is_err());
        assert!(positive("0").is_err() && positive("-1").is_err() && positive("inf").is_err());
        assert_eq!(positive("1e-3"), Ok(1e-3));
        assert_eq!(non_negative("0"), Ok(0.0));
        assert!(non_negative("-1e-9").is_err());
        assert_eq!(count("3"), Ok(3));
        assert!(count("0").is_err() && count("-1").is_err() && count("2.5").is_err());
        assert_eq!(fractions("0.6,0.2,0.2"), Ok([0.6, 0.2, 0.2]));
        let max = "18446744073709551615";
        for f in [layers, hidden, steps, seeds, epochs] {
            assert!(f(max).unwrap_err().contains("at most"));
            assert!(f("99999999999999999999999")
                .unwrap_err()
                .contains("at most"));
            assert_eq!(f("1"), Ok(1));
            assert!(f("0").is_err());
        }
        assert_eq!(threads("0"), Ok(0));
        assert!(threads("-1").is_err() && threads(max).is_err());
        assert_eq!(layers("1024"), Ok(1024));
        assert!(layers("1025").is_err());
        assert!(fractions("0.6,0.3,0.3").is_err() && fractions("0.5,0.5").is_err());
    }

    #[test]
    fn output_files() {
        let dir = std::env::temp_dir();
        let ok = dir.join("sparse-gcn-args-test.safetensors");
        assert_eq!(writable_path(&ok), Ok(ok.clone()));
        assert!(!ok.exists(), "the probe leaves nothing behind");
        let missing = dir.join("no-such-folder-9f3a/x.safetensors");
        let e = writable_path(&missing).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        assert!(writable_path(&dir).is_err());
        assert!(output_with_ext(&dir.join("p.txt"), CSV_OR_NPY.0).is_err());
        assert!(output_with_ext(&dir.join("p.NPY"), CSV_OR_NPY.0).is_ok());
        assert!(output_with_ext(&dir.join("p.csv"), NPY.0).is_err());
        assert!(output_with_ext(&dir.join("h.csv"), CSV.0).is_ok());
        let e = writable_path(Path::new("/dev/null")).unwrap_err();
        assert!(e.contains("a character device"), "{e}");
    }
}
