//! Links every built-in adapter crate so its `inventory::submit!` registration is kept
//! (design notes §5: a crate only listed in Cargo.toml is not linked).

use memscope_adapter_acl as _;
use memscope_adapter_atb as _;
use memscope_adapter_hal as _;
use memscope_adapter_host as _;
use memscope_adapter_mindspore as _;
use memscope_adapter_mstx as _;
use memscope_adapter_pta as _;
