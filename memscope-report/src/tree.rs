//! Flame-graph trees of live bytes: from stacks (one frame per line, innermost first, as the
//! dumps write them) or owner chains (`A@B@C`, outermost first), pruned to a node budget.
//!
//! Pruning: children worth less than a share of the root are folded into one `(other)` child
//! of their parent; the share starts at 0.1 % and doubles until the tree fits `max_nodes`.

use std::collections::HashMap;

use crate::model::Tree;

/// Longest frame label kept, in characters.
pub const MAX_LABEL_CHARS: usize = 160;

struct Node {
    name: String,
    v: u64,
    b: u64,
    children: Vec<usize>,
}

/// Builds a tree from paths (outermost first) with their bytes and blocks.
pub struct TreeBuilder {
    nodes: Vec<Node>,
    index: HashMap<(usize, String), usize>,
}

/// `s` cut to [`MAX_LABEL_CHARS`] characters (an ellipsis marks the cut).
pub fn label(s: &str) -> String {
    match s.char_indices().nth(MAX_LABEL_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

impl TreeBuilder {
    /// An empty tree whose root is called `root`.
    pub fn new(root: &str) -> TreeBuilder {
        TreeBuilder {
            nodes: vec![Node {
                name: root.to_owned(),
                v: 0,
                b: 0,
                children: Vec::new(),
            }],
            index: HashMap::new(),
        }
    }

    /// Adds `bytes` and `blocks` along `path` (outermost first).
    pub fn add<'a>(&mut self, path: impl IntoIterator<Item = &'a str>, bytes: u64, blocks: u64) {
        let mut at = 0;
        self.nodes[0].v += bytes;
        self.nodes[0].b += blocks;
        for frame in path {
            let name = label(frame.trim());
            let next = match self.index.get(&(at, name.clone())) {
                Some(&i) => i,
                None => {
                    let i = self.nodes.len();
                    self.nodes.push(Node {
                        name: name.clone(),
                        v: 0,
                        b: 0,
                        children: Vec::new(),
                    });
                    self.nodes[at].children.push(i);
                    self.index.insert((at, name), i);
                    i
                }
            };
            self.nodes[next].v += bytes;
            self.nodes[next].b += blocks;
            at = next;
        }
    }

    /// Adds a stack text (one frame per line, innermost first) with its outermost frame at the
    /// root, or with `inverted` its innermost (the allocation site); an empty one is
    /// `(no stack)`.
    pub fn add_stack(&mut self, text: &str, bytes: u64, blocks: u64, inverted: bool) {
        let frames: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if frames.is_empty() {
            self.add(["(no stack)"], bytes, blocks);
        } else if inverted {
            self.add(frames, bytes, blocks);
        } else {
            self.add(frames.into_iter().rev(), bytes, blocks);
        }
    }

    fn count(&self, i: usize, min: u64) -> usize {
        let n = &self.nodes[i];
        let mut kept = 1;
        let mut folded = false;
        for &c in &n.children {
            if self.nodes[c].v >= min {
                kept += self.count(c, min);
            } else {
                folded = true;
            }
        }
        kept + usize::from(folded)
    }

    fn emit(&self, i: usize, min: u64) -> Tree {
        let n = &self.nodes[i];
        let mut c = Vec::new();
        let (mut ov, mut ob) = (0, 0);
        let mut ids: Vec<usize> = n.children.clone();
        ids.sort_by(|&a, &b| {
            let (x, y) = (&self.nodes[a], &self.nodes[b]);
            y.v.cmp(&x.v).then(x.name.cmp(&y.name))
        });
        for ci in ids {
            let k = &self.nodes[ci];
            if k.v >= min {
                c.push(self.emit(ci, min));
            } else {
                ov += k.v;
                ob += k.b;
            }
        }
        if ov > 0 || ob > 0 {
            c.push(Tree {
                n: "(other)".to_owned(),
                v: ov,
                b: ob,
                c: Vec::new(),
            });
        }
        Tree {
            n: n.name.clone(),
            v: n.v,
            b: n.b,
            c,
        }
    }

    /// The tree, pruned to at most `max_nodes` nodes (at least the root).
    pub fn finish(&self, max_nodes: usize) -> Tree {
        let total = self.nodes[0].v.max(1);
        let mut min = (total / 1000).max(1);
        while self.count(0, min) > max_nodes.max(1) && min <= total {
            min = min.saturating_mul(2);
        }
        self.emit(0, min)
    }
}

fn fold(t: &mut Tree, min: u64) {
    let mut other = Tree {
        n: "(other)".to_owned(),
        v: 0,
        b: 0,
        c: Vec::new(),
    };
    let mut kept = Vec::new();
    for mut k in std::mem::take(&mut t.c) {
        if k.v >= min && k.n != "(other)" {
            fold(&mut k, min);
            kept.push(k);
        } else {
            other.v += k.v;
            other.b += k.b;
        }
    }
    if other.v > 0 || other.b > 0 {
        kept.push(other);
    }
    t.c = kept;
}

/// Prunes a built tree to at most `max_nodes` nodes, as [`TreeBuilder::finish`] does.
pub fn prune(t: &mut Tree, max_nodes: usize) {
    let total = t.v.max(1);
    let mut min = (total / 1000).max(1);
    while node_count(t) > max_nodes.max(1) {
        fold(t, min);
        if min > total {
            break;
        }
        min = min.saturating_mul(2);
    }
}

fn nodes(t: &Tree) -> usize {
    1 + t.c.iter().map(nodes).sum::<usize>()
}

/// Nodes of a tree (tests, budgets).
pub fn node_count(t: &Tree) -> usize {
    nodes(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_build_an_outermost_first_tree_and_small_children_fold_into_other() {
        let mut b = TreeBuilder::new("all");
        b.add_stack("leaf_a\nmid\nmain", 600, 2, false);
        b.add_stack("leaf_b\nmid\nmain", 300, 1, false);
        b.add_stack("tiny\nmain", 1, 1, false);
        b.add_stack("", 99, 1, false);
        let t = b.finish(100);
        assert_eq!((t.n.as_str(), t.v, t.b), ("all", 1000, 5));
        assert_eq!(t.c[0].n, "main");
        assert_eq!(t.c[0].c[0].n, "mid");
        assert_eq!(t.c[0].c[0].c[0].n, "leaf_a");
        assert!(t.c.iter().any(|c| c.n == "(no stack)" && c.v == 99));
        // a budget of 4 nodes folds the smaller branches
        let small = b.finish(4);
        assert!(node_count(&small) <= 4, "{small:?}");
        assert_eq!(small.v, 1000);
        let sum: u64 = small.c.iter().map(|c| c.v).sum();
        assert_eq!(sum, 1000);
        let mut full = b.finish(100);
        prune(&mut full, 4);
        assert!(node_count(&full) <= 4, "{full:?}");
        assert_eq!(full.c.iter().map(|c| c.v).sum::<u64>(), 1000);
    }

    #[test]
    fn an_inverted_tree_has_the_allocation_sites_at_the_root() {
        let mut b = TreeBuilder::new("all");
        b.add_stack("malloc\nf\nmain", 10, 1, true);
        b.add_stack("malloc\ng\nmain", 5, 1, true);
        let t = b.finish(50);
        assert_eq!((t.c.len(), t.c[0].n.as_str(), t.c[0].v), (1, "malloc", 15));
        assert_eq!(t.c[0].c[0].n, "f");
    }

    #[test]
    fn owner_chains_split_on_at() {
        let mut b = TreeBuilder::new("all");
        b.add("CANN@RUNTIME".split('@'), 10, 1);
        b.add("CANN@APP".split('@'), 5, 1);
        let t = b.finish(50);
        assert_eq!(t.c.len(), 1);
        assert_eq!(t.c[0].n, "CANN");
        assert_eq!(t.c[0].c.len(), 2);
    }
}
