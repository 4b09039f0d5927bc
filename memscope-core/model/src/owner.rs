//! Owner chains: the `owner` Attr of MALLOC rows, levels joined with `@` (behaviour spec §7).

use std::fmt;

/// An owner chain such as `PTA@gradient@ops`: the framework level first, then deeper levels.
/// Levels never contain `@` (it is replaced by `_` on push) and are never empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerChain {
    levels: Vec<String>,
}

impl OwnerChain {
    /// A chain with only the framework level (`PTA`, `CANN@RUNTIME` is two levels: use
    /// [`OwnerChain::parse`] for those).
    pub fn framework(level: &str) -> OwnerChain {
        let mut c = OwnerChain::default();
        c.push(level);
        c
    }

    /// Parses `A@B@C`; empty levels are skipped, so `""` is the empty chain.
    pub fn parse(s: &str) -> OwnerChain {
        OwnerChain {
            levels: s
                .split('@')
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    /// Appends a level; empty labels are ignored and `@` inside a label becomes `_`.
    pub fn push(&mut self, level: &str) {
        if !level.is_empty() {
            self.levels.push(level.replace('@', "_"));
        }
    }

    /// The levels, outermost (framework) first.
    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    /// Whether the chain has no level.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The first `n` levels as a chain (for decompose roll-ups).
    pub fn prefix(&self, n: usize) -> OwnerChain {
        OwnerChain {
            levels: self.levels.iter().take(n).cloned().collect(),
        }
    }
}

impl fmt::Display for OwnerChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, l) in self.levels.iter().enumerate() {
            if i > 0 {
                f.write_str("@")?;
            }
            f.write_str(l)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_chain_joins_levels_with_at_and_sanitises_labels() {
        let mut c = OwnerChain::parse("CANN@HCCL");
        c.push("x@y");
        c.push("");
        assert_eq!(c.to_string(), "CANN@HCCL@x_y");
        assert_eq!(OwnerChain::parse(&c.to_string()).levels().len(), 3);
        assert_eq!(c.prefix(1).to_string(), "CANN");
    }
}
