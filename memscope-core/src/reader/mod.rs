//! Dump-file readers (being written).
