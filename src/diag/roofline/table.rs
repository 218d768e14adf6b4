//! The report as text: [`RooflineReport::table`], the human-readable summary the `roofline`
//! command prints (the machine, the triad and sgemm rates, the cache model's miss fractions and
//! the orders' locality, then one row per width d with the gather bound, the SpMMs in each order
//! as milliseconds, GB/s and fractions of the bounds, the speedup and the in-cache floor).

use std::fmt::Write as _;

use super::{RooflineReport, SpmmReport};

impl RooflineReport {
    /// A human-readable table of the report.
    pub fn table(&self) -> String {
        let mut s = String::new();
        self.write_rates(&mut s);
        self.write_orders(&mut s);
        self.write_widths(&mut s);
        self.write_tiles(&mut s);
        s.push_str(LEGEND);
        s
    }

    /// The machine, the dataset, huge pages, and the triad and sgemm rates.
    fn write_rates(&self, s: &mut String) {
        let m = &self.machine;
        let _ = writeln!(
            s,
            "machine   {} ({} logical CPUs, {} threads), THP {}, load {} -> {}",
            m.cpu_model, m.logical_cpus, m.threads, m.thp_mode, m.load_before, m.load_after
        );
        let _ = writeln!(
            s,
            "dataset   {}: {} nodes, nnz(Â) {}; medians of {} reps after {} warm-up",
            self.dataset, self.n_nodes, self.nnz, self.reps, self.warmup
        );
        let _ = writeln!(
            s,
            "huge pages {} (advised: {}, AnonHugePages max {} KiB)",
            if self.huge_pages_requested {
                "requested"
            } else {
                "off"
            },
            self.huge_pages_advised,
            self.anon_huge_pages_kib_max
                .map_or("?".into(), |k| k.to_string())
        );
        let t = &self.triad;
        let _ = writeln!(
            s,
            "triad     {:.2} GB/s (best {:.2}) on 3 x {} MiB",
            t.gbs,
            t.gbs_best,
            (t.len * 4) >> 20
        );
        let f = &self.fma_peak;
        let _ = writeln!(
            s,
            "fma peak  {:.1} GFLOP/s on {} threads ({:.1} on one; {}, {} floats a vector)",
            f.gflops, f.threads, f.gflops_one, f.isa, f.lanes
        );
        if let Some(g) = &self.sgemm {
            let _ = writeln!(
                s,
                "sgemm     {:.1} GFLOP/s ({}x{}x{}, {:.1} ms): {:.0} % of the FMA peak",
                g.gflops,
                g.m,
                g.k,
                g.n,
                g.timing.median_s * 1e3,
                100.0 * self.sgemm_fma_fraction.unwrap_or(0.0)
            );
        }
    }

    /// The cache model's misses and the orders' locality.
    fn write_orders(&self, s: &mut String) {
        let (lr, lo) = (&self.locality_random, &self.locality_reordered);
        if let Some(lc) = &self.locality_class {
            let _ = writeln!(
                s,
                "class     order (diagnostic, reads the labels): mean |i-j|/n {:.3}, within ±{} rows {:.1}%",
                lc.mean_gap,
                lc.window,
                100.0 * lc.near_fraction
            );
        }
        let _ = writeln!(
            s,
            "model     LRU cache of {} MiB: misses of the SpMM's row gathers, random -> {}{}: {}",
            self.cache_bytes >> 20,
            self.reorder,
            if self.locality_class.is_some() {
                " -> class"
            } else {
                ""
            },
            self.dims
                .iter()
                .map(|r| {
                    let m = &r.miss_model;
                    let c = m
                        .class_order
                        .map_or(String::new(), |c| format!(" -> {:.1}%", 100.0 * c));
                    format!(
                        "d={} {:.1}% -> {:.1}%{}",
                        r.d,
                        100.0 * m.random,
                        100.0 * m.reordered,
                        c
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            s,
            "order     {} computed in {:.2} s; mean |i-j|/n {:.3} -> {:.3}, within ±{} rows {:.1}% -> {:.1}%\n\
             gather    GB/s of gathered rows: uniformly random indices (the bound: the faster of \
             plain / prefetched), and `pattern`: the random-order Â's own indices",
            self.reorder,
            self.reorder_s,
            lr.mean_gap,
            lo.mean_gap,
            lr.window,
            100.0 * lr.near_fraction,
            100.0 * lo.near_fraction
        );
    }

    /// One row per width d: the gather bound, the SpMM in each order, the in-cache floor.
    fn write_widths(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "{:>5} | {:>22} | {:>7} | {:>32} | {:>32} | {:>7} | {:>11}{}",
            "d",
            "gather GB/s (plain/pf)",
            "pattern",
            "SpMM random: ms GB/s %gath %tri",
            format!("SpMM {}: ms GB/s %gath %tri", self.reorder),
            "speedup",
            "in-cache ms",
            if self.locality_class.is_some() {
                " | class order: ms speedup"
            } else {
                ""
            }
        );
        for r in &self.dims {
            let g = &r.gather;
            let cell = |x: &SpmmReport| {
                format!(
                    "{:8.2} {:6.2} {:6.0}% {:5.0}%",
                    x.timing.median_s * 1e3,
                    x.gbs,
                    100.0 * x.frac_gather,
                    100.0 * x.frac_triad
                )
            };
            let class = match (&r.class_order, r.class_speedup) {
                (Some(c), Some(x)) => {
                    format!(" | {:>15.2} {:>7.2}x", c.timing.median_s * 1e3, x)
                }
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "{:>5} | {:>8.2} ({:>5.2}/{:>5.2}) | {:>7.2} | {:>32} | {:>32} | {:>6.2}x | {:>11.2}{}",
                r.d,
                g.gbs,
                g.gbs_plain,
                g.gbs_prefetch,
                r.gather_pattern.gbs,
                cell(&r.random),
                cell(&r.reordered),
                r.speedup,
                r.in_cache.timing.median_s * 1e3,
                class
            );
        }
    }

    /// The column tiles, where they were measured.
    fn write_tiles(&self, s: &mut String) {
        for r in &self.dims {
            if let (Some(rt), Some(ot)) = (&r.random_tiled, &r.reordered_tiled) {
                let _ = writeln!(
                    s,
                    "tiles     d={}: {} column tiles of {}: random {:.2} ms ({:.2}x untiled), {} {:.2} ms ({:.2}x)",
                    r.d,
                    r.d.div_ceil(r.tile),
                    r.tile,
                    rt.timing.median_s * 1e3,
                    r.random.timing.median_s / rt.timing.median_s.max(f64::MIN_POSITIVE),
                    self.reorder,
                    ot.timing.median_s * 1e3,
                    r.reordered.timing.median_s / ot.timing.median_s.max(f64::MIN_POSITIVE),
                );
            }
        }
    }
}

/// What each figure of the table is, printed under it.
const LEGEND: &str = "\
reading the table:
  triad     the stream triad a[i] = b[i] + s*c[i] over arrays far larger than the caches: the
            rate at which this machine streams memory sequentially (its bandwidth ceiling).
  gather    the rate of reading d-wide rows at uniformly random indices, each row from memory:
            the bound for an SpMM whose neighbour rows are never in cache.
  SpMM GB/s bytes the SpMM must move once (nnz × (4d + 8) for the gathered rows and the
            indices and values, plus the row pointers and the n × d output), per second.
  %gath     SpMM GB/s as a percentage of the gather bound, %tri of the triad. Above 100 % is
            not an error: in a good node order many gathered rows are still in cache from a
            nearby row's gathers (reuse), so fewer bytes come from memory than are counted.
  tiles     where X is over half the cache: the same SpMMs in column tiles that fit it (one
            pass over the matrix per tile); the speedup over untiled (below 1: slower).
  in-cache  the same SpMM with every gather from the first rows of X (always in cache): the
            floor no node order can beat; the reordered SpMM's distance to it is what is left.
";
