//! Myers' greedy O(ND) difference of two sequences (behaviour spec §10.3 step 3), with the tie
//! rule of msMemScope: on each diagonal go down (an insertion from the compare side) when
//! k = −d, or when k ≠ d and V[k−1] < V[k+1]; otherwise go right (a deletion from the base).
//!
//! The common prefix and suffix are matched first. The trace of the middle part costs O(D²)
//! memory, so past `max_d` differences the middle is paired by position instead (and the
//! result says so).

/// One step of the alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// `a[i]` matches `b[j]`.
    Match(usize, usize),
    /// `a[i]` has no partner (base only).
    Delete(usize),
    /// `b[j]` has no partner (compare only).
    Insert(usize),
}

/// Aligns `a` and `b`; the flag is `true` when the positional fallback was used.
pub fn diff<T: PartialEq>(a: &[T], b: &[T], max_d: usize) -> (Vec<Edit>, bool) {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let mut out: Vec<Edit> = (0..pre).map(|i| Edit::Match(i, i)).collect();
    let (middle, fell_back) = match middle(am, bm, max_d) {
        Some(m) => (m, false),
        None => (positional(am, bm), true),
    };
    out.extend(middle.into_iter().map(|e| match e {
        Edit::Match(i, j) => Edit::Match(i + pre, j + pre),
        Edit::Delete(i) => Edit::Delete(i + pre),
        Edit::Insert(j) => Edit::Insert(j + pre),
    }));
    let (an, bn) = (a.len() - suf, b.len() - suf);
    out.extend((0..suf).map(|i| Edit::Match(an + i, bn + i)));
    (out, fell_back)
}

fn positional<T: PartialEq>(a: &[T], b: &[T]) -> Vec<Edit> {
    let mut out = Vec::new();
    for i in 0..a.len().max(b.len()) {
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) if x == y => out.push(Edit::Match(i, i)),
            (x, y) => {
                if x.is_some() {
                    out.push(Edit::Delete(i));
                }
                if y.is_some() {
                    out.push(Edit::Insert(i));
                }
            }
        }
    }
    out
}

fn middle<T: PartialEq>(a: &[T], b: &[T], max_d: usize) -> Option<Vec<Edit>> {
    let (n, m) = (a.len() as i64, b.len() as i64);
    let max = (n + m) as usize;
    if max == 0 {
        return Some(Vec::new());
    }
    let off = max as i64 + 1;
    let mut v = vec![0i64; 2 * max + 3];
    let mut trace: Vec<Vec<i64>> = Vec::new();
    let mut found = None;
    'outer: for d in 0..=max as i64 {
        if d as usize > max_d {
            return None;
        }
        let mut k = -d;
        while k <= d {
            let down = k == -d || (k != d && v[(off + k - 1) as usize] < v[(off + k + 1) as usize]);
            let mut x = if down {
                v[(off + k + 1) as usize]
            } else {
                v[(off + k - 1) as usize] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[(off + k) as usize] = x;
            if x >= n && y >= m {
                trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
                found = Some(d);
                break 'outer;
            }
            k += 2;
        }
        trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
    }
    let dmax = found?;
    let mut edits = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (1..=dmax).rev() {
        let prev = &trace[(d - 1) as usize]; // k in [-(d-1), d-1]
        let at = |k: i64| prev[(k + d - 1) as usize];
        let k = x - y;
        let down = k == -d || (k != d && at(k - 1) < at(k + 1));
        let pk = if down { k + 1 } else { k - 1 };
        let px = at(pk);
        let py = px - pk;
        let (sx, sy) = if down { (px, py + 1) } else { (px + 1, py) };
        while x > sx && y > sy {
            x -= 1;
            y -= 1;
            edits.push(Edit::Match(x as usize, y as usize));
        }
        edits.push(if down {
            Edit::Insert(py as usize)
        } else {
            Edit::Delete(px as usize)
        });
        x = px;
        y = py;
    }
    while x > 0 && y > 0 {
        x -= 1;
        y -= 1;
        edits.push(Edit::Match(x as usize, y as usize));
    }
    edits.reverse();
    Some(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(a: &str, b: &str) -> String {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        let (e, _) = diff(&a, &b, 1000);
        e.iter()
            .map(|e| match *e {
                Edit::Match(i, _) => format!("={}", a[i]),
                Edit::Delete(i) => format!("-{}", a[i]),
                Edit::Insert(j) => format!("+{}", b[j]),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn insertions_and_deletions_are_found() {
        assert_eq!(render("abc", "abc"), "=a =b =c");
        assert_eq!(render("abcd", "abd"), "=a =b -c =d");
        assert_eq!(render("abd", "abxd"), "=a =b +x =d");
        assert_eq!(render("", "ab"), "+a +b");
        assert_eq!(render("ab", ""), "-a -b");
        // the classic example of Myers' paper: D = 5
        let (e, _) = diff(
            &"abcabba".chars().collect::<Vec<_>>(),
            &"cbabac".chars().collect::<Vec<_>>(),
            100,
        );
        assert_eq!(
            e.iter().filter(|e| !matches!(e, Edit::Match(..))).count(),
            5
        );
        assert_eq!(e.iter().filter(|e| matches!(e, Edit::Match(..))).count(), 4);
    }

    #[test]
    fn equal_names_align_by_position_with_the_extra_one_left_over() {
        let a = vec!["N/A"; 6];
        let b = vec!["N/A"; 5];
        let (e, fb) = diff(&a, &b, 10);
        assert!(!fb);
        assert_eq!(e.iter().filter(|e| matches!(e, Edit::Match(..))).count(), 5);
        assert_eq!(e.iter().filter(|e| matches!(e, Edit::Delete(_))).count(), 1);
    }

    #[test]
    fn too_many_differences_fall_back_to_positions() {
        let (e, fb) = diff(&[1, 2, 3, 4], &[5, 6, 7, 8], 2);
        assert!(fb);
        assert_eq!(e.len(), 8);
    }
}
