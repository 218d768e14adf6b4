//! The community order against the plain algorithm, and the pruning of community graphs.

use super::*;

// ---- The community order written plainly (as it was before the faster one), to check the
// ---- faster one against: an array of counts over all communities, every node examined in
// ---- every sweep, community graphs with one entry per edge, every meeting queued.

fn ref_best(
    adj: &Adj<'_>,
    i: usize,
    label: &[u32],
    size: &[usize],
    w: usize,
    cap: usize,
    salt: u64,
) -> u32 {
    let mut count = vec![0u64; label.len()];
    let mut touched = Vec::new();
    for &j in adj.row(i) {
        if j as usize == i {
            continue;
        }
        let l = label[j as usize];
        if count[l as usize] == 0 {
            touched.push(l);
        }
        count[l as usize] += 1;
    }
    let own = label[i];
    let (mut best, mut best_c) = (own, count[own as usize]);
    for &l in &touched {
        let c = count[l as usize];
        if l != own && size[l as usize] + w > cap {
            continue;
        }
        let wins = c > best_c
            || (c == best_c && best != own && tie_key(l, i, salt) < tie_key(best, i, salt));
        if wins {
            best = l;
            best_c = c;
        }
    }
    best
}

fn ref_propagate(adj: &Adj<'_>, weight: &[usize], cap: usize, cfg: &CommunityConfig) -> Vec<u32> {
    let n = adj.n();
    let mut label = ids(n);
    let mut size = weight.to_vec();
    let cap = cap.max(1);
    let visit = Permutation::random(n, cfg.seed).into_new_to_old();
    for it in 0..cfg.iterations {
        let salt = splitmix64(cfg.seed ^ (it as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut changed = 0;
        for nodes in visit.chunks(lp_block(n)) {
            let choice: Vec<u32> = nodes
                .iter()
                .map(|&i| {
                    ref_best(
                        adj,
                        i as usize,
                        &label,
                        &size,
                        weight[i as usize],
                        cap,
                        salt,
                    )
                })
                .collect();
            for (&best, &i) in choice.iter().zip(nodes) {
                let i = i as usize;
                let (own, w) = (label[i], weight[i]);
                if best != own && size[best as usize] + w <= cap {
                    size[own as usize] -= w;
                    size[best as usize] += w;
                    label[i] = best;
                    changed += 1;
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    let mut id = vec![u32::MAX; n];
    let mut k = 0u32;
    for l in label.iter_mut() {
        if id[*l as usize] == u32::MAX {
            id[*l as usize] = k;
            k += 1;
        }
        *l = id[*l as usize];
    }
    label
}

fn ref_nested(
    adj: &Adj<'_>,
    weight: &[usize],
    cap: usize,
    cfg: &CommunityConfig,
    level: usize,
) -> Vec<u32> {
    let n = adj.n();
    let comm = ref_propagate(adj, weight, cap, cfg);
    let flat = ref_layout(adj, &comm).into_new_to_old();
    let k = comm.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    if level + 1 >= MAX_LEVELS || k < 2 || 2 * k > n {
        return flat;
    }
    // One entry per edge between two communities, in the order of the members' ids.
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); k];
    for i in 0..n {
        for &j in adj.row(i) {
            if comm[j as usize] != comm[i] {
                rows[comm[i] as usize].push(comm[j as usize]);
            }
        }
    }
    // The light links dropped (`prune_links`), written plainly: each pair's weight, each
    // row's `LINKS_KEPT` heaviest links by sorting, a link kept if either end keeps it.
    let weight_of = |c: usize, d: u32| rows[c].iter().filter(|&&x| x == d).count() as u32;
    let mut heavy: Vec<Vec<u32>> = Vec::with_capacity(k);
    for (c, r) in rows.iter().enumerate() {
        let mut pairs: Vec<u32> = Vec::new();
        for &d in r {
            if !pairs.contains(&d) {
                pairs.push(d);
            }
        }
        pairs.sort_by_key(|&d| std::cmp::Reverse(link_key(c as u32, d, weight_of(c, d))));
        pairs.truncate(LINKS_KEPT);
        heavy.push(pairs);
    }
    let mut ip = vec![0usize];
    let mut idx = Vec::new();
    for (c, r) in rows.iter().enumerate() {
        idx.extend(
            r.iter()
                .copied()
                .filter(|&d| heavy[c].contains(&d) || heavy[d as usize].contains(&(c as u32))),
        );
        ip.push(idx.len());
    }
    let cadj = Adj {
        ip: std::borrow::Cow::Owned(ip),
        idx: std::borrow::Cow::Owned(idx),
        wt: None,
    };
    let mut csize = vec![0usize; k];
    for (i, &c) in comm.iter().enumerate() {
        csize[c as usize] += weight[i];
    }
    let corder = ref_nested(
        &cadj,
        &csize,
        cap.saturating_mul(LEVEL_GROWTH),
        cfg,
        level + 1,
    );
    let mut out = Vec::with_capacity(n);
    for &c in &corder {
        out.extend(flat.iter().copied().filter(|&v| comm[v as usize] == c));
    }
    out
}

fn ref_layout(adj: &Adj<'_>, comm: &[u32]) -> Permutation {
    let n = adj.n();
    let k = comm.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    // Members of each community, by id (counting sort).
    let mut mstart = vec![0usize; k + 1];
    for &c in comm {
        mstart[c as usize + 1] += 1;
    }
    for c in 0..k {
        mstart[c + 1] += mstart[c];
    }
    let mut members = vec![0u32; n];
    let mut fill = mstart.clone();
    for (i, &c) in comm.iter().enumerate() {
        members[fill[c as usize]] = i as u32;
        fill[c as usize] += 1;
    }
    // `fill[c]` now scans community c's members for ones the search did not reach.
    fill.truncate(k);
    fill.copy_from_slice(&mstart[..k]);

    let mut placed = vec![false; n];
    let mut done = vec![false; k];
    let mut frontier: std::collections::VecDeque<u32> = std::collections::VecDeque::new();
    let seeds = super::classic::by_degree(adj, true);
    let mut next_seed = 0usize;
    let mut out: Vec<u32> = Vec::with_capacity(n);
    // Edges from the current community to each unplaced one, and the first node met there.
    let mut links = vec![0u32; k];
    let mut met = vec![0u32; k];
    let mut touched: Vec<u32> = Vec::new();
    let mut next: Option<u32> = None;
    loop {
        // The entry node of the next community: in the unplaced community most connected to
        // the last one, else the oldest queued neighbour of any placed community, else the
        // highest-degree node left.
        let mut entry = next.take();
        while entry.is_none() {
            let Some(v) = frontier.pop_front() else { break };
            if !done[comm[v as usize] as usize] {
                entry = Some(v);
            }
        }
        if entry.is_none() {
            while next_seed < n && done[comm[seeds[next_seed] as usize] as usize] {
                next_seed += 1;
            }
            entry = seeds.get(next_seed).copied();
        }
        let Some(entry) = entry else { break };
        let c = comm[entry as usize];
        done[c as usize] = true;
        placed[entry as usize] = true;
        out.push(entry);
        let mut head = out.len() - 1;
        loop {
            while head < out.len() {
                let u = out[head] as usize;
                head += 1;
                for &v in adj.row(u) {
                    let vu = v as usize;
                    if placed[vu] {
                        continue;
                    }
                    let cv = comm[vu];
                    if cv == c {
                        placed[vu] = true;
                        out.push(v);
                    } else if !done[cv as usize] {
                        frontier.push_back(v);
                        if links[cv as usize] == 0 {
                            touched.push(cv);
                            met[cv as usize] = v;
                        }
                        links[cv as usize] += 1;
                    }
                }
            }
            // Members the search did not reach (a community need not be connected).
            let end = mstart[c as usize + 1];
            let f = &mut fill[c as usize];
            while *f < end && placed[members[*f] as usize] {
                *f += 1;
            }
            if *f == end {
                break;
            }
            let m = members[*f];
            placed[m as usize] = true;
            out.push(m);
        }
        // The most connected unplaced neighbour community (the first met on ties).
        let mut best: Option<u32> = None;
        for &cv in &touched {
            if best.is_none_or(|b| links[cv as usize] > links[b as usize]) {
                best = Some(cv);
            }
        }
        next = best.map(|b| met[b as usize]);
        for &cv in &touched {
            links[cv as usize] = 0;
        }
        touched.clear();
    }
    Permutation::from_new_to_old_trusted(out)
}

#[test]
fn community_order_equals_the_plain_algorithm() {
    // Graphs with several levels, caps that bind, repeated entries (directed: A + Aᵀ),
    // isolated nodes and self-loops; caps small enough that full communities turn nodes away.
    let mut cases = vec![
        (planted(12, 150, 12, 2, 3).0, 64),
        (planted(40, 60, 8, 4, 9).0, 16),
        (random_graph(3000, 9000, Direction::Undirected, 5), 64),
        (random_graph(2000, 5000, Direction::Directed, 6), 8),
        (random_graph(700, 400, Direction::Undirected, 7), 4),
    ];
    cases.push((planted(30, 100, 20, 6, 11).0, 32));
    for (case, (g, cap)) in cases.iter().enumerate() {
        for seed in [0, 1] {
            let cfg = CommunityConfig {
                iterations: 5,
                seed,
                max_size: Some(*cap),
            };
            let adj = Adj::new(g);
            let want = ref_nested(&adj, &vec![1usize; g.n_nodes()], *cap, &cfg, 0);
            let got = community_order(g, &cfg);
            assert_eq!(got.new_to_old(), &want[..], "case {case} seed {seed}");
            assert_eq!(
                label_propagation(g, &cfg),
                ref_propagate(&adj, &vec![1usize; g.n_nodes()], *cap, &cfg),
                "case {case} seed {seed}"
            );
        }
    }
}

#[test]
fn pruned_links_keep_each_rows_heaviest_and_stay_symmetric() {
    // A symmetric weighted graph of 300 nodes, rows of about 40 links weighing 1 to 6.
    let n = 300usize;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut w = vec![vec![0u32; n]; n];
    for _ in 0..6000 {
        let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
        if a != b {
            let x = rng.random_range(1..7u32);
            (w[a][b], w[b][a]) = (x, x);
        }
    }
    let (mut ip, mut idx, mut wt) = (vec![0usize], Vec::new(), Vec::new());
    for (c, row) in w.iter().enumerate() {
        // Stored order: a rotation, so that it is neither the ids' nor the weights' order.
        for d in (0..n).map(|j| (j + 7 * c) % n) {
            if row[d] > 0 {
                idx.push(d as u32);
                wt.push(row[d]);
            }
        }
        ip.push(idx.len());
    }
    let full = Adj {
        ip: std::borrow::Cow::Owned(ip),
        idx: std::borrow::Cow::Owned(idx),
        wt: Some(wt),
    };
    let keep = 5;
    let top = |c: usize| -> Vec<u32> {
        let mut r: Vec<(u64, u32)> = full
            .row(c)
            .iter()
            .zip(full.row_weights(c).unwrap())
            .map(|(&d, &x)| (link_key(c as u32, d, x), d))
            .collect();
        r.sort_unstable_by(|a, b| b.cmp(a));
        r.into_iter().take(keep).map(|(_, d)| d).collect()
    };
    let copy = Adj {
        ip: full.ip.clone(),
        idx: full.idx.clone(),
        wt: full.wt.clone(),
    };
    let p = prune_links(copy, keep);
    assert!(
        p.idx.len() < full.idx.len() / 2,
        "{} of {}",
        p.idx.len(),
        full.idx.len()
    );
    for c in 0..n {
        let (row, ws) = (p.row(c), p.row_weights(c).unwrap());
        // The row's own heaviest all stay, and nothing else but another end's heaviest.
        for d in top(c) {
            assert!(row.contains(&d), "row {c} lost {d}");
        }
        for (&d, &x) in row.iter().zip(ws) {
            assert_eq!(x, w[c][d as usize]);
            assert!(top(c).contains(&d) || top(d as usize).contains(&(c as u32)));
            // Symmetric.
            assert!(p.row(d as usize).contains(&(c as u32)));
        }
        // In stored order: a subsequence of the full row.
        let mut it = full.row(c).iter();
        assert!(row.iter().all(|d| it.any(|e| e == d)), "row {c} reordered");
    }
    // Rows no longer than `keep`: unchanged.
    let q = prune_links(p, n);
    assert_eq!(q.ip.len(), n + 1);
    let again = prune_links(
        Adj {
            ip: full.ip.clone(),
            idx: full.idx.clone(),
            wt: full.wt.clone(),
        },
        n,
    );
    assert_eq!(&again.idx[..], &full.idx[..]);
}
