//! The CLI's text tables: borderless, each column as wide as its widest
//! cell, numbers right-aligned, indented under a section title.

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
}
