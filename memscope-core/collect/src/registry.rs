//! The adapters a collector is handed: the caller's registration list.

use crate::adapter::{AdapterDescriptor, SourceId, Typer};
use std::sync::OnceLock;

/// The adapters a collector types with, as its caller's registration list gives them
/// (`memscope-cli/src/builtin.rs`): every adapter's descriptor. The collector names no adapter
/// crate itself.
#[derive(Clone, Copy, Debug)]
pub struct Registry {
    /// Every adapter's descriptor: the built-in ones in source id order, then the shipped
    /// plugins.
    pub descriptors: &'static [&'static AdapterDescriptor],
}

impl Registry {
    /// No adapter (what [`installed`] answers before [`install`]).
    pub const EMPTY: Registry = Registry { descriptors: &[] };

    /// The adapter named `name` (exact, lower case).
    pub fn by_name(&self, name: &str) -> Option<&'static AdapterDescriptor> {
        self.descriptors.iter().copied().find(|d| d.name == name)
    }

    /// The built-in adapter of source `source`.
    pub fn by_source(&self, source: SourceId) -> Option<&'static AdapterDescriptor> {
        self.descriptors
            .iter()
            .copied()
            .find(|d| d.built_in() && d.source == source)
    }

    /// Every adapter's name, in list order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.descriptors.iter().map(|d| d.name)
    }

    /// A fresh typer of every adapter that has one, for one process, with its source.
    pub fn typers(&self) -> Vec<(Option<SourceId>, Box<dyn Typer>)> {
        self.descriptors
            .iter()
            .filter_map(|d| d.new_typer.map(|f| (d.built_in().then_some(d.source), f())))
            .collect()
    }

    /// A fresh typer of every built-in adapter `selection` selects, for one process, in list
    /// order (the order typers are asked in). Each typer takes only its own source's records
    /// (its hooks record only when it is selected); records every adapter's hooks may write
    /// (owner tags) fall to the typers of the selected ones, which hold the blocks they name.
    pub fn typers_of(&self, selection: &Selection) -> Vec<(Option<SourceId>, Box<dyn Typer>)> {
        self.descriptors
            .iter()
            .filter(|d| d.built_in() && selection.has(d.source))
            .filter_map(|d| d.new_typer.map(|f| (Some(d.source), f())))
            .collect()
    }
}

/// The adapters a run selects, resolved from their names once.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Selection mask of the built-in adapters ([`SourceId::bit`]).
    pub mask: u32,
    /// The selected adapters, in selection order.
    pub adapters: Vec<&'static AdapterDescriptor>,
    /// The selected shipped plugins, in selection order.
    pub plugins: Vec<&'static AdapterDescriptor>,
}

impl Selection {
    /// Whether the built-in adapter of source `source` is selected.
    pub fn has(&self, source: SourceId) -> bool {
        self.mask & source.bit() != 0
    }
}

impl Registry {
    /// The selection `names` make (names this registry lacks are left out: configurations are
    /// checked when parsed).
    pub fn resolve(&self, names: &[String]) -> Selection {
        let mut sel = Selection::default();
        for d in names.iter().filter_map(|n| self.by_name(n)) {
            if d.built_in() {
                sel.mask |= d.source.bit();
            } else {
                sel.plugins.push(d);
            }
            sel.adapters.push(d);
        }
        sel
    }
}

static INSTALLED: OnceLock<&'static Registry> = OnceLock::new();

/// Installs the process's registration list, once, before any configuration is parsed
/// (the CLI does at start): adapter names in configurations are checked and resolved against
/// it. A second call is ignored.
pub fn install(registry: &'static Registry) {
    if INSTALLED.set(registry).is_ok() {
        // the `--fail-on` scopes the adapters name
        memscope_analysis::thresholds::install_scopes(
            registry
                .descriptors
                .iter()
                .filter_map(|d| d.limit_scope)
                .collect(),
        );
    }
}

/// The installed registration list ([`Registry::EMPTY`] before [`install`]).
pub fn installed() -> &'static Registry {
    #[cfg(test)]
    install(&crate::test_registry::REGISTRY);
    INSTALLED.get().copied().unwrap_or(&Registry::EMPTY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_is_the_mask_of_its_built_in_adapters_and_its_shipped_plugins_in_order() {
        let r = installed();
        let plugin = r.descriptors.iter().find(|d| !d.built_in()).unwrap();
        let (a, b) = (r.descriptors[1], r.descriptors[3]);
        let names = [plugin.name, b.name, a.name, "unknown"].map(str::to_owned);
        let sel = r.resolve(&names);
        assert_eq!(sel.mask, a.source.bit() | b.source.bit());
        assert!(sel.has(a.source) && !sel.has(r.descriptors[0].source));
        assert_eq!(sel.plugins.len(), 1);
        assert_eq!(sel.plugins[0].name, plugin.name);
        let order: Vec<_> = sel.adapters.iter().map(|d| d.name).collect();
        assert_eq!(order, [plugin.name, b.name, a.name]);
    }
}
