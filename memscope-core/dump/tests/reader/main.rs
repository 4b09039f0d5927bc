//! The dump readers on files: formats and spellings of both tools, and bad input (one test
//! binary; each file is a module).

mod bad_input;
mod db_bad_input;
mod formats;
mod spellings;
