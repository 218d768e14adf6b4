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

/// An output file whose folder exists and is writable; checked by creating and removing a
/// probe file next to it, so a run does not fail at the end on its `--save`.
pub(crate) fn writable_file(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    if s.is_empty() || path.file_name().is_none() {
        return Err("needs a file name".into());
    }
    if path.is_dir() {
        return Err("is a folder; give a file name".into());
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
            Ok(path)
        }
        Err(e) => Err(format!("cannot write in {}: {e}", dir.display())),
    }
}

/// An output file as [`writable_file`] whose name ends in one of `exts`.
pub(crate) fn output_with_ext(s: &str, exts: &[&str]) -> Result<PathBuf, String> {
    let lower = s.to_ascii_lowercase();
    if !exts.iter().any(|e| lower.ends_with(e)) {
        return Err(format!("must end in {}", exts.join(" or ")));
    }
    writable_file(s)
}

/// `.csv` or `.npy`.
pub(crate) fn csv_or_npy(s: &str) -> Result<PathBuf, String> {
    output_with_ext(s, &[".csv", ".npy"])
}

/// `.npy`.
pub(crate) fn npy(s: &str) -> Result<PathBuf, String> {
    output_with_ext(s, &[".npy"])
}

/// `.csv`.
pub(crate) fn csv(s: &str) -> Result<PathBuf, String> {
    output_with_ext(s, &[".csv"])
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
        assert!(fractions("0.6,0.3,0.3").is_err() && fractions("0.5,0.5").is_err());
    }

    #[test]
    fn output_files() {
        let dir = std::env::temp_dir();
        let ok = dir.join("sparse-gcn-args-test.safetensors");
        assert_eq!(writable_file(ok.to_str().unwrap()), Ok(ok.clone()));
        assert!(!ok.exists(), "the probe leaves nothing behind");
        let missing = dir.join("no-such-folder-9f3a/x.safetensors");
        let e = writable_file(missing.to_str().unwrap()).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        assert!(writable_file(dir.to_str().unwrap()).is_err());
        assert!(csv_or_npy(dir.join("p.txt").to_str().unwrap()).is_err());
        assert!(csv_or_npy(dir.join("p.NPY").to_str().unwrap()).is_ok());
        assert!(npy(dir.join("p.csv").to_str().unwrap()).is_err());
        assert!(csv(dir.join("h.csv").to_str().unwrap()).is_ok());
    }
}
