//! Passes over stacks of bipartite blocks (neighbour sampling): the workspace planned per
//! level ([`Model::reserve_blocks`]), a training pass ([`Model::train_blocks`]) and an
//! evaluation pass ([`Model::eval_blocks`]); each layer reaches its block, or its level's rows
//! ([`LevelRows`]), through [`Graphs::Blocks`].

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::exec::{Graphs, Workspace};
use super::{MaskStreams, Model};
use crate::graph::{LevelRows, Propagate, Sums};
use crate::input::Features;
use crate::{ConfigError, Par, Result, Scalar};

impl<F: Scalar> Model<F> {
    /// The workspace of a pass over the stack of `blocks` on `x`, after checking that their
    /// shapes chain (block l's sources are level l's rows, its destinations level l + 1's and
    /// no more than its sources; that the destinations are the first sources is the caller's
    /// contract, as `NeighborSampler` builds them), that `x` has the first block's sources,
    /// and that every block has the operations the layers use; with each level's rows.
    fn blocks_workspace(
        &mut self,
        blocks: &[&dyn Propagate<F>],
        x: &Features<F>,
        eval: bool,
    ) -> Result<(Box<Workspace<F>>, Vec<LevelRows>)> {
        let Some(first) = blocks.first() else {
            return Err(crate::Error::Config(ConfigError::ZeroCount("blocks")));
        };
        let mut rows = vec![first.shape().1];
        for (l, b) in blocks.iter().enumerate() {
            let (dst, src) = b.shape();
            if src != rows[l] || dst > src {
                return Err(crate::Error::Mismatch {
                    what: format!(
                        "block {l}'s sources vs the rows of level {l} (each block's sources \
                         are the last one's destinations, and hold its own)"
                    ),
                    expected: rows[l],
                    got: src,
                });
            }
            rows.push(dst);
        }
        if x.n_rows() != rows[0] {
            return Err(crate::Error::Mismatch {
                what: "feature rows vs the first block's sources".into(),
                expected: rows[0],
                got: x.n_rows(),
            });
        }
        let ws = self.workspace(&rows, x, eval)?;
        if let Some(e) = blocks
            .iter()
            .find_map(|b| b.caps().check(ws.plan.needs).err())
        {
            *self.slot(eval) = Some(ws);
            return Err(e.into());
        }
        Ok((ws, rows.into_iter().map(LevelRows::new).collect()))
    }

    /// [`Model::train_pass`] over a stack of bipartite blocks (a neighbour-sampled batch):
    /// `blocks[l]` the n_{l+1} × n_l Â of the l-th layer of one hop ([`Layer::hops`](crate::nn::Layer::hops)), the
    /// destinations of each block the first of its sources; `x` the features of the first
    /// block's sources; `loss` sees the logits of the last block's destinations (the seeds).
    /// Layers of no hops run on their level's rows. The stack is planned per level
    /// ([`Model::reserve_blocks`]).
    ///
    /// # Errors
    /// As [`Model::train_pass`] and [`Model::reserve_blocks`]; [`Error::Mismatch`](crate::Error::Mismatch)
    /// when the blocks do not chain or the features are not the first block's sources'.
    pub fn train_blocks(
        &mut self,
        blocks: &[&dyn Propagate<F>],
        x: &Features<F>,
        rng: &mut ChaCha8Rng,
        par: Par,
        loss: &mut dyn FnMut(ArrayViewMut2<'_, F>, Sums<'_, F>) -> bool,
    ) -> Result<()> {
        let (mut ws, levels) = self.blocks_workspace(blocks, x, false)?;
        if self.streams == MaskStreams::PerLayer {
            ws.key = rng.next_u64();
        }
        let g = Graphs::Blocks {
            blocks,
            levels: &levels,
        };
        let res = self.train_in(&mut ws, g, x, rng, par, loss);
        self.ws = Some(ws);
        res
    }

    /// [`Model::eval_pass`] over a stack of blocks ([`Model::train_blocks`]): `f` sees the
    /// logits of the last block's destinations.
    ///
    /// # Errors
    /// As [`Model::train_blocks`].
    pub fn eval_blocks(
        &mut self,
        blocks: &[&dyn Propagate<F>],
        x: &Features<F>,
        par: Par,
        f: &mut dyn FnMut(ArrayView2<'_, F>, Sums<'_, F>),
    ) -> Result<()> {
        let (mut ws, levels) = self.blocks_workspace(blocks, x, true)?;
        let g = Graphs::Blocks {
            blocks,
            levels: &levels,
        };
        let res = self.eval_in(&mut ws, g, x, par, f);
        *self.slot(true) = Some(ws);
        res
    }
}
