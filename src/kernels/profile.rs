//! `profile`: where an epoch's time goes, kernel by kernel (the record behind
//! `sparse-gcn roofline --epoch`).
//!
//! Off by default: then a [`span`] costs one relaxed atomic load and nothing is recorded. When
//! [`Recording`] is alive, every outermost span records its [`Phase`], its [`Work`] (the shape
//! or the bytes that give its floor) and its wall time; spans started while another one is
//! open (the GEMMs of a weight gradient's chunks, on any thread) are part of the outer one and
//! record nothing. Recording is for one model trained at a time (what the roofline does): the
//! records of concurrent runs would mix.
//!
//! Records go to a vector reserved when the recording starts ([`Recording::start`]), so a
//! recorded epoch allocates only if it has more spans than reserved.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What part of an epoch a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Dense products `H·W`, `G·Wᵀ` ([`gemm`](super::gemm())).
    Gemm,
    /// Products with Â or Âᵀ ([`spmm`](super::spmm())).
    Spmm,
    /// Weight gradients `Hᵀ·G` summed across nodes: GEMMs per chunk combined exactly.
    WeightGrad,
    /// Other sums across nodes (bias gradients, statistics), combined exactly.
    Reduce,
    /// Element-wise passes: bias, ReLU, dropout and their backward.
    Elementwise,
    /// The loss and its gradient.
    Loss,
    /// The optimiser's update.
    Optimizer,
}

impl Phase {
    /// Every phase, in the order of the report.
    pub const ALL: [Phase; 7] = [
        Phase::Gemm,
        Phase::Spmm,
        Phase::WeightGrad,
        Phase::Reduce,
        Phase::Elementwise,
        Phase::Loss,
        Phase::Optimizer,
    ];

    /// The phase's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Gemm => "gemm",
            Phase::Spmm => "spmm",
            Phase::WeightGrad => "weight-grad",
            Phase::Reduce => "reduce",
            Phase::Elementwise => "elementwise",
            Phase::Loss => "loss",
            Phase::Optimizer => "optimizer",
        }
    }
}

/// The work of a span, from which its floor follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// An (m × k)·(k × n) product: 2·m·k·n flops.
    Gemm {
        /// Rows of the result.
        m: usize,
        /// Inner dimension.
        k: usize,
        /// Columns of the result.
        n: usize,
    },
    /// A sparse (rows × ·) matrix with `nnz` non-zeros times `d` dense columns.
    Spmm {
        /// Rows of the sparse matrix.
        rows: usize,
        /// Its non-zeros.
        nnz: usize,
        /// Dense columns.
        d: usize,
    },
    /// A pass that must read and write at least `bytes` of memory.
    Stream {
        /// Bytes read plus bytes written.
        bytes: usize,
    },
}

/// One recorded span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    /// Its phase.
    pub phase: Phase,
    /// Its work.
    pub work: Work,
    /// Wall time, seconds.
    pub seconds: f64,
}

static ON: AtomicBool = AtomicBool::new(false);
static OPEN: AtomicUsize = AtomicUsize::new(0);
static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());

fn records() -> std::sync::MutexGuard<'static, Vec<Record>> {
    RECORDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// An open span; records itself when dropped (see the [module docs](self)).
#[must_use = "a span records when it is dropped"]
pub struct Span(State);

enum State {
    /// Not recording.
    Off,
    /// Inside another span: counted open, records nothing.
    Nested,
    /// The outermost span.
    Outer(Instant, Phase, Work),
}

/// Opens a span of `phase` doing `work` (evaluated only while recording).
#[inline]
pub fn span(phase: Phase, work: impl FnOnce() -> Work) -> Span {
    if !ON.load(Ordering::Relaxed) {
        return Span(State::Off);
    }
    if OPEN.fetch_add(1, Ordering::AcqRel) > 0 {
        return Span(State::Nested);
    }
    Span(State::Outer(Instant::now(), phase, work()))
}

impl Drop for Span {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.0, State::Off) {
            State::Off => {}
            State::Nested => {
                OPEN.fetch_sub(1, Ordering::AcqRel);
            }
            State::Outer(t0, phase, work) => {
                let seconds = t0.elapsed().as_secs_f64();
                OPEN.fetch_sub(1, Ordering::AcqRel);
                records().push(Record {
                    phase,
                    work,
                    seconds,
                });
            }
        }
    }
}

/// Recording in progress; [`Recording::finish`] (or dropping it) stops it.
pub struct Recording(());

impl Recording {
    /// Starts recording, with room for `capacity` records.
    pub fn start(capacity: usize) -> Recording {
        let mut r = records();
        r.clear();
        r.reserve(capacity);
        ON.store(true, Ordering::Release);
        Recording(())
    }

    /// Takes the records so far (recording goes on).
    pub fn take(&self) -> Vec<Record> {
        std::mem::take(&mut *records())
    }

    /// Stops recording and returns the records.
    pub fn finish(self) -> Vec<Record> {
        ON.store(false, Ordering::Release);
        self.take()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        ON.store(false, Ordering::Release);
    }
}
