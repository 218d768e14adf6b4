//! The first phase of a plan: what each node is in a pass — whether its output needs a gradient,
//! whether its inputs are the model's fixed input in a training and in an evaluation pass, what
//! the planner tells the layer of each input ([`InputDesc`]) — and the layer's answer
//! ([`Spec`]), which the caller asks for the rows planned for.

use crate::nn::layer::{InputDesc, Spec};
use crate::nn::stack::Src;

/// What the first phase needs to know of the stack and its input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setting {
    /// The features are sparse.
    pub(crate) x_sparse: bool,
    /// Dropout on the features (X̃ ≠ X in training).
    pub(crate) xd_dropped: bool,
    /// Â changes from one training pass to the next.
    pub(crate) varying_graph: bool,
    /// The plan is for evaluation passes only ([`InputDesc::forward_only`]).
    pub(crate) forward_only: bool,
}

/// Per node: what the planner knows and what the layer declared.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Described {
    /// The node's output needs a gradient (it has parameters, or reads a node that does).
    pub(crate) need: Vec<bool>,
    /// The node's inputs are a function of Â and X alone in a training / an evaluation pass.
    pub(crate) fixed_train: Vec<bool>,
    pub(crate) fixed_eval: Vec<bool>,
    /// What the layer was told of each input.
    pub(crate) descs: Vec<Vec<InputDesc>>,
    /// The layer's [`Spec`] for those inputs and `cap` rows.
    pub(crate) specs: Vec<Spec>,
}

/// Describes nodes `inputs[i]` (their sources) with parameters `has_params[i]`, asking
/// `spec(i, descs)` for each in order (a node's description depends on the earlier nodes').
pub(crate) fn describe(
    inputs: &[&[Src]],
    has_params: &[bool],
    set: Setting,
    spec: &mut dyn FnMut(usize, &[InputDesc]) -> Spec,
) -> Described {
    let n = inputs.len();
    let mut d = Described {
        need: vec![false; n],
        fixed_train: vec![false; n],
        fixed_eval: vec![false; n],
        descs: Vec::with_capacity(n),
        specs: Vec::with_capacity(n),
    };
    // Whether node j's output is a function of Â and X alone (constant on fixed inputs).
    let mut out_fixed_train = vec![false; n];
    let mut out_fixed_eval = vec![false; n];
    for i in 0..n {
        let ins = inputs[i];
        d.need[i] = has_params[i] || ins.iter().any(|s| matches!(s, Src::Node(j) if d.need[*j]));
        let fixed = |s: &Src, train: bool, out: &[bool]| match s {
            Src::X => true,
            Src::Xd => !train || !set.xd_dropped,
            Src::Node(j) => out[*j],
        };
        d.fixed_train[i] =
            !set.varying_graph && ins.iter().all(|s| fixed(s, true, &out_fixed_train));
        d.fixed_eval[i] = ins.iter().all(|s| fixed(s, false, &out_fixed_eval));
        let descs: Vec<InputDesc> = ins
            .iter()
            .map(|s| InputDesc {
                sparse: set.x_sparse && matches!(s, Src::X | Src::Xd),
                fixed_in_training: !set.varying_graph && fixed(s, true, &out_fixed_train),
                grad: matches!(s, Src::Node(j) if d.need[*j]),
                forward_only: set.forward_only,
                src_rows: 0,
            })
            .collect();
        let sp = spec(i, &descs);
        out_fixed_train[i] = sp.constant && d.fixed_train[i];
        out_fixed_eval[i] = sp.constant && d.fixed_eval[i];
        d.descs.push(descs);
        d.specs.push(sp);
    }
    d
}

/// The first input whose source's width differs from the width its layer reads
/// ([`Spec::in_dim`]): `(node, input, source, the layer's width, the source's)`, with the
/// features `x_cols` wide. Every later phase assumes the widths chain.
pub(crate) fn width_mismatch(
    inputs: &[&[Src]],
    specs: &[Spec],
    x_cols: usize,
) -> Option<(usize, usize, Src, usize, usize)> {
    inputs.iter().enumerate().find_map(|(i, ins)| {
        let want = specs[i].in_dim?;
        ins.iter().enumerate().find_map(|(k, &s)| {
            let got = match s {
                Src::X | Src::Xd => x_cols,
                Src::Node(j) => specs[j].out_dim,
            };
            (got != want).then_some((i, k, s, want, got))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_checked_against_each_source() {
        let specs = [
            Spec::new(4).reading(3),
            Spec::new(2).reading(4),
            Spec::new(5),
        ];
        let inputs: Vec<&[Src]> = vec![&[Src::X], &[Src::Node(0)], &[Src::Node(1)]];
        assert_eq!(width_mismatch(&inputs, &specs, 3), None);
        assert_eq!(
            width_mismatch(&inputs, &specs, 7),
            Some((0, 0, Src::X, 3, 7))
        );
        // A second input of another width; a layer without a width takes any.
        let inputs: Vec<&[Src]> = vec![&[Src::Xd], &[Src::Node(0), Src::X], &[Src::Node(0)]];
        assert_eq!(
            width_mismatch(&inputs, &specs, 3),
            Some((1, 1, Src::X, 4, 3))
        );
        let inputs: Vec<&[Src]> = vec![&[Src::X], &[Src::Node(0)], &[Src::X]];
        assert_eq!(width_mismatch(&inputs, &specs, 3), None);
    }

    fn spec_of(constant: bool) -> impl FnMut(usize, &[InputDesc]) -> Spec {
        move |i, _| Spec {
            constant: constant && i == 0,
            ..Spec::new(3)
        }
    }

    #[test]
    fn fixed_inputs_follow_constant_nodes_and_dropout() {
        // 0: constant on X; 1: reads 0 (has parameters); 2: reads X̃ and 1.
        let inputs: Vec<&[Src]> = vec![&[Src::X], &[Src::Node(0)], &[Src::Xd, Src::Node(1)]];
        let set = Setting {
            x_sparse: true,
            xd_dropped: true,
            varying_graph: false,
            forward_only: false,
        };
        let d = describe(&inputs, &[false, true, false], set, &mut spec_of(true));
        assert_eq!(d.need, [false, true, true]);
        assert_eq!(
            d.fixed_train,
            [true, true, false],
            "X̃ is dropped in training"
        );
        assert_eq!(d.fixed_eval, [true, true, false], "node 1 is not constant");
        assert!(d.descs[0][0].sparse && d.descs[0][0].fixed_in_training);
        assert!(d.descs[1][0].fixed_in_training && !d.descs[1][0].grad && !d.descs[1][0].sparse);
        assert!(!d.descs[2][0].fixed_in_training && d.descs[2][0].sparse);
        assert!(d.descs[2][1].grad);
        assert!(d.descs.iter().flatten().all(|d| !d.forward_only));
        let fwd = describe(
            &inputs,
            &[false, true, false],
            Setting {
                forward_only: true,
                ..set
            },
            &mut spec_of(true),
        );
        assert!(fwd.descs.iter().flatten().all(|d| d.forward_only));
        // Â varying between training passes: nothing is fixed in training.
        let set = Setting {
            varying_graph: true,
            ..set
        };
        let d = describe(&inputs, &[false, true, false], set, &mut spec_of(true));
        assert_eq!(d.fixed_train, [false, false, false]);
        assert_eq!(d.fixed_eval, [true, true, false]);
        assert!(!d.descs[0][0].fixed_in_training);
        // Not constant: its readers are not fixed.
        let d = describe(&inputs, &[false, true, false], set, &mut spec_of(false));
        assert_eq!(d.fixed_eval, [true, false, false]);
    }
}
