//! The CLI's text tables: borderless, each column as wide as its widest
//! cell, numbers right-aligned, indented under a section title; and the
//! cells they share.

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

/// A table with `header`; columns `right` (0-based) right-aligned.
pub fn new(header: &[&str], right: &[usize]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    for &i in right {
        if let Some(column) = t.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// `t`'s lines, two spaces in (the preset pads each cell by one).
pub fn indented(t: &Table) -> String {
    let mut out = String::new();
    for line in t.lines() {
        out.push(' ');
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A rate in the unit that shows it, to 3 significant digits: fabrics run
/// at Gbit/s, the BMv2 lab's at Mbit/s, and "0.00 Gb/s" hides both.
pub fn rate(bps: u64) -> String {
    // The unit of the value once rounded to 3 digits (999,999 b/s is
    // 1.00 Mb/s, not 1000 kb/s).
    let rounded = if bps < 1000 {
        bps as f64
    } else {
        let magnitude = 10f64.powi((bps as f64).log10().floor() as i32 - 2);
        (bps as f64 / magnitude).round() * magnitude
    };
    let (value, unit) = match rounded {
        b if b >= 1e9 => (b / 1e9, "Gb/s"),
        b if b >= 1e6 => (b / 1e6, "Mb/s"),
        b if b >= 1e3 => (b / 1e3, "kb/s"),
        b => (b, "b/s"),
    };
    let decimals = match value {
        v if v >= 100.0 || unit == "b/s" => 0,
        v if v >= 10.0 => 1,
        _ => 2,
    };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    /// Cells longer than any header set the width; numbers align right.
    #[test]
    fn widest_cell_sets_the_column() {
        let mut t = super::new(&["NAME", "N"], &[1]);
        t.add_row(vec!["a-much-longer-name", "7"]);
        t.add_row(vec!["b", "1234"]);
        let text = super::indented(&t);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "  NAME                   N",
                "  a-much-longer-name     7",
                "  b                   1234",
            ],
            "{text}"
        );
    }

    #[test]
    fn rates_read_in_their_own_unit() {
        assert_eq!(super::rate(400_000_000_000), "400 Gb/s");
        assert_eq!(super::rate(100_000_000_000), "100 Gb/s");
        assert_eq!(super::rate(12_500_000_000), "12.5 Gb/s");
        assert_eq!(super::rate(1_817_000), "1.82 Mb/s");
        assert_eq!(super::rate(6_000_000), "6.00 Mb/s");
        assert_eq!(super::rate(640_000), "640 kb/s");
        assert_eq!(super::rate(999), "999 b/s");
        assert_eq!(super::rate(0), "0 b/s");
        assert_eq!(super::rate(999_999), "1.00 Mb/s");
        assert_eq!(super::rate(99_960), "100 kb/s");
    }
}
