//! Bounded console lists (issue 23): a list printed on the console shows its first
//! [`CONSOLE_TOP`] items (largest or most relevant first) and one line counting the rest; the
//! whole list is in the file the console names (the process log, the run's summary file), so a
//! 20 000-step run prints tens of lines, not tens of thousands.
#![forbid(unsafe_code)]

/// Items of one list shown on the console.
pub const CONSOLE_TOP: usize = 10;

/// The lines of the first `top` of `items` (`render` writes an item's head line and detail
/// lines), then, when some were left out, the line `rest` makes of those left out.
pub fn top_n<T>(
    items: &[T],
    top: usize,
    mut render: impl FnMut(&T, &mut Vec<String>),
    rest: impl FnOnce(&[T]) -> String,
) -> Vec<String> {
    let mut lines = Vec::new();
    for it in items.iter().take(top) {
        render(it, &mut lines);
    }
    if items.len() > top {
        lines.push(rest(&items[top..]));
    }
    lines
}

/// The first and last rows of a long table (`top` in all), with one line in between that
/// `between` makes of the number left out; every row when there are at most `top`.
pub fn ends<T>(
    rows: &[T],
    top: usize,
    mut render: impl FnMut(&T) -> String,
    between: impl FnOnce(usize) -> String,
) -> Vec<String> {
    if rows.len() <= top {
        return rows.iter().map(render).collect();
    }
    let head = top.div_ceil(2);
    let tail = top - head;
    let mut lines: Vec<String> = rows[..head].iter().map(&mut render).collect();
    lines.push(between(rows.len() - head - tail));
    lines.extend(rows[rows.len() - tail..].iter().map(render));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_list_shows_its_top_items_and_counts_the_rest() {
        let v: Vec<u32> = (1..=25).collect();
        let lines = top_n(
            &v,
            3,
            |x, out| out.push(format!("item {x}")),
            |rest| format!("… {} more", rest.len()),
        );
        assert_eq!(lines, ["item 1", "item 2", "item 3", "… 22 more"]);
        let short = top_n(
            &v[..2],
            3,
            |x, out| out.push(x.to_string()),
            |_| unreachable!(),
        );
        assert_eq!(short, ["1", "2"]);
    }

    #[test]
    fn a_long_table_shows_its_first_and_last_rows() {
        let v: Vec<u32> = (1..=100).collect();
        let lines = ends(&v, 4, |x| x.to_string(), |n| format!("… {n} rows"));
        assert_eq!(lines, ["1", "2", "… 96 rows", "99", "100"]);
        assert_eq!(
            ends(&v[..3], 4, |x| x.to_string(), |_| unreachable!()).len(),
            3
        );
    }
}
