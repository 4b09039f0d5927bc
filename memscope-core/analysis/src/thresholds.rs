//! Limits that fail a command (issue 24): `memscope run --fail-on
//! 'leaks>1MiB,peak.npu:0>40GiB,peak.host>2GiB'`, `memscope analyze leaks --fail-over 1MiB`.
//!
//! A limit is `METRIC[.SCOPE]>VALUE`, checked against each process's [`ProcessFigures`]:
//!
//! * `peak`: the highest peak of any allocator in scope (allocators nest — pool blocks live
//!   inside driver memory — so they are compared one by one, never added);
//! * `leaks`: the most bytes any allocator in scope leaked, by msMemScope's step rule (pool
//!   blocks; host blocks — HOST, Python objects — once a step ended); allocators it does not
//!   judge are not looked at;
//! * `live`: the most bytes any allocator in scope held at exit;
//! * `hal_at_exit`: driver (HAL) memory live at exit — msMemScope writes it to its log, not as
//!   a leak (a framework's reservation is often freed only by the driver at exit);
//! * `dropped`: events the probe could not record (a whole number of events, no scope; needs
//!   `memscope run`);
//! * `races`: cross-stream races found (`memscope_races`; a whole number, no scope), not
//!   recorded where no launch with its stream, operator access or `sanitizer-op:` mark was.
//!
//! SCOPE: `npu` (every NPU), `npu:N`, `cpu` (host memory but the blocks of named scopes),
//! `host` (the HOST allocator), a scope an adapter names ([`NamedScope`], e.g. its Python
//! objects), or an Event Type (`PTA`, `HAL`, …); a device and an Event Type together as
//! `npu:0.PTA`. VALUE: bytes with an optional unit —
//! `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (powers of 1024), `KB`, `MB`, `GB`, `TB`
//! (powers of 1000). A limit whose scope matches no allocator of a run is reported, not
//! silently passed (see [`Limit::matches_any`]).

use super::diff::size;
use super::figures::{AllocatorFigures, ProcessFigures, Site};

/// What a limit measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Highest live bytes.
    Peak,
    /// Bytes judged leaked.
    Leaks,
    /// Bytes live at exit.
    Live,
    /// HAL bytes live at exit.
    HalAtExit,
    /// Events dropped (count).
    Dropped,
    /// Cross-stream races found (count).
    Races,
}

impl Metric {
    fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "peak" => Metric::Peak,
            "leaks" => Metric::Leaks,
            "live" => Metric::Live,
            "hal_at_exit" => Metric::HalAtExit,
            "dropped" => Metric::Dropped,
            "races" => Metric::Races,
            _ => return None,
        })
    }

    /// Whether the metric counts things (events, races) rather than bytes; it takes no scope.
    pub fn is_count(self) -> bool {
        matches!(self, Metric::Dropped | Metric::Races)
    }

    /// `peak`, `leaks`, `live`, `hal_at_exit`, `dropped` or `races`.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Peak => "peak",
            Metric::Leaks => "leaks",
            Metric::Live => "live",
            Metric::HalAtExit => "hal_at_exit",
            Metric::Dropped => "dropped",
            Metric::Races => "races",
        }
    }
}

/// Which allocators a limit looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// `npu`, `npu:N`, `cpu`, `host`, a [`NamedScope`]'s name, or none (all).
    pub device: Option<String>,
    /// An Event Type, or none (all).
    pub allocator: Option<String>,
}

/// A scope an adapter names (its descriptor declares it; the CLI installs them at start,
/// [`install_scopes`]): the blocks of one Event Type, which `cpu` leaves out with the other
/// Event Types of the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedScope {
    /// Its name in a limit (`peak.NAME>2MiB`).
    pub name: &'static str,
    /// The Event Type of the blocks it covers.
    pub event_type: &'static str,
    /// `cpu` leaves out every allocator whose Event Type starts with this (the blocks and
    /// what holds them, e.g. arenas).
    pub apart: &'static str,
}

static SCOPES: std::sync::OnceLock<Vec<NamedScope>> = std::sync::OnceLock::new();

/// Installs the named scopes, once, before limits are parsed; a second call is ignored.
pub fn install_scopes(scopes: Vec<NamedScope>) {
    let _ = SCOPES.set(scopes);
}

fn named_scopes() -> &'static [NamedScope] {
    SCOPES.get().map_or(&[], Vec::as_slice)
}

fn named_scope(name: &str) -> Option<&'static NamedScope> {
    named_scopes().iter().find(|n| n.name == name)
}

/// Whether `allocator` is left out of `cpu` (an allocator of a named scope's source).
fn apart_from_cpu(allocator: &str) -> bool {
    named_scopes()
        .iter()
        .any(|n| allocator.starts_with(n.apart))
}

impl Scope {
    fn parse(s: &str) -> Result<Scope, String> {
        let mut scope = Scope::default();
        let (dev, alloc) = match s.split_once('.') {
            Some((d, a)) => (Some(d), Some(a)),
            None if is_device(s) => (Some(s), None),
            None => (None, Some(s)),
        };
        if let Some(d) = dev {
            if !is_device(d) {
                let named: String = named_scopes()
                    .iter()
                    .map(|n| format!(", {}", n.name))
                    .collect();
                return Err(format!(
                    "unknown scope {d:?} (expected npu, npu:N, cpu, host{named} or an Event Type such as PTA)"
                ));
            }
            scope.device = Some(d.to_owned());
        }
        if let Some(a) = alloc {
            if a.is_empty() || !a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("unknown scope {s:?}: {a:?} is not an Event Type"));
            }
            scope.allocator = Some(a.to_owned());
        }
        Ok(scope)
    }

    /// Whether allocator `a` is in scope.
    pub fn covers(&self, a: &AllocatorFigures) -> bool {
        self.covers_names(&a.device, &a.allocator)
    }

    /// Whether the allocator of Event Type `allocator` on `device` (`0`, `cpu`) is in scope.
    pub fn covers_names(&self, device: &str, allocator: &str) -> bool {
        let dev_ok = match self.device.as_deref() {
            None => true,
            Some("npu") => device.parse::<u32>().is_ok(),
            Some("cpu") => device == "cpu" && !apart_from_cpu(allocator),
            Some("host") => device == "cpu" && allocator == "HOST",
            Some(d) => match named_scope(d) {
                Some(n) => allocator == n.event_type,
                None => d.strip_prefix("npu:") == Some(device),
            },
        };
        dev_ok && self.allocator.as_deref().is_none_or(|t| t == allocator)
    }
}

fn is_device(s: &str) -> bool {
    matches!(s, "npu" | "cpu" | "host")
        || named_scope(s).is_some()
        || s.strip_prefix("npu:")
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// One limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// The limit as given (spaces removed).
    pub text: String,
    /// What it measures.
    pub metric: Metric,
    /// Where.
    pub scope: Scope,
    /// The most allowed (bytes, or events for `dropped`).
    pub max: u64,
}

/// Parses a size: `1048576`, `1MiB`, `1.5 GiB`, `40GB` (see the module documentation).
///
/// # Errors
/// A one-line message naming the text.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("{s:?} is not a size (e.g. 512, 64KiB, 1.5GiB, 2GB)");
    let v: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim() {
        // a byte count is whole: `1.5` is a typo for a unit, never rounded
        "" | "B" if num.contains('.') => {
            return Err(format!(
                "{s:?} is not a whole number of bytes (e.g. 512, 1.5KiB)"
            ))
        }
        "" | "B" => 1.0,
        "K" | "KiB" | "k" => 1024.0,
        "M" | "MiB" => 1_048_576.0,
        "G" | "GiB" => 1_073_741_824.0,
        "T" | "TiB" => 1_099_511_627_776.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return Err(bad()),
    };
    let b = (v * mult).round();
    if !b.is_finite() || b >= 1.8e19 {
        return Err(bad());
    }
    Ok(b as u64)
}

impl Limit {
    /// Parses one `METRIC[.SCOPE]>VALUE`.
    ///
    /// # Errors
    /// A one-line message naming the limit and what is wrong.
    pub fn parse(s: &str) -> Result<Limit, String> {
        let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = text.split_once('>').ok_or_else(|| {
            // an unquoted `leaks>1MiB` reaches us as `leaks`: the shell took the rest as a
            // redirection (and made a file named after the size)
            format!(
                "{text:?}: expected METRIC[.SCOPE]>SIZE, e.g. 'leaks>1MiB' (quote it: the \
                     shell takes an unquoted > as a redirection)"
            )
        })?;
        let (m, scope) = match lhs.split_once('.') {
            Some((m, s)) => (m, Some(s)),
            None => (lhs, None),
        };
        let metric = Metric::parse(m).ok_or_else(|| {
            format!("{text:?}: unknown metric {m:?} (expected peak, leaks, live, hal_at_exit, dropped or races)")
        })?;
        let scope = match scope {
            Some(_) if metric == Metric::Dropped => {
                return Err(format!(
                    "{text:?}: dropped counts the process's lost events and takes no scope (e.g. dropped>0)"
                ))
            }
            Some(_) if metric == Metric::Races => {
                return Err(format!(
                    "{text:?}: races counts the process's cross-stream races and takes no scope (e.g. races>0)"
                ))
            }
            Some(s) => Scope::parse(s).map_err(|e| format!("{text:?}: {e}"))?,
            None => Scope::default(),
        };
        if metric == Metric::HalAtExit {
            let npu = scope
                .device
                .as_deref()
                .is_none_or(|d| d == "npu" || d.starts_with("npu:"));
            if !npu || scope.allocator.as_deref().is_some_and(|a| a != "HAL") {
                return Err(format!(
                    "{text:?}: hal_at_exit is driver (HAL) memory on NPUs: its scope is npu or npu:N (e.g. hal_at_exit.npu:0>1GiB)"
                ));
            }
        }
        let max = if metric.is_count() {
            rhs.parse::<u64>().map_err(|_| {
                format!(
                    "{text:?}: {} counts {}: {rhs:?} is not a whole number",
                    metric.as_str(),
                    if metric == Metric::Dropped {
                        "events"
                    } else {
                        "races"
                    }
                )
            })?
        } else {
            parse_size(rhs).map_err(|e| format!("{text:?}: {e}"))?
        };
        Ok(Limit {
            text,
            metric,
            scope,
            max,
        })
    }

    /// Parses a comma-separated list.
    ///
    /// # Errors
    /// As [`Limit::parse`]; an empty list or an empty item (`a,,b`: a limit lost in editing).
    pub fn parse_list(s: &str) -> Result<Vec<Limit>, String> {
        if s.trim().is_empty() {
            return Err("no limit given (e.g. leaks>1MiB,peak.npu:0>40GiB)".into());
        }
        let v: Vec<Limit> = s
            .split(',')
            .enumerate()
            .map(|(i, p)| {
                if p.trim().is_empty() {
                    Err(format!(
                        "item {} of the list is empty (limits are separated by single commas)",
                        i + 1
                    ))
                } else {
                    Limit::parse(p)
                }
            })
            .collect::<Result<_, _>>()?;
        // a limit given twice would report each crossing twice
        for (i, l) in v.iter().enumerate() {
            if v[..i].iter().any(|o| o.text == l.text) {
                return Err(format!("{:?} is given twice", l.text));
            }
        }
        Ok(v)
    }

    /// Whether this limit looks at any of `allocators` (`dropped` and `races` look at the
    /// process; whether races were recorded is the process's [`ProcessFigures::races`]):
    /// a scope that matches nothing in a run was not recorded there (or is a typo), and is
    /// said so, never passed as "ok".
    pub fn matches_any<'a>(
        &self,
        mut allocators: impl Iterator<Item = &'a AllocatorFigures>,
    ) -> bool {
        self.metric.is_count() || allocators.any(|a| self.looks_at(a))
    }

    /// Whether allocator `a` is in scope and measured by the metric (`leaks`: judged by the
    /// leak analysis; `hal_at_exit`: HAL).
    fn looks_at(&self, a: &AllocatorFigures) -> bool {
        self.scope.covers(a)
            && match self.metric {
                Metric::Leaks => a.leaked_bytes.is_some(),
                Metric::HalAtExit => a.allocator == "HAL",
                _ => true,
            }
    }
}

/// A limit crossed by one process.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Crossing {
    /// The limit as given.
    pub limit: String,
    /// The process, as the caller labels it (`pid 42 (rank 0)`).
    pub process: String,
    /// Device of the allocator that crossed it (`npu:0`, `cpu`), if one did.
    pub device: Option<String>,
    /// That allocator.
    pub allocator: Option<String>,
    /// The value measured.
    pub value: u64,
    /// The most allowed.
    pub max: u64,
    /// Where the memory was.
    pub site: Option<Site>,
}

impl Crossing {
    /// One line for people: which limit, by how much, where.
    pub fn line(&self, metric_is_count: bool) -> String {
        let fmt = |v: u64| {
            if metric_is_count {
                v.to_string()
            } else {
                size(v)
            }
        };
        let mut s = format!(
            "limit {} crossed by {}: {}",
            self.limit,
            self.process,
            fmt(self.value)
        );
        if let (Some(d), Some(a)) = (&self.device, &self.allocator) {
            s.push_str(&format!(" ({d} {a})"));
        }
        s.push_str(&format!(
            ", {} over {}",
            fmt(self.value - self.max),
            fmt(self.max)
        ));
        if let Some(site) = &self.site {
            s.push_str(&format!(
                "; {} in {} block(s) at {}",
                size(site.bytes),
                site.blocks,
                site.site
            ));
        }
        s
    }
}

/// Checks `limit` against one process (`dropped`: its dropped-event count; `races`: its race
/// count): one crossing per
/// allocator in scope over the limit, the blocks the program holds (pools, HOST, Python
/// objects) before the memory that backs them (HAL, arenas), as `memscope diff` orders them.
pub fn check(
    limit: &Limit,
    label: &str,
    f: &ProcessFigures,
    dropped: Option<u64>,
) -> Vec<Crossing> {
    if limit.metric == Metric::Dropped {
        return dropped
            .filter(|d| *d > limit.max)
            .map(|d| Crossing {
                limit: limit.text.clone(),
                process: label.to_owned(),
                device: None,
                allocator: None,
                value: d,
                max: limit.max,
                site: None,
            })
            .into_iter()
            .collect();
    }
    if limit.metric == Metric::Races {
        let crossing = |value, what: Option<(&str, &str)>, max| Crossing {
            limit: limit.text.clone(),
            process: label.to_owned(),
            device: what.map(|w| w.0.to_owned()),
            allocator: what.map(|w| w.1.to_owned()),
            value,
            max,
            site: None,
        };
        let mut v: Vec<Crossing> = f
            .races
            .filter(|n| *n > limit.max)
            .map(|n| crossing(n, None, limit.max))
            .into_iter()
            .collect();
        // marks that could not be checked are not passed as clean
        if f.races_unchecked > 0 {
            v.push(crossing(
                f.races_unchecked,
                Some(("sanitizer-op", "marks not checked")),
                0,
            ));
        }
        return v;
    }
    let value = |a: &AllocatorFigures| match limit.metric {
        Metric::Peak => a.peak_bytes,
        Metric::Leaks => a.leaked_bytes.unwrap_or(0),
        Metric::Live | Metric::HalAtExit => a.live_at_exit_bytes,
        Metric::Dropped | Metric::Races => 0,
    };
    let mut over: Vec<&AllocatorFigures> = f
        .allocators
        .iter()
        .filter(|a| limit.looks_at(a) && value(a) > limit.max)
        .collect();
    over.sort_by_key(|a| {
        let t = memscope_event_type(&a.allocator);
        (super::diff::level(t), std::cmp::Reverse(value(a)))
    });
    over.into_iter()
        .map(|a| Crossing {
            limit: limit.text.clone(),
            process: label.to_owned(),
            device: Some(a.device_name()),
            allocator: Some(a.allocator.clone()),
            value: value(a),
            max: limit.max,
            site: match limit.metric {
                Metric::Peak => a.peak_site.clone(),
                Metric::Leaks => a.leak_site.clone(),
                Metric::Live | Metric::HalAtExit => a.live_at_exit_site.clone(),
                Metric::Dropped | Metric::Races => None,
            },
        })
        .collect()
}

fn memscope_event_type(name: &str) -> memscope_core::event::EventType {
    memscope_core::event::EventType::parse(name)
        .unwrap_or_else(|| memscope_core::event::EventType::custom(name))
}

#[cfg(test)]
#[path = "thresholds_tests.rs"]
mod tests;
