//! The op/kernel compare of two runs, as the page reads it.

use serde::Serialize;

/// Compare of two runs.
#[derive(Clone, Debug, Serialize)]
pub struct CompareData {
    /// Label of the base run.
    pub base: String,
    /// Label of the compared run.
    pub compare: String,
    /// One block per level with rows on either side.
    pub levels: Vec<CompareLevel>,
}

/// Compare at one level.
#[derive(Clone, Debug, Serialize)]
pub struct CompareLevel {
    /// `op` or `kernel`.
    pub level: &'static str,
    /// The compare analysis' rows (capped: the largest |diff| kept, with their position).
    pub rows: Vec<CompareRowData>,
    /// Rows in all.
    pub rows_total: u64,
    /// Totals per name and device, largest |diff| first (capped).
    pub by_name: Vec<CompareAgg>,
    /// Names in all.
    pub names_total: u64,
    /// Notes of the analysis.
    pub notes: Vec<String>,
}

/// One compare row.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRowData {
    /// Position in the aligned sequence.
    pub i: u64,
    /// Op or kernel name.
    pub name: String,
    /// Device.
    pub device: u32,
    /// Memory change on the base side (`None`: no match).
    pub base: Option<i64>,
    /// Memory change on the compare side.
    pub compare: Option<i64>,
    /// compare − base.
    pub diff: i64,
}

/// Totals of one name on one device.
#[derive(Clone, Debug, Serialize)]
pub struct CompareAgg {
    /// Op or kernel name.
    pub name: String,
    /// Device.
    pub device: u32,
    /// Calls on the base side.
    pub base_n: u64,
    /// Calls on the compare side.
    pub compare_n: u64,
    /// Sum of the base side's changes.
    pub base: i64,
    /// Sum of the compare side's changes.
    pub compare: i64,
    /// compare − base.
    pub diff: i64,
}
