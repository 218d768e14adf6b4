//! An epoch over mini-batches, whatever builds them (a subgraph a batch, or a stack of blocks):
//! the batches grouped into steps of `batches_per_step`, each process of a data-parallel run
//! training its share of every step, the gradients of a step's batches summed exactly across
//! batches and processes, then one update (`docs/MATH.md` §24).
//!
//! A step of B batches on P processes (P dividing B): process r trains the step's batches
//! r·B/P … (r+1)·B/P − 1 (a shorter last step: those of them that exist). Each batch is a
//! function of (seed, epoch, index) alone — its nodes, and at several batches a step its
//! dropout masks ([`batch_rng`]; at one batch a step, P = 1, they come from
//! the run's dropout stream, batch after batch, as full batch's do epoch after epoch) — so it is
//! the same bits on whichever process trains it.
//! Its gradient (rounded as one batch's pass rounds it) is added exactly into one accumulator
//! per parameter scalar; the accumulators' integer words are summed across the processes
//! ([`Collective::sum_words`]), and the step's gradient is their sum, rounded once to `f64`,
//! divided by the batches that trained, rounded to the parameter's type: the same bits for any
//! P dividing B as one process training the B batches in turn. The step's training loss
//! (weighted by the batches' training rows), correct predictions and rows travel in the same
//! exchange. One batch a step in one process sums nothing: its gradient is used as it is (the
//! same bits as the sum of one gradient).

use std::ops::Range;
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;

use super::steps::{BatchStats, LossFn};
use crate::data::Mask;
use crate::graph::Collective;
use crate::nn::Model;
use crate::optim::Optimizer;
use crate::scalar::exact::{Accumulator, ExactSum};
use crate::{ConfigError, Error, Par, Result, Scalar};

/// The dropout RNG of batch `index` of `epoch` for `seed` (stream 2³⁴ + epoch, from word
/// index·2⁴⁰): a function of the batch alone, so that whichever process of a data-parallel
/// run trains it draws the same masks. Apart from the streams of initialisation, dropout and
/// DropEdge (0 to 2) and of the samplers (2³² + epoch, 2³³ + epoch, 3·2³²).
pub(crate) fn batch_rng(seed: u64, epoch: usize, index: usize) -> ChaCha8Rng {
    let mut r = super::rng_stream(seed, (1 << 34) + epoch as u64);
    r.set_word_pos((index as u128) << 40);
    r
}

/// `r`, agreed by every process of `replicas`: an error on any of them is an error on all
/// (on the others an [`Error::Distributed`] saying so), so that no process waits for an
/// exchange a failed one will not make. One process: `r`.
///
/// # Errors
/// `r`'s, or another process's failure.
pub fn agree<T>(replicas: Option<super::Replicas<'_>>, r: Result<T>) -> Result<T> {
    match replicas {
        Some(c) if c.0.spans_processes() && !c.0.all(r.is_ok()) => {
            Err(r.err().unwrap_or_else(|| {
                Error::Distributed("another process failed (its error is in its output)".into())
            }))
        }
        _ => r,
    }
}

/// A training batch, as an epoch's loop reads it.
pub(super) trait Slot<F: Scalar>: Send + Sync {
    /// Nodes and edges (or blocks' entries) of the batch, for [`BatchStats`].
    fn size(&self) -> (usize, usize);
    /// The labels of the rows the model outputs, the rows the loss reads, and the loss's
    /// weight of each row (GraphSAINT's normalisation) when it has them.
    fn targets(&self) -> (&[u32], &Mask, Option<&[F]>);
    /// A training pass of `model` over the batch through `loss`, dropout masks from `rng`.
    ///
    /// # Errors
    /// As the model's training pass.
    fn pass(
        &self,
        model: &mut Model<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut LossFn<'_, F>,
    ) -> Result<()>;
}

/// Which batches of an epoch a process trains, step by step (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Schedule {
    /// Batches a step (B).
    per_step: usize,
    /// This process (r).
    rank: usize,
    /// Processes (P, dividing B).
    ranks: usize,
}

impl Schedule {
    /// The schedule of process `rank` of `ranks` at `per_step` batches a step.
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] when `per_step` is 0 or not a multiple of `ranks`.
    pub(super) fn new(per_step: usize, rank: usize, ranks: usize) -> Result<Schedule> {
        if per_step == 0 || ranks == 0 || !per_step.is_multiple_of(ranks) || rank >= ranks {
            return Err(Error::Config(ConfigError::OutOfRange {
                name: "batches_per_step",
                value: per_step as f64,
                rule: "at least 1, and a multiple of the processes (each trains an equal share \
                       of a step's batches)",
            }));
        }
        Ok(Schedule {
            per_step,
            rank,
            ranks,
        })
    }

    /// Steps of an epoch of `n` batches.
    pub(super) fn steps(&self, n: usize) -> usize {
        n.div_ceil(self.per_step)
    }

    /// The batches of step `step` (of an epoch of `n`) this process trains.
    pub(super) fn own(&self, step: usize, n: usize) -> Range<usize> {
        let start = (step * self.per_step).min(n);
        let len = self.per_step.min(n - start);
        let share = self.per_step / self.ranks;
        let lo = (self.rank * share).min(len);
        let hi = ((self.rank + 1) * share).min(len);
        start + lo..start + hi
    }

    /// The batch this process trains after batch `index` of step `step` (the first of the
    /// epoch for `None`), if any.
    fn after(&self, at: Option<(usize, usize)>, n: usize) -> Option<usize> {
        let from = match at {
            Some((step, index)) if index + 1 < self.own(step, n).end => return Some(index + 1),
            Some((step, _)) => step + 1,
            None => 0,
        };
        (from..self.steps(n))
            .map(|s| self.own(s, n))
            .find(|r| !r.is_empty())
            .map(|r| r.start)
    }
}

/// A step's (or an epoch's) training totals: Σ loss × rows, correct predictions, rows, the
/// batches that trained, and the processes that failed.
#[derive(Debug, Clone, Default)]
struct Totals {
    loss: ExactSum,
    correct: i64,
    rows: i64,
    batches: i64,
    /// Processes that failed in the step (building or training a batch).
    errors: i64,
}

impl Totals {
    fn add(&mut self, loss: f64, acc: f64, rows: usize) {
        let w = rows as f64;
        self.loss.add(loss * w);
        self.correct += (acc * w).round() as i64;
        self.rows += rows as i64;
        self.batches += 1;
    }

    fn merge(&mut self, o: &Totals) {
        self.loss.merge(&o.loss);
        self.correct += o.correct;
        self.rows += o.rows;
        self.batches += o.batches;
    }
}

/// Words of a step's totals in an exchange.
const TOTAL_WORDS: usize = ExactSum::WORDS + 4;

/// An epoch's loop over batches, step by step (see the [module docs](self)).
pub(super) struct Stepper<'a, F: Scalar> {
    schedule: Schedule,
    /// The processes the steps' sums are exchanged with (`None`: one process).
    replicas: Option<&'a dyn Collective>,
    seed: u64,
    /// One exact sum a parameter scalar (empty when nothing is summed: one batch a step in one
    /// process).
    grads: Vec<F::Exact>,
    /// The words of an exchange.
    words: Vec<i64>,
    /// The sizes of the batches this process built.
    pub(super) stats: BatchStats,
}

impl<'a, F: Scalar> Stepper<'a, F> {
    /// The loop of a run of `model` with `seed` at `per_step` batches a step, across
    /// `replicas` when given (this process's share of each step).
    ///
    /// # Errors
    /// As [`Schedule::new`]; [`ConfigError::Unsupported`] for several batches a step and a
    /// model that keeps running statistics (batch norm: they would follow each process's
    /// batches); [`Error::TooLarge`] when the sums do not fit.
    pub(super) fn new(
        model: &mut Model<F>,
        per_step: usize,
        replicas: Option<super::Replicas<'a>>,
        seed: u64,
        batches_per_epoch: usize,
    ) -> Result<Self> {
        let replicas = replicas.map(|r| r.0);
        let (rank, ranks) = replicas.map_or((0, 1), |c| c.process());
        let schedule = Schedule::new(per_step, rank, ranks)?;
        let mut stats = false;
        model.visit_named(&mut |_, v| stats |= matches!(v, crate::nn::Named::Stat(_)));
        if per_step > 1 && stats {
            return Err(Error::Config(ConfigError::Unsupported {
                what: "several batches a step with a model that keeps running statistics \
                       (batch norm: each process would follow its own batches)",
            }));
        }
        let spans = replicas.is_some_and(|c| c.spans_processes());
        let n = if per_step > 1 || spans {
            model.n_params()
        } else {
            0
        };
        let words = if spans {
            n * <F::Exact as Accumulator>::WORDS + TOTAL_WORDS
        } else {
            0
        };
        // (The exchange's words, and as many in the collective's send buffer.)
        let bytes = crate::data::memory::bytes(n, std::mem::size_of::<F::Exact>())
            + crate::data::memory::bytes(words, 16);
        crate::data::memory::check(bytes, || {
            format!("the exact sums of {n} gradient values across a step's batches")
        })?;
        Ok(Stepper {
            schedule,
            replicas,
            seed,
            grads: vec![F::Exact::default(); n],
            words: vec![0; words],
            stats: BatchStats {
                batches_per_epoch,
                ..BatchStats::default()
            },
        })
    }

    /// The training steps of `epoch` over `n` batches built by `fill(slot, index)` into the
    /// two slots (the next built while the current trains), dropout masks from `drop_rng`
    /// batch after batch at one batch a step, from each batch's own stream
    /// ([`batch_rng`]) at several: the training loss and accuracy
    /// (over every process's batches, weighted by their training rows) and the ms this
    /// process spent building batches.
    ///
    /// # Errors
    /// As `fill` and the batches' passes; [`Error::NonFiniteLoss`] when a step's loss is not
    /// finite (on every process at the same step).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn epoch<S: Slot<F>>(
        &mut self,
        slots: (&mut S, &mut S),
        fill: &(dyn Fn(&mut S, usize) -> Result<()> + Sync),
        n: usize,
        model: &mut Model<F>,
        opt: &mut dyn Optimizer<F>,
        (epoch, drop_rng): (usize, &mut ChaCha8Rng),
        par: Par,
    ) -> Result<(f64, f64, f64)> {
        let (mut batch, mut next) = slots;
        let sched = self.schedule;
        let mut sampling = Duration::ZERO;
        // The first error of building or training a batch, given to the step's exchange so
        // that every process stops at the end of the same step.
        let mut failed: Option<Error> = None;
        if let Some(first) = sched.after(None, n) {
            let t = Instant::now();
            failed = fill(batch, first).err();
            sampling += t.elapsed();
        }
        let mut total = Totals::default();
        for step in 0..sched.steps(n) {
            let mut t = Totals::default();
            for index in sched.own(step, n) {
                if failed.is_some() {
                    break;
                }
                let (nodes, edges) = batch.size();
                self.stats.add(nodes, edges);
                let after = sched.after(Some((step, index)), n);
                let current: &S = batch;
                let (seed, grads) = (self.seed, &mut self.grads);
                let per_batch_rng = sched.per_step > 1;
                let (built, trained) = par.join(
                    || {
                        after.map(|j| {
                            let t = Instant::now();
                            (fill(next, j), t.elapsed())
                        })
                    },
                    || {
                        let (labels, rows, weights) = current.targets();
                        if rows.is_empty() {
                            return Ok(None);
                        }
                        // (One batch a step: the run's dropout stream, drawn batch after
                        // batch; several: each batch's own.)
                        let mut own;
                        let rng = if per_batch_rng {
                            own = batch_rng(seed, epoch, index);
                            &mut own
                        } else {
                            &mut *drop_rng
                        };
                        let pass = &mut |m: &mut Model<F>, loss: &mut LossFn<'_, F>| {
                            current.pass(m, rng, par, loss)
                        };
                        let out = super::steps::grads(model, labels, rows, weights, pass)?;
                        add_grads(model, grads);
                        Ok::<_, Error>(Some((out, rows.len())))
                    },
                );
                match trained {
                    Ok(Some(((loss, acc), rows))) => t.add(loss, acc, rows),
                    Ok(None) => {}
                    Err(e) => failed = Some(e),
                }
                if let Some((r, dt)) = built {
                    sampling += dt;
                    match r {
                        Ok(()) => std::mem::swap(&mut batch, &mut next),
                        Err(e) => {
                            failed.get_or_insert(e);
                        }
                    }
                }
            }
            t.errors = i64::from(failed.is_some());
            self.finish(&mut t, model, opt, epoch)
                .map_err(|e| failed.take().unwrap_or(e))?;
            total.merge(&t);
        }
        // (No training rows in any batch: no loss, as a pass over no rows has none.)
        let loss = match total.rows {
            0 => f64::NAN,
            rows => total.loss.value() / rows as f64,
        };
        let rows = total.rows.max(1) as f64;
        Ok((
            loss,
            total.correct as f64 / rows,
            sampling.as_secs_f64() * 1e3,
        ))
    }

    /// [`agree`] across this loop's processes.
    ///
    /// # Errors
    /// As [`agree`].
    pub(super) fn agree<T>(&self, r: Result<T>) -> Result<T> {
        agree(self.replicas.map(super::Replicas), r)
    }

    /// The end of a step: its sums exchanged across the processes, its gradient written into
    /// the model (when summed), one update; an error when a process failed in it.
    fn finish(
        &mut self,
        t: &mut Totals,
        model: &mut Model<F>,
        opt: &mut dyn Optimizer<F>,
        epoch: usize,
    ) -> Result<()> {
        if let Some(c) = self.replicas.filter(|c| c.spans_processes()) {
            let w = <F::Exact as Accumulator>::WORDS;
            let (g, rest) = self.words.split_at_mut(self.grads.len() * w);
            for (acc, out) in self.grads.iter().zip(g.chunks_exact_mut(w)) {
                acc.to_words(out);
            }
            let (lw, counts) = rest.split_at_mut(ExactSum::WORDS);
            t.loss.to_words(lw);
            counts.copy_from_slice(&[t.correct, t.rows, t.batches, t.errors]);
            c.sum_words(&mut self.words);
            let (g, rest) = self.words.split_at(self.grads.len() * w);
            for (acc, words) in self.grads.iter_mut().zip(g.chunks_exact(w)) {
                *acc = F::Exact::from_words(words);
            }
            let (lw, counts) = rest.split_at(ExactSum::WORDS);
            t.loss = ExactSum::from_words(lw);
            (t.correct, t.rows, t.batches) = (counts[0], counts[1], counts[2]);
            t.errors = counts[3];
        }
        if t.errors > 0 {
            // (This process's own error replaces this one in `epoch`.)
            return Err(Error::Distributed(format!(
                "{} process(es) failed in a step of epoch {epoch}",
                t.errors
            )));
        }
        if t.batches == 0 {
            return Ok(());
        }
        let loss = t.loss.value() / t.rows.max(1) as f64;
        if !loss.is_finite() {
            return Err(Error::NonFiniteLoss { epoch, loss });
        }
        if !self.grads.is_empty() {
            let batches = t.batches as f64;
            let mut k = 0;
            model.visit_params(&mut |_, p| {
                for g in p.grad.iter_mut() {
                    *g = F::from_f64_lossy(self.grads[k].take_value() / batches);
                    self.grads[k] = F::Exact::default();
                    k += 1;
                }
            });
        }
        super::steps::update(model, opt);
        Ok(())
    }
}

/// The bytes the ranks of a data-parallel run hand MPI over `steps` steps of a model of
/// `params` scalars (`f32`), summed over the `ranks` (nothing in a 1-rank job): each step
/// all-reduces every gradient's exact words and the step's totals.
pub fn data_parallel_bytes(params: u64, steps: u64, ranks: usize) -> u64 {
    if ranks <= 1 {
        return 0;
    }
    let words = params * <<f32 as Scalar>::Exact as Accumulator>::WORDS as u64 + TOTAL_WORDS as u64;
    8 * words * steps * ranks as u64
}

/// Adds `model`'s gradients exactly into `sums` (one a parameter scalar, in
/// [`Model::visit_params`] order); nothing when `sums` is empty.
fn add_grads<F: Scalar>(model: &mut Model<F>, sums: &mut [F::Exact]) {
    if sums.is_empty() {
        return;
    }
    let mut k = 0;
    model.visit_params(&mut |_, p| {
        for &g in p.grad.iter() {
            sums[k].add(g.to_f64_lossless());
            k += 1;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Features;
    use crate::graph::NormAdj;

    /// A batch of the whole graph whose pass leaves `grad` in every gradient.
    struct Fixed<'a> {
        adj: &'a NormAdj<f32>,
        x: &'a Features<f32>,
        labels: Vec<u32>,
        rows: Mask,
        grad: f32,
    }

    impl Slot<f32> for Fixed<'_> {
        fn size(&self) -> (usize, usize) {
            (self.labels.len(), 0)
        }
        fn targets(&self) -> (&[u32], &Mask, Option<&[f32]>) {
            (&self.labels, &self.rows, None)
        }
        fn pass(
            &self,
            model: &mut Model<f32>,
            rng: &mut ChaCha8Rng,
            par: Par,
            loss: &mut LossFn<'_, f32>,
        ) -> Result<()> {
            model.train_pass(self.adj, self.x, rng, par, loss)?;
            model.visit_params(&mut |_, p| p.grad.fill(self.grad));
            Ok(())
        }
    }

    /// Every parameter's change over an epoch of `grads.len()` batches whose gradients are
    /// `grads`, at `per_step` batches a step, by SGD at rate 1, on `replicas` (building batch
    /// `fail_at` fails).
    fn train(
        grads: &[f32],
        per_step: usize,
        replicas: Option<&dyn Collective>,
        fail_at: Option<usize>,
    ) -> Result<Vec<f32>> {
        let (adj, x) = crate::testing::harness::citation();
        let n = adj.n_nodes();
        let cfg = crate::nn::ModelConfig {
            in_dim: x.n_cols(),
            out_dim: 3,
            dropout: 0.0,
            ..Default::default()
        };
        let mut model = cfg
            .build(&adj, &x, None, &mut crate::testing::harness::rng(1))
            .unwrap();
        let mut before = Vec::new();
        model.visit_params(&mut |_, p| before.extend(p.value.iter().copied()));
        let slot = || Fixed {
            adj: &adj,
            x: &x,
            labels: (0..n as u32).map(|v| v % 3).collect(),
            rows: Mask::try_from_indices((0..n as u32).step_by(7).collect(), n).unwrap(),
            grad: 0.0,
        };
        let (mut a, mut b) = (slot(), slot());
        let fill = |s: &mut Fixed<'_>, index: usize| {
            if fail_at == Some(index) {
                return Err(Error::Config(ConfigError::ZeroCount("a batch")));
            }
            s.grad = grads[index];
            Ok(())
        };
        let mut opt = crate::optim::Sgd {
            lr: 1.0,
            weight_decay: vec![0.0],
        };
        let replicas = replicas.map(super::super::Replicas);
        let k = grads.len();
        let mut stepper = Stepper::new(&mut model, per_step, replicas, 0, k)?;
        let mut rng = crate::train::rng_stream(0, 1);
        let slots = (&mut a, &mut b);
        let at = (0, &mut rng);
        let (loss, acc, _) = stepper.epoch(slots, &fill, k, &mut model, &mut opt, at, Par::Seq)?;
        assert!(loss.is_finite() && (0.0..=1.0).contains(&acc));
        let mut after = Vec::new();
        model.visit_params(&mut |_, p| after.extend(p.value.iter().copied()));
        Ok(before.iter().zip(&after).map(|(b, a)| b - a).collect())
    }

    #[test]
    fn a_step_applies_the_mean_of_its_batches_gradients() {
        // A step a batch: 1 + 2 + 4; two a step: (1 + 2) / 2 + 4; three: 7 / 3.
        for (per_step, total) in [(1, 7.0f32), (2, 5.5), (3, 7.0 / 3.0), (4, 7.0 / 3.0)] {
            let c = train(&[1.0, 2.0, 4.0], per_step, None, None).unwrap();
            let worst = c.iter().map(|d| (d - total).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-5, "{per_step}: {worst} off {total}");
        }
    }

    #[test]
    fn results_are_agreed_by_every_rank() {
        let ok = |v: u32| Ok::<u32, Error>(v);
        let bad = || Err::<u32, Error>(Error::Config(ConfigError::ZeroCount("x")));
        // One process, or none: the result as it is.
        assert_eq!(agree(None, ok(3)).unwrap(), 3);
        let local = crate::graph::Local;
        assert_eq!(
            agree(Some(super::super::Replicas(&local)), ok(4)).unwrap(),
            4
        );
        assert!(matches!(agree(None, bad()), Err(Error::Config(_))));
        // Two ranks: success only when both succeed; the failed rank keeps its own error.
        let run = |fail: [bool; 2]| -> Vec<Result<u32>> {
            std::thread::scope(|s| {
                let hs: Vec<_> = crate::testing::ThreadRanks::new(2)
                    .into_iter()
                    .zip(fail)
                    .map(|(r, f)| {
                        s.spawn(move || {
                            let mine = if f { bad() } else { ok(5) };
                            agree(Some(super::super::Replicas(&r)), mine)
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            })
        };
        assert!(run([false, false]).iter().all(|r| matches!(r, Ok(5))));
        let one = run([false, true]);
        assert!(matches!(one[0], Err(Error::Distributed(_))), "{one:?}");
        assert!(matches!(one[1], Err(Error::Config(_))), "{one:?}");
        let both = run([true, true]);
        assert!(both.iter().all(|r| matches!(r, Err(Error::Config(_)))));
    }

    #[test]
    fn a_batch_that_fails_on_one_rank_stops_every_rank_at_the_end_of_its_step() {
        // Two ranks, two batches a step: rank 1 trains batches 1 and 3; building batch 3 (its
        // next, while batch 1 trains) fails, so both stop after step 0.
        let grads = [1.0, 2.0, 4.0, 8.0];
        let out: Vec<Result<Vec<f32>>> = std::thread::scope(|s| {
            let hs: Vec<_> = crate::testing::ThreadRanks::new(2)
                .into_iter()
                .map(|r| s.spawn(move || train(&grads, 2, Some(&r), Some(3))))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        match (&out[0], &out[1]) {
            (Err(Error::Distributed(m)), Err(Error::Config(_))) => assert!(m.contains("1 process")),
            other => panic!("{other:?}"),
        }
        // Without the failure: the same change on both ranks, and as in one process.
        let one = train(&grads, 2, None, None).unwrap();
        let both: Vec<Vec<f32>> = std::thread::scope(|s| {
            let hs: Vec<_> = crate::testing::ThreadRanks::new(2)
                .into_iter()
                .map(|r| s.spawn(move || train(&grads, 2, Some(&r), None).unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(both.iter().all(|c| *c == one));
        // One process: the error itself.
        assert!(matches!(
            train(&grads, 2, None, Some(2)),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn schedules_share_every_step_and_cover_each_batch_once() {
        for (per_step, ranks) in [(1, 1), (4, 1), (4, 2), (4, 4), (6, 3)] {
            for n in [1, 3, 4, 7, 13] {
                let mut seen = vec![0; n];
                let mut order = Vec::new();
                for rank in 0..ranks {
                    let s = Schedule::new(per_step, rank, ranks).unwrap();
                    let mut at = s.after(None, n);
                    let mut walked = Vec::new();
                    for step in 0..s.steps(n) {
                        let own = s.own(step, n);
                        assert!(own.len() <= per_step / ranks);
                        assert!(own.start >= step * per_step && own.end <= (step + 1) * per_step);
                        for i in own {
                            seen[i] += 1;
                            assert_eq!(at, Some(i), "prefetch order");
                            walked.push(i);
                            at = s.after(Some((step, i)), n);
                        }
                    }
                    assert_eq!(at, None);
                    order.extend(walked);
                }
                assert!(
                    seen.iter().all(|&c| c == 1),
                    "{per_step} {ranks} {n}: {seen:?}"
                );
                assert_eq!(order.len(), n);
            }
        }
        let s = Schedule::new(4, 1, 2).unwrap();
        assert_eq!((s.own(0, 10), s.own(2, 10)), (2..4, 10..10));
        assert_eq!(Schedule::new(4, 0, 2).unwrap().own(2, 10), 8..10);
        assert_eq!(s.steps(10), 3);
        for (b, r, p) in [(0, 0, 1), (3, 0, 2), (4, 2, 2), (4, 0, 0)] {
            assert!(Schedule::new(b, r, p).is_err(), "{b} {r} {p}");
        }
    }
}
